//! What time it is, for the parts that decide by it: the engine's turns (the prompts' «hoy es»,
//! slots from now, pending actions that expire, the 24-hour window) and the embedded store.
//! The service runs on the system clock; `zaguan test` runs each conversation on a manual one,
//! so a recorded model answer meets the same prompt, the same slots and the same dates every
//! day it is replayed, and `wait: 25h` is a step, not a day.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// The machine's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock {
    at: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(at: DateTime<Utc>) -> Self {
        Self { at: Mutex::new(at) }
    }

    pub fn advance(&self, by: chrono::Duration) {
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        *at += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let start = DateTime::parse_from_rfc3339("2026-03-03T09:00:00Z")
            .unwrap()
            .to_utc();
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(chrono::Duration::hours(25));
        assert_eq!(clock.now(), start + chrono::Duration::hours(25));
    }
}
