//! Meta's sending limits, kept on our side so the Graph API rarely has to refuse us: a
//! throughput limit per business number (80 messages/s by default; Meta counts every call of
//! the number, so marks-as-read take a slot too) and the pair rate limit per recipient (about
//! one message every 6 s to one user, with bursts of up to 45). Waiting here is cheaper than a
//! 130429 / 131056 and its backoff.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The configured limits.
#[derive(Debug, Clone, PartialEq)]
pub struct SendLimits {
    /// Messages per second per business number.
    pub per_number: NonZeroU32,
    /// One message to the same user per this interval, on average…
    pub pair_interval: Duration,
    /// …with bursts of up to this many.
    pub pair_burst: NonZeroU32,
}

impl Default for SendLimits {
    fn default() -> Self {
        Self {
            per_number: NonZeroU32::new(80).expect("non-zero"),
            pair_interval: Duration::from_secs(6),
            pair_burst: NonZeroU32::new(45).expect("non-zero"),
        }
    }
}

/// How often idle recipients are forgotten: the sweep walks the whole table, so it is not
/// worth more than once a minute.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The limiters, shared by every sender of the process.
pub struct Limiters {
    /// This process's share of the number's throughput; replaced when the share changes.
    per_number: RwLock<Arc<DefaultKeyedRateLimiter<String>>>,
    per_recipient: DefaultKeyedRateLimiter<String>,
    last_forgot: std::sync::Mutex<Instant>,
    /// The whole number's rate, and how many processes share it.
    rate: NonZeroU32,
    instances: AtomicU32,
    /// Numbers Meta told to slow down (130429) and recipients it said were written to too
    /// often (131056), with when each may be sent to again.
    paused: std::sync::Mutex<std::collections::HashMap<String, Instant>>,
}

impl Limiters {
    pub fn new(limits: &SendLimits) -> Self {
        let pair = Quota::with_period(limits.pair_interval)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(limits.pair_burst);
        Self {
            per_number: RwLock::new(Arc::new(RateLimiter::keyed(Quota::per_second(
                limits.per_number,
            )))),
            per_recipient: RateLimiter::keyed(pair),
            last_forgot: std::sync::Mutex::new(Instant::now()),
            rate: limits.per_number,
            instances: AtomicU32::new(1),
            paused: std::sync::Mutex::default(),
        }
    }

    /// Sends from `phone_number_id` wait `pause` (Meta answered 130429: the number's
    /// throughput was exceeded).
    pub fn pause_number(&self, phone_number_id: &str, pause: Duration) {
        self.pause(number_key(phone_number_id), pause);
        metrics::counter!("zaguan_outbound_backoffs_total", "scope" => "number").increment(1);
    }

    /// Sends to `recipient` wait `pause` (Meta answered 131056: too many messages to that
    /// user in a short time).
    pub fn pause_recipient(&self, recipient: &str, pause: Duration) {
        self.pause(recipient_key(recipient), pause);
        metrics::counter!("zaguan_outbound_backoffs_total", "scope" => "recipient").increment(1);
    }

    /// A pause another instance was told of (kept in the store), `left` still to run.
    pub fn keep_pause(&self, key: &str, left: Duration) {
        self.pause(key.to_owned(), left);
    }

    fn pause(&self, key: String, pause: Duration) {
        let until = Instant::now() + pause;
        let mut paused = self.paused.lock().unwrap_or_else(|e| e.into_inner());
        let entry = paused.entry(key).or_insert(until);
        *entry = (*entry).max(until);
    }

    /// How long sends from `phone_number_id` to `recipient` must still wait for a pause.
    fn paused_for(&self, phone_number_id: &str, recipient: &str) -> Duration {
        let paused = self.paused.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        [number_key(phone_number_id), recipient_key(recipient)]
            .iter()
            .filter_map(|key| paused.get(key))
            .map(|until| until.saturating_duration_since(now))
            .max()
            .unwrap_or_default()
    }

    /// `instances` processes send for the same numbers: each keeps an equal share of the
    /// throughput limit (at least 1/s), so together they stay within Meta's. Per-recipient
    /// limits need no sharing: a conversation is sent for by one process at a time (its lease).
    pub fn set_instances(&self, instances: u32) {
        let instances = instances.max(1);
        if self.instances.swap(instances, Ordering::Relaxed) == instances {
            return;
        }
        let share = NonZeroU32::new(self.rate.get() / instances).unwrap_or(NonZeroU32::MIN);
        tracing::info!(
            instances,
            per_second = share.get(),
            "Graph API throughput shared"
        );
        metrics::gauge!("zaguan_outbound_rate_share").set(f64::from(share.get()));
        *self.per_number.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(RateLimiter::keyed(Quota::per_second(share)));
    }

    /// The messages per second this process may send for one number.
    pub fn share(&self) -> u32 {
        (self.rate.get() / self.instances.load(Ordering::Relaxed)).max(1)
    }

    fn per_number(&self) -> Arc<DefaultKeyedRateLimiter<String>> {
        self.per_number
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits until a message from `phone_number_id` to `recipient` is within both limits;
    /// returns how long it waited.
    pub async fn until_send_allowed(&self, phone_number_id: &str, recipient: &str) -> Duration {
        let started = Instant::now();
        let pause = self.paused_for(phone_number_id, recipient);
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        self.per_recipient
            .until_key_ready(&recipient.to_owned())
            .await;
        self.per_number()
            .until_key_ready(&phone_number_id.to_owned())
            .await;
        record_wait(started.elapsed())
    }

    /// Waits until another call of `phone_number_id` (a mark-as-read) is within its limit.
    pub async fn until_call_allowed(&self, phone_number_id: &str) -> Duration {
        let started = Instant::now();
        self.per_number()
            .until_key_ready(&phone_number_id.to_owned())
            .await;
        record_wait(started.elapsed())
    }

    /// Forgets recipients whose allowance is full again, so the table does not grow forever.
    /// Cheap to call often: it sweeps at most every [`FORGET_EVERY`].
    pub fn forget_idle(&self) {
        {
            let mut last = self
                .last_forgot
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if last.elapsed() < FORGET_EVERY {
                return;
            }
            *last = Instant::now();
        }
        self.per_recipient.retain_recent();
        self.per_number().retain_recent();
        let now = Instant::now();
        self.paused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, until| *until > now);
    }
}

/// The key of a business number's pause, here and in the store's `send_pauses`.
pub fn number_key(phone_number_id: &str) -> String {
    format!("number:{phone_number_id}")
}

/// The key of a recipient's pause, here and in the store's `send_pauses`.
pub fn recipient_key(recipient: &str) -> String {
    format!("recipient:{recipient}")
}

fn record_wait(waited: Duration) -> Duration {
    if waited >= Duration::from_millis(1) {
        metrics::counter!("zaguan_outbound_rate_limit_waits_total").increment(1);
        metrics::histogram!("zaguan_outbound_rate_limit_wait_seconds").record(waited.as_secs_f64());
    }
    waited
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_recipient_gets_its_burst_then_waits() {
        let limits = SendLimits {
            per_number: NonZeroU32::new(1000).unwrap(),
            pair_interval: Duration::from_millis(200),
            pair_burst: NonZeroU32::new(3).unwrap(),
        };
        let limiters = Limiters::new(&limits);
        for _ in 0..3 {
            assert!(
                limiters.until_send_allowed("1", "34600111222").await < Duration::from_millis(50)
            );
        }
        // The fourth waits for the pair interval; another user does not.
        assert!(limiters.until_send_allowed("1", "34600999888").await < Duration::from_millis(50));
        assert!(
            limiters.until_send_allowed("1", "34600111222").await >= Duration::from_millis(150)
        );
    }

    #[test]
    fn instances_share_the_numbers_throughput() {
        let limiters = Limiters::new(&SendLimits::default());
        assert_eq!(limiters.share(), 80);
        limiters.set_instances(3);
        assert_eq!(limiters.share(), 26);
        limiters.set_instances(200);
        assert_eq!(limiters.share(), 1, "never below one a second");
        limiters.set_instances(0);
        assert_eq!(limiters.share(), 80, "zero is read as one");
    }
}
