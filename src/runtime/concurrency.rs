//! How many conversations the workers serve at once, following the database.
//!
//! A slow database must mean slower progress, never failed attempts: when the store's calls
//! slow down or go unanswered, fewer turns run at once (the limit shrinks by a third), and when
//! they are fast again and the workers have more to do than the limit allows, it grows back
//! (doubling while far below the last limit that strained the store, then a tenth at a time).
//! Turns waiting on the LLM do not touch the store, so with a healthy database the limit
//! climbs to `ZAGUAN_WORKER_CONCURRENCY`.
//!
//! "Slow" is the calls' mean time, not only their slowest: a database that answers one call at
//! a time answers every call late once many turns run, and each turn's next call queues behind
//! all the others'. Then the oldest conversation, taken first, waits as long as the newest; with
//! fewer at once it is answered first and in seconds, and the database does the same work.

use crate::store::{Pressure, SLOW_CALL, STRAINED_MEAN};

/// The fewest conversations served at once, however slow the database.
pub const MIN_CONCURRENCY: usize = 2;

/// Share of slow calls in a window above which the database counts as strained.
const SLOW_SHARE: f64 = 0.2;

#[derive(Debug, Clone)]
pub struct AdaptiveLimit {
    limit: f64,
    max: f64,
    /// The limit when the store last strained: growth slows down near it.
    ceiling: f64,
}

impl AdaptiveLimit {
    /// Starts at `start` (clamped), never above `max`.
    pub fn new(start: usize, max: usize) -> Self {
        let max = max.max(MIN_CONCURRENCY) as f64;
        Self {
            limit: (start as f64).clamp(MIN_CONCURRENCY as f64, max),
            max,
            ceiling: max,
        }
    }

    /// Conversations that may be served at once now.
    pub fn get(&self) -> usize {
        self.limit as usize
    }

    /// Adjusts to a window of store calls (`None`: a store that cannot be strained, so no
    /// limit but the maximum); `busy` when the workers had more waiting than the limit let
    /// them start. Returns whether the limit changed.
    pub fn adjust(&mut self, pressure: Option<&Pressure>, busy: bool) -> bool {
        let before = self.get();
        let Some(pressure) = pressure else {
            self.limit = self.max;
            return self.get() != before;
        };
        let strained = pressure.unavailable > 0
            || (pressure.calls > 0 && pressure.slow as f64 > pressure.calls as f64 * SLOW_SHARE)
            || (pressure.calls > 0 && pressure.mean > STRAINED_MEAN);
        // Growing takes finished calls well under the strained mean, and none long unanswered
        // (they show nowhere else until they end); between the two, the limit holds.
        let quick = pressure.calls > 0
            && pressure.mean <= STRAINED_MEAN / 2
            && pressure.in_flight_age <= SLOW_CALL;
        if strained {
            self.ceiling = self.limit;
            self.limit = (self.limit * 2.0 / 3.0).max(MIN_CONCURRENCY as f64);
        } else if busy && quick {
            let step = if self.limit * 2.0 <= self.ceiling {
                self.limit
            } else {
                (self.limit / 10.0).max(1.0)
            };
            self.limit = (self.limit + step).min(self.max);
            if self.limit > self.ceiling {
                self.ceiling = self.max;
            }
        }
        self.get() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn window(calls: u64, slow: u64, unavailable: u64) -> Pressure {
        Pressure {
            calls,
            slow,
            unavailable,
            mean: Duration::from_millis(5),
            ..Pressure::default()
        }
    }

    #[test]
    fn calls_queueing_on_average_shrink_it_though_none_is_slow_alone() {
        let mut limit = AdaptiveLimit::new(32, 256);
        let queueing = Pressure {
            mean: STRAINED_MEAN + Duration::from_millis(1),
            ..window(100, 0, 0)
        };
        limit.adjust(Some(&queueing), true);
        assert_eq!(limit.get(), 21);
    }

    #[test]
    fn it_holds_between_quick_and_strained_and_while_calls_hang() {
        let mut limit = AdaptiveLimit::new(32, 256);
        let middling = Pressure {
            mean: STRAINED_MEAN * 3 / 4,
            ..window(100, 0, 0)
        };
        assert!(!limit.adjust(Some(&middling), true));
        let hanging = Pressure {
            in_flight: 32,
            in_flight_age: SLOW_CALL * 2,
            ..window(10, 0, 0)
        };
        assert!(
            !limit.adjust(Some(&hanging), true),
            "unfinished calls hold it"
        );
        let nothing_finished = Pressure {
            in_flight: 32,
            ..window(0, 0, 0)
        };
        assert!(!limit.adjust(Some(&nothing_finished), true));
        assert_eq!(limit.get(), 32);
        limit.adjust(Some(&window(100, 0, 0)), true);
        assert_eq!(limit.get(), 64, "quick again: it grows");
    }

    #[test]
    fn a_strained_store_shrinks_the_limit_to_its_floor() {
        let mut limit = AdaptiveLimit::new(256, 256);
        limit.adjust(Some(&window(100, 50, 0)), true);
        assert_eq!(limit.get(), 170);
        limit.adjust(Some(&window(100, 0, 3)), true);
        assert_eq!(limit.get(), 113);
        for _ in 0..20 {
            limit.adjust(Some(&window(10, 10, 0)), true);
        }
        assert_eq!(limit.get(), MIN_CONCURRENCY);
    }

    #[test]
    fn a_fast_store_grows_it_back_only_when_there_is_more_to_do() {
        let mut limit = AdaptiveLimit::new(4, 256);
        assert!(
            !limit.adjust(Some(&window(100, 0, 0)), false),
            "idle: no growth"
        );
        limit.adjust(Some(&window(100, 1, 0)), true);
        assert_eq!(limit.get(), 8, "far below any strain: doubles");
        for _ in 0..10 {
            limit.adjust(Some(&window(100, 0, 0)), true);
        }
        assert_eq!(limit.get(), 256, "never above the maximum");
    }

    #[test]
    fn a_store_that_cannot_strain_gets_the_maximum_at_once() {
        let mut limit = AdaptiveLimit::new(4, 10_000);
        assert!(limit.adjust(None, false));
        assert_eq!(limit.get(), 10_000);
    }

    #[test]
    fn near_the_last_strain_it_grows_slowly() {
        let mut limit = AdaptiveLimit::new(90, 256);
        limit.adjust(Some(&window(10, 10, 0)), true); // strained at 90 → 60
        assert_eq!(limit.get(), 60);
        limit.adjust(Some(&window(10, 0, 0)), true); // 60 × 2 > 90: a tenth
        assert_eq!(limit.get(), 66);
        limit.adjust(Some(&window(10, 0, 0)), true);
        assert_eq!(limit.get(), 72);
    }
}
