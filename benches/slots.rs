//! Free visit times for a week of 10 agents, each with 200 busy events from their own
//! calendar: the arithmetic `list_available_slots` runs for a listing (issue target: < 5 ms),
//! and reading one agent's 200-event iCalendar feed into busy times (done when it is fetched,
//! not per request).
//!
//! `cargo bench --bench slots`

use std::hint::black_box;

use chrono::{Duration, TimeZone as _};
use criterion::{Criterion, criterion_group, criterion_main};
use zaguan::business::Business;
use zaguan::realestate::StaffMember;
use zaguan::realestate::calendar::ics::{Busy, busy_times};
use zaguan::realestate::calendar::slots::free_starts;

/// 200 events over ten weeks, as a working agent's calendar holds them: meetings of 30 to 90
/// minutes at scattered hours, a few weekly recurring ones, and all-day absences.
fn calendar(agent: usize) -> String {
    let mut ics = String::from("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\n");
    for i in 0..200 {
        let date = chrono::NaiveDate::from_ymd_opt(2027, 1, 4).unwrap()
            + Duration::days(((i * 3 + agent) % 70) as i64);
        let day = date.format("%Y%m%d").to_string();
        let next = (date + Duration::days(1)).format("%Y%m%d").to_string();
        let hour = 8 + (i * 7 + agent) % 12;
        let minute = (i * 13) % 4 * 15;
        let length = 30 + (i % 3) * 30;
        let (end_hour, end_minute) = (hour + (minute + length) / 60, (minute + length) % 60);
        let extra = if i % 40 == 0 {
            "RRULE:FREQ=WEEKLY;COUNT=10\r\n"
        } else {
            ""
        };
        if i % 67 == 0 {
            ics.push_str(&format!(
                "BEGIN:VEVENT\r\nUID:{agent}-{i}\r\nDTSTART;VALUE=DATE:{day}\r\nDTEND;VALUE=DATE:{next}\r\nSUMMARY:Fuera\r\nEND:VEVENT\r\n"
            ));
        } else {
            ics.push_str(&format!(
                "BEGIN:VEVENT\r\nUID:{agent}-{i}\r\nDTSTART;TZID=Europe/Madrid:{day}T{hour:02}{minute:02}00\r\nDTEND;TZID=Europe/Madrid:{day}T{end_hour:02}{end_minute:02}00\r\n{extra}SUMMARY:Reunión\r\nEND:VEVENT\r\n"
            ));
        }
    }
    ics.push_str("END:VCALENDAR\r\n");
    ics
}

fn bench(c: &mut Criterion) {
    let tz = chrono_tz::Europe::Madrid;
    let from = tz.with_ymd_and_hms(2027, 1, 4, 0, 0, 0).unwrap().to_utc();
    let to = from + Duration::days(7);
    let agents: Vec<(StaffMember, Vec<Busy>)> = (0..10)
        .map(|i| {
            let member = StaffMember {
                id: format!("A-{i:02}"),
                name: format!("Agente {i}"),
                visit_minutes: Some(30 + 15 * (i as u32 % 3)),
                ..StaffMember::default()
            };
            let busy = busy_times(&calendar(i), from, to, tz).unwrap().busy;
            (member, busy)
        })
        .collect();
    let business = Business::default();
    let slots: usize = agents
        .iter()
        .map(|(m, busy)| free_starts(m, &business, tz, 30, busy, from, to).len())
        .sum();
    eprintln!(
        "{} busy intervals, {slots} free starts over the week",
        agents.iter().map(|(_, b)| b.len()).sum::<usize>()
    );
    c.bench_function("free starts, 10 agents x 200 events, a week", |b| {
        b.iter(|| {
            for (member, busy) in &agents {
                black_box(free_starts(member, &business, tz, 30, busy, from, to));
            }
        })
    });
    let one = calendar(0);
    c.bench_function("busy times of one 200-event calendar, a week of it", |b| {
        b.iter(|| black_box(busy_times(black_box(&one), from, to, tz).unwrap()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
