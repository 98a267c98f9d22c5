//! Free visit times from an agent's real day: their hours (or the agency's), minus the
//! business file's holidays, minus what they are busy with, in steps of their visit length
//! with a buffer between visits. Written by hand: this arithmetic is the product.
//!
//! Every start of one agent lies on the grid of their day (each open period's start plus
//! whole steps), whatever listing it is for, so the claim `agent:{id}:{start}` taken when a
//! visit is booked keeps one agent at one place at a time, across listings and instances.

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

use super::ics::Busy;
use crate::business::{Business, Schedule, WeeklyHours};
use crate::realestate::{Property, Slot, StaffMember};

/// Between two visits of one agent: getting from one door to the next.
pub const BUFFER: Duration = Duration::minutes(15);
/// Visit hours when neither the agent nor the business file gives any: office days, never
/// the middle of the night.
const DEFAULT_HOURS: &[(&str, &[&str])] = &[
    ("monday", &["9:30-14:00", "16:30-20:00"]),
    ("tuesday", &["9:30-14:00", "16:30-20:00"]),
    ("wednesday", &["9:30-14:00", "16:30-20:00"]),
    ("thursday", &["9:30-14:00", "16:30-20:00"]),
    ("friday", &["9:30-14:00", "16:30-20:00"]),
    ("saturday", &["10:00-14:00"]),
];

/// The staff who show `property`: its agent (`properties.agent_id`) when active, else the
/// active staff whose zones name its city or neighbourhood.
pub fn agents_of<'a>(property: &Property, staff: &'a [StaffMember]) -> Vec<&'a StaffMember> {
    let active = || staff.iter().filter(|m| m.is_active());
    if let Some(agent) = &property.agent_id
        && let Some(member) = active().find(|m| &m.id == agent)
    {
        return vec![member];
    }
    let key = |text: &str| crate::agents::keywords::tokens(text).join(" ");
    let places = [key(&property.city), key(&property.neighbourhood)];
    active()
        .filter(|m| {
            m.zones
                .iter()
                .any(|zone| places.iter().any(|p| !p.is_empty() && *p == key(zone)))
        })
        .collect()
}

/// The hours `member` shows listings in.
fn hours_of(member: &StaffMember, business: &Business) -> WeeklyHours {
    if let Some(days) = &member.hours
        && let Ok(hours) = crate::business::week_from(days)
    {
        return hours;
    }
    if business.hours.is_some() {
        return business.opening_hours().into_owned();
    }
    let days = DEFAULT_HOURS
        .iter()
        .map(|(day, spans)| {
            (
                (*day).to_owned(),
                spans.iter().map(|s| (*s).to_owned()).collect(),
            )
        })
        .collect();
    crate::business::week_from(&days).expect("the default hours read")
}

/// Free starts of `member` in `[from, to)`: on the grid of their open periods, each with
/// room for a visit and the buffer around it clear of `busy` (sorted or not).
pub fn free_starts(
    member: &StaffMember,
    business: &Business,
    tz: Tz,
    default_minutes: u32,
    busy: &[Busy],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let hours = hours_of(member, business);
    let schedule = if member.hours.is_some() {
        Schedule::new(&hours, &business.holidays, tz)
    } else {
        business.schedule(&hours, tz)
    };
    let schedule = if member.works_holidays {
        schedule.without_holidays()
    } else {
        schedule
    };
    let visit = Duration::minutes(i64::from(member.visit_minutes.unwrap_or(default_minutes)));
    let step = visit + BUFFER;
    let mut starts = Vec::new();
    // Periods are read from the start of the day, so the grid does not move with `from`.
    let day_start = crate::business::start_of_today(from, tz);
    for (open, close) in schedule.periods_between(day_start, to) {
        let mut at = open;
        while at + visit <= close {
            let clear = !busy
                .iter()
                .any(|b| b.start < at + visit + BUFFER && b.end > at - BUFFER);
            if at >= from && clear {
                starts.push(at);
            }
            at += step;
        }
    }
    starts
}

/// The claim that keeps an agent at one place at a time (see the module's doc).
pub fn agent_claim(agent: &str, starts_at: DateTime<Utc>) -> String {
    format!(
        "agent:{}:{}",
        agent.trim().to_lowercase(),
        starts_at.format("%Y%m%d%H%M")
    )
}

/// The slot of `property` at `start` with `member`: an id that names all three, so the same
/// time computed twice is the same slot.
pub fn slot_at(
    property: &Property,
    member: &StaffMember,
    start: DateTime<Utc>,
    minutes: u32,
) -> Slot {
    Slot {
        id: format!(
            "S-{}-{}-{}",
            property.id.replace('-', ""),
            start.format("%Y%m%d%H%M"),
            member.id.replace('-', "")
        ),
        property_id: property.id.clone(),
        starts_at: start,
        minutes: member.visit_minutes.unwrap_or(minutes),
        // As customers are told it; [`super::is_theirs`] knows a member by it.
        agent: member.name.clone(),
    }
}

#[cfg(test)]
mod tests;
