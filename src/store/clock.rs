//! The database's clock, as this process knows it.
//!
//! Instances' wall clocks need not agree (a container's can run seconds off), but the order of
//! a conversation's messages across instances rests on their `received_at`. Each heartbeat
//! brings back the database's time; from then on this process reads the database's clock as
//! that time plus its own monotonic clock's progress, so every instance stamps arrivals on one
//! clock, to within a round trip.

use std::sync::Mutex;
use std::time::Instant;

use chrono::{DateTime, Utc};

#[derive(Debug, Default)]
pub struct StoreClock {
    /// The database's time at the last heartbeat, and when its answer came back.
    anchor: Mutex<Option<(DateTime<Utc>, Instant)>>,
}

impl StoreClock {
    /// The database's time now; this process's wall clock until a heartbeat anchored it.
    pub fn now(&self) -> DateTime<Utc> {
        self.anchored_now().unwrap_or_else(Utc::now)
    }

    /// The database's time now, once a heartbeat brought it (never later than the truth:
    /// the answer was stamped before it came back).
    pub fn anchored_now(&self) -> Option<DateTime<Utc>> {
        let anchor = *self.anchor.lock().unwrap_or_else(|e| e.into_inner());
        anchor.map(|(at, answered)| {
            at + chrono::Duration::from_std(answered.elapsed()).unwrap_or_default()
        })
    }

    /// The database stamped `at` on an answer that came back at `answered`.
    pub fn anchor(&self, at: DateTime<Utc>, answered: Instant) {
        *self.anchor.lock().unwrap_or_else(|e| e.into_inner()) = Some((at, answered));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_database_time_on_the_monotonic_clock() {
        let clock = StoreClock::default();
        assert!(clock.anchored_now().is_none());
        let behind = Utc::now() - chrono::Duration::seconds(90);
        clock.anchor(behind, Instant::now());
        let now = clock.now();
        assert!(now >= behind);
        assert!(
            now < behind + chrono::Duration::seconds(5),
            "{now} vs {behind}"
        );
    }
}
