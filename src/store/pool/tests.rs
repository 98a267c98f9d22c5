use super::*;

#[test]
fn lanes_share_the_pool() {
    assert_eq!(lane_sizes(32), [2, 8, 22]);
    assert_eq!(lane_sizes(10), [2, 2, 6]);
    assert_eq!(lane_sizes(4), [1, 1, 2]);
    assert_eq!(lane_sizes(1), [1, 1, 1]);
    for size in 1..200 {
        let lanes = lane_sizes(size);
        assert!(lanes.iter().all(|n| *n >= 1), "{size}: {lanes:?}");
        assert_eq!(lanes.iter().sum::<usize>(), (size as usize).max(3));
    }
}
