//! Abuse limits: one WhatsApp number must not be able to burn the LLM budget.
//!
//! Two limits, both applied by the engine side, never by dropping messages:
//! - **Turns per user** ([`UserLimits`], per process): past the quota a conversation's next turn
//!   waits until the user's bucket refills. Everything that arrives meanwhile is stored and
//!   merged into that one turn, so a flood costs one answer. The user is told once per episode
//!   (a polite "slow down", not counted as an answer).
//! - **Daily tokens per conversation** (`EngineSettings::daily_token_budget`, shared through the
//!   store): once a conversation has used its budget since midnight UTC, its turns are served
//!   without calling a model — by the offline engine from the agency's data, or, without one,
//!   with [`BUDGET_REPLY`] — and it is flagged for a person.

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::domain::WaId;

/// Sent once when a user's turns start being held back. Translated like any reply.
pub const SLOW_DOWN: &str = "Estás enviando muchos mensajes seguidos. Los leo todos y te \
                             respondo en unos segundos.";

/// Answers every turn of a conversation past its daily token budget.
pub const BUDGET_REPLY: &str = "Hemos alcanzado el límite de consultas automáticas de hoy para \
                                esta conversación; mañana puedes volver a escribir.";

/// The reason shown to operators for a conversation flagged by the budget.
pub const BUDGET_HANDOFF_REASON: &str = "daily token budget used up";

/// At most one "slow down" per user per this long.
const NOTICE_EVERY: Duration = Duration::from_secs(600);

/// How often idle users are forgotten (the sweep walks the whole table).
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The per-user turn limit of this process.
pub struct UserLimits {
    turns: Option<DefaultKeyedRateLimiter<WaId>>,
    notices: DefaultKeyedRateLimiter<WaId>,
    last_forgot: Mutex<Instant>,
}

/// What the worker does with a conversation's next turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Now,
    /// Wait this long first; `notify` when the user has not been told in this episode.
    Wait {
        wait: Duration,
        notify: bool,
    },
}

impl UserLimits {
    /// `turns`: the quota of turns per user; `None` switches the limit off.
    pub fn new(turns: Option<Quota>) -> Self {
        let notices =
            Quota::with_period(NOTICE_EVERY).unwrap_or_else(|| Quota::per_minute(NonZeroU32::MIN));
        Self {
            turns: turns.map(RateLimiter::keyed),
            notices: RateLimiter::keyed(notices),
            last_forgot: Mutex::new(Instant::now()),
        }
    }

    /// `per_minute` turns a minute per user, all of them available at once; 0 is off.
    pub fn per_minute(per_minute: u32) -> Self {
        Self::new(NonZeroU32::new(per_minute).map(Quota::per_minute))
    }

    /// Takes one turn from the user's bucket, or says how long until there is one.
    pub fn admit(&self, wa_id: &WaId) -> Admission {
        self.forget_idle();
        let Some(turns) = &self.turns else {
            return Admission::Now;
        };
        match turns.check_key(wa_id) {
            Ok(()) => Admission::Now,
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let notify = self.notices.check_key(wa_id).is_ok();
                metrics::counter!("zaguan_user_throttled_total").increment(1);
                Admission::Wait { wait, notify }
            }
        }
    }

    /// Drops users whose buckets are full again, so the tables stay as small as the set of
    /// users active in the last minutes.
    fn forget_idle(&self) {
        let mut last = self.last_forgot.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() < FORGET_EVERY {
            return;
        }
        *last = Instant::now();
        if let Some(turns) = &self.turns {
            turns.retain_recent();
        }
        self.notices.retain_recent();
    }
}

impl Default for UserLimits {
    fn default() -> Self {
        Self::new(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_past_the_quota_waits_and_is_told_once() {
        let limits = UserLimits::new(Some(
            Quota::with_period(Duration::from_secs(60))
                .unwrap()
                .allow_burst(NonZeroU32::new(2).unwrap()),
        ));
        let ana = WaId::parse("34600000001").unwrap();
        let bea = WaId::parse("34600000002").unwrap();
        assert_eq!(limits.admit(&ana), Admission::Now);
        assert_eq!(limits.admit(&ana), Admission::Now);
        let Admission::Wait { wait, notify } = limits.admit(&ana) else {
            panic!("the third turn in a minute waits");
        };
        assert!(notify);
        assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60));
        assert!(matches!(
            limits.admit(&ana),
            Admission::Wait { notify: false, .. }
        ));
        // Another user is not affected.
        assert_eq!(limits.admit(&bea), Admission::Now);
    }

    #[test]
    fn zero_switches_the_limit_off() {
        let limits = UserLimits::per_minute(0);
        let ana = WaId::parse("34600000001").unwrap();
        for _ in 0..1000 {
            assert_eq!(limits.admit(&ana), Admission::Now);
        }
    }
}
