use chrono::TimeZone as _;
use chrono_tz::Europe::Madrid;

use super::*;

fn madrid(day: u32, hour: u32, minute: u32) -> DateTime<Utc> {
    Madrid
        .with_ymd_and_hms(2026, 12, day, hour, minute, 0)
        .unwrap()
        .to_utc()
}

fn business() -> Business {
    crate::business::parse(
        "name = \"Prueba\"\n[hours]\nmonday = [\"9:00-14:00\"]\ntuesday = [\"9:00-14:00\"]\n\
         wednesday = [\"9:00-14:00\"]\nthursday = [\"9:00-14:00\"]\nfriday = [\"9:00-14:00\"]\n\
         [[holidays]]\ndate = \"2026-12-08\"\nname = \"Inmaculada\"\n",
    )
    .unwrap()
}

fn lucia() -> StaffMember {
    StaffMember {
        id: "A-01".into(),
        name: "Lucía".into(),
        visit_minutes: Some(45),
        zones: vec!["Valencia".into()],
        ..StaffMember::default()
    }
}

#[test]
fn a_day_is_cut_into_visits_with_a_buffer_and_busy_times_block_exactly() {
    // Monday 7 December 2026: 9:00-14:00, steps of 45 + 15 minutes.
    let free = free_starts(
        &lucia(),
        &business(),
        Madrid,
        30,
        &[],
        madrid(7, 0, 0),
        madrid(8, 0, 0),
    );
    let hours: Vec<String> = free
        .iter()
        .map(|t| t.with_timezone(&Madrid).format("%H:%M").to_string())
        .collect();
    assert_eq!(hours, ["09:00", "10:00", "11:00", "12:00", "13:00"]);
    // A meeting 10:30-11:10 takes 10:00 (its buffer) and 11:00, nothing else.
    let busy = [Busy {
        start: madrid(7, 10, 30),
        end: madrid(7, 11, 10),
    }];
    let free = free_starts(
        &lucia(),
        &business(),
        Madrid,
        30,
        &busy,
        madrid(7, 0, 0),
        madrid(8, 0, 0),
    );
    assert_eq!(free, [madrid(7, 9, 0), madrid(7, 12, 0), madrid(7, 13, 0)]);
    // Asked from 10:20, the grid stays where it was.
    let free = free_starts(
        &lucia(),
        &business(),
        Madrid,
        30,
        &[],
        madrid(7, 10, 20),
        madrid(8, 0, 0),
    );
    assert_eq!(free[0], madrid(7, 11, 0));
}

#[test]
fn a_holiday_has_no_visits_unless_the_agent_works_it() {
    let holiday = free_starts(
        &lucia(),
        &business(),
        Madrid,
        30,
        &[],
        madrid(8, 0, 0),
        madrid(9, 0, 0),
    );
    assert!(holiday.is_empty(), "{holiday:?}");
    let mut works = lucia();
    works.works_holidays = true;
    assert_eq!(
        free_starts(
            &works,
            &business(),
            Madrid,
            30,
            &[],
            madrid(8, 0, 0),
            madrid(9, 0, 0)
        )
        .len(),
        5
    );
    // Their own hours, still without the holiday.
    let mut own = lucia();
    own.hours = Some([("tuesday".to_owned(), vec!["16:00-18:00".to_owned()])].into());
    assert!(
        free_starts(
            &own,
            &business(),
            Madrid,
            30,
            &[],
            madrid(8, 0, 0),
            madrid(9, 0, 0)
        )
        .is_empty()
    );
    assert_eq!(
        free_starts(
            &own,
            &business(),
            Madrid,
            30,
            &[],
            madrid(15, 0, 0),
            madrid(16, 0, 0)
        ),
        [madrid(15, 16, 0), madrid(15, 17, 0)]
    );
}

#[test]
fn without_any_hours_visits_keep_office_days() {
    let none = Business::default();
    let sunday = free_starts(
        &lucia(),
        &none,
        Madrid,
        30,
        &[],
        madrid(6, 0, 0),
        madrid(7, 0, 0),
    );
    assert!(sunday.is_empty(), "no visits on a Sunday by default");
    let monday = free_starts(
        &lucia(),
        &none,
        Madrid,
        30,
        &[],
        madrid(7, 0, 0),
        madrid(8, 0, 0),
    );
    assert!(monday.iter().all(|t| {
        let hour = t.with_timezone(&Madrid).format("%H").to_string();
        ("09".."20").contains(&hour.as_str())
    }));
}

#[test]
fn a_listing_is_shown_by_its_agent_else_by_whoever_covers_its_city() {
    let set = crate::realestate::demo::demo_set(madrid(1, 0, 0).date_naive(), Madrid);
    let mut property = set
        .properties
        .iter()
        .find(|p| p.city == "Valencia")
        .unwrap()
        .clone();
    let mut marta = lucia();
    marta.id = "A-02".into();
    marta.name = "Marta".into();
    marta.zones = vec!["VALENCIA".into()];
    let mut gone = lucia();
    gone.id = "A-03".into();
    gone.disabled_at = Some(madrid(1, 0, 0));
    let staff = [lucia(), marta, gone];
    let ids = |agents: Vec<&StaffMember>| agents.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(agents_of(&property, &staff)), ["A-01", "A-02"]);
    property.agent_id = Some("A-02".into());
    assert_eq!(ids(agents_of(&property, &staff)), ["A-02"]);
    property.agent_id = Some("A-03".into());
    assert_eq!(
        ids(agents_of(&property, &staff)),
        ["A-01", "A-02"],
        "a disabled agent shows nothing"
    );
}
