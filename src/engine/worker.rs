//! Workers: take conversations with open inbox messages or unsent replies, one turn at a time
//! per conversation, in arrival order, and send each turn's reply before the next turn. A
//! conversation is claimed with a lease, so processes sharing one MongoDB never run (or send
//! for) the same conversation at once; a lease left by a dead process expires and is taken over,
//! and its `processing` messages are resumed and its unsent parts sent.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinHandle;

use super::abuse::{Admission, SLOW_DOWN, UserLimits};
use super::turn::{Engine, EngineError};
use crate::domain::{WaId, WaMessageId};
use crate::outbound::Outbound;
use crate::store::{InboxStatus, StoreError};

/// Wait after a wake-up before reading the inbox, so a burst costs one query.
const DEBOUNCE: Duration = Duration::from_millis(25);

/// How the workers of one process behave.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// This process's name in `lease_owner`.
    pub owner: String,
    /// Conversations processed at once by this process.
    pub concurrency: usize,
    /// How long a claim holds; renewed after every turn. Longer than any single turn.
    pub lease: Duration,
    /// Look for work at least this often, even without a webhook signal.
    pub poll: Duration,
    /// Attempts after which an inbox message is marked `failed` instead of retried forever.
    pub max_attempts: u32,
    /// Turns per user (see [`UserLimits`]); `None` is no limit.
    pub user_turns: Option<governor::Quota>,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            owner: format!(
                "{}-{}",
                std::env::var("HOSTNAME").unwrap_or_else(|_| "zaguan".to_owned()),
                std::process::id()
            ),
            concurrency: 16,
            lease: Duration::from_secs(300),
            poll: Duration::from_secs(1),
            max_attempts: 5,
            user_turns: None,
        }
    }
}

/// The running workers; `stop` lets in-flight turns finish.
pub struct Workers {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Workers {
    pub fn spawn(
        engine: Arc<Engine>,
        outbound: Arc<Outbound>,
        signal: Arc<Notify>,
        settings: WorkerSettings,
    ) -> Self {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(dispatch(engine, outbound, signal, settings, stopped));
        Self { stop, task }
    }

    /// Stops taking new conversations and waits for the turns in flight.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }

    /// Drains: stops taking conversations, lets each turn in flight finish (then releases its
    /// lease, so another instance takes the conversation at once) for up to `deadline`.
    /// `false` when turns were still running at the deadline: their leases expire by
    /// themselves.
    pub async fn drain(self, deadline: Duration) -> bool {
        let _ = self.stop.send(true);
        let mut task = self.task;
        match tokio::time::timeout(deadline, &mut task).await {
            Ok(_) => true,
            Err(_) => {
                tracing::warn!(
                    ?deadline,
                    "drain deadline passed with turns still running; their conversations are \
                     taken over when the leases expire"
                );
                task.abort();
                false
            }
        }
    }
}

async fn dispatch(
    engine: Arc<Engine>,
    outbound: Arc<Outbound>,
    signal: Arc<Notify>,
    settings: WorkerSettings,
    mut stopped: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(settings.concurrency));
    let in_flight: Arc<Mutex<HashSet<WaId>>> = Arc::default();
    let limits = Arc::new(UserLimits::new(settings.user_turns));
    let settings = Arc::new(settings);
    loop {
        let store = engine.store();
        let mut keys = match store
            .conversations_with_open_inbox(settings.concurrency * 4)
            .await
        {
            Ok(keys) => keys,
            Err(error) => {
                tracing::warn!("workers cannot read the inbox: {error}");
                Vec::new()
            }
        };
        match store
            .conversations_with_unsent_outbox(Utc::now(), settings.concurrency * 4)
            .await
        {
            Ok(unsent) => keys.extend(
                unsent
                    .into_iter()
                    .filter(|k| !keys.contains(k))
                    .collect::<Vec<_>>(),
            ),
            Err(error) => tracing::warn!("workers cannot read the outbox: {error}"),
        }
        outbound.forget_idle();
        for key in keys {
            if !in_flight.lock().unwrap().insert(key.clone()) {
                continue;
            }
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            let (engine, outbound, settings, in_flight, limits) = (
                engine.clone(),
                outbound.clone(),
                settings.clone(),
                in_flight.clone(),
                limits.clone(),
            );
            let stopped = stopped.clone();
            tokio::spawn(async move {
                let worker = Worker {
                    engine: &engine,
                    outbound: &outbound,
                    settings: &settings,
                    limits: &limits,
                };
                worker.process_conversation(&key, &stopped).await;
                in_flight.lock().unwrap().remove(&key);
                drop(permit);
            });
        }
        tokio::select! {
            () = signal.notified() => {
                // Let a burst of webhooks land before looking: one inbox query for all of them.
                tokio::time::sleep(DEBOUNCE).await;
            }
            () = tokio::time::sleep(settings.poll) => {}
            _ = stopped.changed() => break,
        }
    }
    // Let the turns in flight finish: wait until every permit is back.
    let _ = permits
        .acquire_many(u32::try_from(settings.concurrency).unwrap_or(u32::MAX))
        .await;
}

/// What a task serving one conversation needs of the process.
struct Worker<'a> {
    engine: &'a Engine,
    outbound: &'a Outbound,
    settings: &'a WorkerSettings,
    limits: &'a UserLimits,
}

impl Worker<'_> {
    /// Claims one conversation and serves it while the claim holds: the lease is renewed in the
    /// background, and if a renewal cannot be confirmed in time the work stops at once (it resumes,
    /// here or elsewhere, from what was stored) rather than run beside the instance that takes the
    /// conversation over.
    async fn process_conversation(&self, wa_id: &WaId, stopped: &watch::Receiver<bool>) {
        let (engine, settings) = (self.engine, self.settings);
        let store = engine.store();
        let asked = std::time::Instant::now();
        let now = Utc::now();
        let length =
            chrono::Duration::from_std(settings.lease).unwrap_or(chrono::Duration::minutes(5));
        match store
            .claim_conversation(wa_id, &settings.owner, now, now + length)
            .await
        {
            Ok(true) => {}
            Ok(false) => return, // another process has it
            Err(error) => {
                tracing::warn!(conversation.id = %wa_id.masked(), "cannot claim: {error}");
                return;
            }
        }
        let keeper = LeaseKeeper::start(store.clone(), wa_id.clone(), settings, asked);
        // The inbox entries of the turn running now (empty between turns).
        let taken = Mutex::new(Vec::new());
        let held = tokio::select! {
            // A claim answered too late to be counted on starts nothing.
            biased;
            () = keeper.lost() => {
                tracing::error!(
                    conversation.id = %wa_id.masked(),
                    "lease not renewed in time (slow store?): work on this conversation stopped; \
                     it resumes from what was stored"
                );
                metrics::counter!("zaguan_leases_lost_total").increment(1);
                false
            }
            () = self.serve_conversation(wa_id, stopped, &taken) => true,
        };
        keeper.stop();
        if !held {
            // Stopped by the store's slowness, not by the messages: not an attempt of theirs.
            self.refund(wa_id, &taken).await;
        }
        // A lost lease may be another instance's by now: it is left to expire, not released.
        if held && let Err(error) = store.release_conversation(wa_id, &settings.owner).await {
            tracing::warn!(conversation.id = %wa_id.masked(), "cannot release lease: {error}");
        }
    }

    /// Takes back the attempt of `taken`'s entries (best effort: the store is struggling).
    async fn refund(&self, wa_id: &WaId, taken: &Mutex<Vec<WaMessageId>>) {
        let ids = std::mem::take(&mut *taken.lock().unwrap_or_else(|e| e.into_inner()));
        if ids.is_empty() {
            return;
        }
        match self.engine.store().refund_attempt(&ids).await {
            Ok(()) => {
                metrics::counter!("zaguan_attempts_refunded_total").increment(ids.len() as u64)
            }
            Err(error) => {
                tracing::warn!(conversation.id = %wa_id.masked(), "cannot refund the attempt: {error}")
            }
        }
    }

    /// Sends what the conversation still owes, then runs turns until its inbox is empty, sending
    /// each turn's reply before the next turn. Stops after a turn when the process drains.
    async fn serve_conversation(
        &self,
        wa_id: &WaId,
        stopped: &watch::Receiver<bool>,
        taken: &Mutex<Vec<WaMessageId>>,
    ) {
        let (engine, outbound, settings) = (self.engine, self.outbound, self.settings);
        let store = engine.store();
        let mut flushed = false;
        loop {
            // Draining: the turn just finished was the last; the lease is released by the caller.
            if flushed && *stopped.borrow() {
                break;
            }
            // Replies owed from before (a retry due, a crash mid-send) go out before new ones.
            if !flushed {
                flushed = true;
                if let Err(error) = outbound.flush(wa_id).await {
                    tracing::warn!(conversation.id = %wa_id.masked(), "cannot send: {error}");
                    break;
                }
            }
            let open = match store.open_inbox(wa_id).await {
                Ok(open) if open.is_empty() => break,
                Ok(open) => open,
                Err(error) => {
                    tracing::warn!(conversation.id = %wa_id.masked(), "cannot read inbox: {error}");
                    break;
                }
            };
            let (poisoned, open): (Vec<_>, Vec<_>) = open
                .into_iter()
                .partition(|e| e.attempts >= settings.max_attempts);
            if !poisoned.is_empty() {
                tracing::error!(
                    conversation.id = %wa_id.masked(),
                    messages = poisoned.len(),
                    "inbox messages failed {} times; marked failed", settings.max_attempts
                );
                metrics::counter!("zaguan_turns_total", "outcome" => "failed")
                    .increment(poisoned.len() as u64);
                let ids: Vec<WaMessageId> = poisoned.iter().map(|e| e.wamid.clone()).collect();
                if store
                    .set_inbox_status(&ids, InboxStatus::Failed)
                    .await
                    .is_err()
                {
                    break;
                }
                if open.is_empty() {
                    continue;
                }
            }
            // A turn cut short (crash, lost lease, store error) is finished first with the
            // messages it started with, so they get their own reply; what arrived since is the
            // next turn. Merging them would answer only the newest message.
            let resumed = open.iter().any(|e| e.status == InboxStatus::Processing);
            let open = if resumed {
                open.into_iter()
                    .filter(|e| e.status == InboxStatus::Processing)
                    .collect()
            } else {
                open
            };
            if !resumed && let Admission::Wait { wait, notify } = self.limits.admit(wa_id) {
                // Too many turns for this user: the next one waits, and what arrives meanwhile is
                // merged into it.
                tracing::info!(conversation.id = %wa_id.masked(), ?wait, "user throttled");
                if notify {
                    let via = open.last().expect("not empty");
                    if let Err(error) = engine.notice(wa_id, SLOW_DOWN, via).await {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot queue notice: {error}");
                    } else if let Err(error) = outbound.flush(wa_id).await {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot send: {error}");
                    }
                }
                let mut stop = stopped.clone();
                if *stop.borrow() {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    _ = stop.changed() => break,
                }
            }
            let ids: Vec<WaMessageId> = open.iter().map(|e| e.wamid.clone()).collect();
            if let Err(error) = store.set_inbox_status(&ids, InboxStatus::Processing).await {
                tracing::warn!(conversation.id = %wa_id.masked(), "cannot take inbox: {error}");
                break;
            }
            *taken.lock().unwrap_or_else(|e| e.into_inner()) = ids.clone();
            let last = open.last().expect("not empty");
            // "typing…" only once the engine knows the bot answers (not while an operator holds it).
            let turn = engine
                .run_turn_with(wa_id, &open, || {
                    outbound.typing(&last.phone_number_id, &last.wamid)
                })
                .await;
            match turn {
                Ok(_) => {
                    // Done only now that the reply is in the outbox.
                    let closed = store.set_inbox_status(&ids, InboxStatus::Done).await;
                    taken.lock().unwrap_or_else(|e| e.into_inner()).clear();
                    if let Err(error) = closed {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot close inbox: {error}");
                        break;
                    }
                    if let Err(error) = outbound.flush(wa_id).await {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot send: {error}");
                        break;
                    }
                }
                Err(error) => {
                    let transient = matches!(error, EngineError::Store(StoreError::Unavailable(_)));
                    tracing::error!(conversation.id = %wa_id.masked(), "turn failed, will resume: {:#}", anyhow::Error::from(error));
                    metrics::counter!("zaguan_turns_total", "outcome" => "error").increment(1);
                    if transient {
                        self.refund(wa_id, taken).await;
                    }
                    break;
                }
            }
        }
    }
}

/// Keeps a claim alive: renews it every third of the lease, and knows until when the last
/// confirmed renewal holds (measured from before the call was sent, so a slow answer counts
/// against us).
struct LeaseKeeper {
    task: JoinHandle<()>,
    valid_until: Arc<Mutex<std::time::Instant>>,
    margin: Duration,
}

impl LeaseKeeper {
    /// `asked`: when the claim that succeeded was sent.
    fn start(
        store: Arc<dyn crate::store::Store>,
        wa_id: WaId,
        settings: &WorkerSettings,
        asked: std::time::Instant,
    ) -> Self {
        let (owner, lease) = (settings.owner.clone(), settings.lease);
        let valid_until = Arc::new(Mutex::new(asked + lease));
        let length = chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::minutes(5));
        let renewed = valid_until.clone();
        let task = tokio::spawn(async move {
            // Renewals are timed from when the last claim was sent: a claim answered late is
            // renewed soon after.
            let mut last = asked;
            loop {
                tokio::time::sleep_until((last + lease / 3).into()).await;
                let asked = std::time::Instant::now();
                last = asked;
                let now = Utc::now();
                match store
                    .claim_conversation(&wa_id, &owner, now, now + length)
                    .await
                {
                    Ok(true) => *renewed.lock().unwrap_or_else(|e| e.into_inner()) = asked + lease,
                    // Taken over: `lost` fires when the last good renewal runs out.
                    Ok(false) => return,
                    Err(error) => {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot renew the lease: {error}");
                    }
                }
            }
        });
        Self {
            task,
            valid_until,
            // Stop a little before the lease runs out, for the write in flight to land.
            margin: lease / 6,
        }
    }

    /// Resolves when the claim can no longer be counted on.
    async fn lost(&self) {
        loop {
            let until = *self.valid_until.lock().unwrap_or_else(|e| e.into_inner()) - self.margin;
            if std::time::Instant::now() >= until {
                return;
            }
            tokio::time::sleep_until(until.into()).await;
        }
    }

    fn stop(self) {
        self.task.abort();
    }
}
