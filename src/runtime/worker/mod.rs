//! Workers: take conversations with open inbox messages or unsent replies, one turn at a time
//! per conversation, and send each turn's reply before the next turn. Across conversations, the
//! one whose oldest open message arrived first goes first — from the webhook, from the poll, and
//! after a failed try, which keeps its place — so under a backlog the first customers are
//! answered first.
//!
//! Work comes three ways: this process's webhook hands over what it stored ([`Arrivals`], no
//! query needed), and a poll every second reads the pending inbox and the replies due (what
//! other instances received, what a crash left). A conversation is served under its lease
//! (see [`super::instances`]): claimed once, then held while this instance beats and the
//! conversation keeps talking — its next turns cost no claim — and given back after
//! [`IDLE_RELEASE`] of silence, on drain, or when the heartbeat lapses. A lease held by another
//! live instance is left to it.
//!
//! How many conversations run at once follows the database ([`AdaptiveLimit`]): fewer when
//! its calls slow down, more when they are fast again.

mod conversation;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use super::concurrency::{AdaptiveLimit, MIN_CONCURRENCY};
use super::instances::Membership;
use crate::domain::{WaId, WaMessageId};
use crate::engine::abuse::UserLimits;
use crate::engine::turn::Engine;
use crate::outbound::Outbound;
use crate::store::InboxEntry;

/// Wait after a wake-up before looking, so a burst costs one pass.
const DEBOUNCE: Duration = Duration::from_millis(5);
/// A lease held this long without a turn is given back, so other instances can share the load.
pub const IDLE_RELEASE: Duration = Duration::from_secs(30);
/// How often the concurrency follows the database.
const ADJUST_EVERY: Duration = Duration::from_millis(500);
/// Conversations served at once at start on a database (see `spawn_in`).
const START_CONCURRENCY: usize = MIN_CONCURRENCY;
/// After failing to claim a conversation (another live instance has it), leave it alone this
/// long: its holder serves it.
const ELSEWHERE_FOR: Duration = Duration::from_secs(2);

/// How the workers of one process behave.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// This process's instance id: the owner of its leases.
    pub owner: String,
    /// Conversations served at once, at most.
    pub concurrency: usize,
    /// `ZAGUAN_LEASE`: a claim holds at least this long, and while this instance beats.
    pub lease: Duration,
    /// Look for work at least this often, even without a webhook signal.
    pub poll: Duration,
    /// Attempts after which an inbox message is marked `failed` instead of retried forever.
    pub max_attempts: u32,
    /// Turns per user (see [`UserLimits`]); `None` is no limit.
    pub user_turns: Option<governor::Quota>,
    /// An idle conversation's lease is given back after this.
    pub idle_release: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            owner: format!(
                "{}-{}",
                super::instances::default_instance_id(),
                std::process::id()
            ),
            concurrency: 16,
            lease: super::instances::DEFAULT_LEASE,
            poll: Duration::from_secs(1),
            max_attempts: 5,
            user_turns: None,
            idle_release: IDLE_RELEASE,
        }
    }
}

/// The conversations this process's webhook stored new messages for: its workers take them at
/// once, without waiting for a poll.
#[derive(Default)]
pub struct Arrivals {
    /// Each with its message's arrival, for its place in the queue.
    conversations: Mutex<Vec<(WaId, DateTime<Utc>)>>,
    /// Conversations with a reply to send now (a part queued again as its fallback).
    owed: Mutex<Vec<WaId>>,
    signal: Notify,
}

impl Arrivals {
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands over freshly stored messages (not redeliveries) and wakes the workers.
    pub fn push(&self, entries: Vec<InboxEntry>) {
        if entries.is_empty() {
            return;
        }
        self.lock().extend(
            entries
                .into_iter()
                .map(|entry| (entry.wa_id, entry.received_at)),
        );
        self.signal.notify_one();
    }

    /// A reply of `wa_id` is due now: the workers send it without waiting for a poll.
    pub fn owe(&self, wa_id: WaId) {
        self.owed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(wa_id);
        self.signal.notify_one();
    }

    /// Wakes the workers to look now (a reply queued by an operator).
    pub fn wake(&self) {
        self.signal.notify_one();
    }

    fn take(&self) -> Vec<(WaId, DateTime<Utc>)> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(WaId, DateTime<Utc>)>> {
        self.conversations.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running workers; `stop` lets in-flight turns finish.
pub struct Workers {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    dispatcher: Arc<Dispatcher>,
}

impl Workers {
    /// Workers of a process alone with its store (no other instance, no heartbeat).
    pub fn spawn(
        engine: Arc<Engine>,
        outbound: Arc<Outbound>,
        arrivals: Arc<Arrivals>,
        settings: WorkerSettings,
    ) -> Self {
        let membership = Membership::solo(
            engine.store().clone(),
            settings.owner.clone(),
            settings.lease,
        );
        Self::spawn_in(engine, outbound, arrivals, settings, membership)
    }

    /// Workers of `membership`'s instance: its leases carry its id and last while it beats.
    pub fn spawn_in(
        engine: Arc<Engine>,
        outbound: Arc<Outbound>,
        arrivals: Arc<Arrivals>,
        mut settings: WorkerSettings,
        membership: Arc<Membership>,
    ) -> Self {
        settings.owner = membership.id().to_owned();
        let (stop, stopped) = watch::channel(false);
        // A database is eased in, from the fewest conversations at once (doubling every half
        // second while its calls stay quick): a backlog found at start-up must not flood a slow
        // one before its first answers show how slow it is. A store that cannot strain starts
        // at the maximum.
        let start = if engine.store().pressure().is_some() {
            settings.concurrency.min(START_CONCURRENCY)
        } else {
            settings.concurrency
        };
        let dispatcher = Arc::new(Dispatcher {
            limit: Mutex::new(AdaptiveLimit::new(start, settings.concurrency)),
            limits: UserLimits::new(settings.user_turns),
            engine,
            outbound,
            membership,
            settings,
            state: Mutex::default(),
            finished: Notify::new(),
            draining: stopped.clone(),
        });
        let task = tokio::spawn(dispatcher.clone().run(arrivals, stopped));
        Self {
            stop,
            task,
            dispatcher,
        }
    }

    /// Conversations the workers may serve at once right now (it follows the store).
    pub fn concurrency(&self) -> usize {
        self.dispatcher
            .limit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get()
    }

    /// Stops taking new conversations and waits for the turns in flight.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }

    /// Drains: stops taking conversations, lets each turn in flight finish (then gives its
    /// lease back, so another instance takes the conversation at once) for up to `deadline`.
    /// `false` when turns were still running at the deadline: their conversations are taken
    /// over when this instance's heartbeat stops.
    pub async fn drain(self, deadline: Duration) -> bool {
        let _ = self.stop.send(true);
        let mut task = self.task;
        match tokio::time::timeout(deadline, &mut task).await {
            Ok(_) => true,
            Err(_) => {
                tracing::warn!(
                    ?deadline,
                    "drain deadline passed with turns still running; their conversations are \
                     taken over when this instance's heartbeat stops"
                );
                task.abort();
                false
            }
        }
    }
}

/// What the workers of one process know and do.
struct Dispatcher {
    engine: Arc<Engine>,
    outbound: Arc<Outbound>,
    membership: Arc<Membership>,
    settings: WorkerSettings,
    limits: UserLimits,
    limit: Mutex<AdaptiveLimit>,
    state: Mutex<Queue>,
    /// A conversation's service ended: there may be room for another.
    finished: Notify,
    /// The process drains: each conversation finishes the turn it runs and takes no other.
    draining: watch::Receiver<bool>,
}

/// Conversations with work, and what this process holds.
#[derive(Default)]
struct Queue {
    /// Conversations with new messages (the webhook stored some, or the poll found some).
    work: HashSet<WaId>,
    /// Conversations with replies to send now (found by the poll, or just claimed).
    owed: HashSet<WaId>,
    /// Conversations with a part waiting (a retry, a status): their next reply queues behind
    /// it rather than going out first. The poll brings them back when it is due.
    behind: HashSet<WaId>,
    /// Conversations with work waiting for a worker, by [`since`](Self::since): oldest first.
    order: BTreeSet<(DateTime<Utc>, WaId)>,
    /// When the oldest message of each conversation with work arrived; kept through a failed
    /// try, dropped once a turn answered it.
    since: HashMap<WaId, DateTime<Utc>>,
    in_flight: HashSet<WaId>,
    /// The messages each conversation in flight read last: the poll finding them again is no
    /// news.
    read: HashMap<WaId, HashSet<WaMessageId>>,
    /// Conversations whose lease this process holds: under which epoch, last used when.
    held: HashMap<WaId, Held>,
    /// Conversations another live instance holds: left alone until then.
    elsewhere: HashMap<WaId, Instant>,
    /// Conversations whose last turn here was cut by the store (unavailable, heartbeat not
    /// confirmed): resuming it counts no attempt.
    store_cut: HashSet<WaId>,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    epoch: u64,
    last_used: Instant,
    /// Tells this hold from any other of the same conversation (the engine keeps the
    /// conversation's window under it).
    hold: u64,
}

/// Numbers the holds of this process.
static HOLDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Queue {
    fn has_work(&self, wa_id: &WaId) -> bool {
        self.work.contains(wa_id) || self.owed.contains(wa_id)
    }

    /// Puts `wa_id` in its place: by the oldest of what it waited for and `at`. A
    /// conversation in flight is placed when its worker lets go of it.
    fn place(&mut self, wa_id: &WaId, at: DateTime<Utc>) {
        let since = match self.since.get(wa_id) {
            Some(&since) if since <= at => since,
            Some(&later) => {
                self.order.remove(&(later, wa_id.clone()));
                self.since.insert(wa_id.clone(), at);
                at
            }
            None => {
                self.since.insert(wa_id.clone(), at);
                at
            }
        };
        if !self.in_flight.contains(wa_id) {
            self.order.insert((since, wa_id.clone()));
        }
    }

    /// New messages for `wa_id`, the oldest of them arrived `at`.
    fn arrived(&mut self, wa_id: WaId, at: DateTime<Utc>) {
        self.place(&wa_id, at);
        self.work.insert(wa_id);
    }

    /// The messages of `wa_id` read by a try that failed: tried again, in the place they had.
    fn retry(&mut self, wa_id: &WaId) {
        self.work.insert(wa_id.clone());
        if !self.in_flight.contains(wa_id) {
            let at = self.since.get(wa_id).copied().unwrap_or_else(Utc::now);
            self.place(wa_id, at);
        }
    }

    fn owe(&mut self, wa_id: WaId) {
        let at = self.since.get(&wa_id).copied().unwrap_or_else(Utc::now);
        self.place(&wa_id, at);
        self.owed.insert(wa_id);
    }

    /// A turn answered `wa_id`'s messages up to one that arrived `newest`: what arrived after
    /// it keeps the conversation's place, anything older is done.
    fn answered(&mut self, wa_id: &WaId, newest: DateTime<Utc>) {
        if self.since.get(wa_id).is_some_and(|since| *since <= newest) {
            self.since.remove(wa_id);
        }
    }

    /// Its worker let go of `wa_id`: back in its place if work is left.
    fn let_go(&mut self, wa_id: &WaId) {
        self.in_flight.remove(wa_id);
        if self.has_work(wa_id) {
            let at = self.since.get(wa_id).copied().unwrap_or_else(Utc::now);
            self.place(wa_id, at);
        } else {
            self.since.remove(wa_id);
        }
    }
}

impl Dispatcher {
    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(self: Arc<Self>, arrivals: Arc<Arrivals>, mut stopped: watch::Receiver<bool>) {
        let mut tasks = JoinSet::new();
        let mut next_poll = Instant::now();
        let mut next_adjust = Instant::now();
        let mut next_release = Instant::now() + self.settings.idle_release / 4;
        let mut busy = false;
        loop {
            if *stopped.borrow() {
                break;
            }
            for (wa_id, at) in arrivals.take() {
                self.queue().arrived(wa_id, at);
            }
            let owed =
                std::mem::take(&mut *arrivals.owed.lock().unwrap_or_else(|e| e.into_inner()));
            for wa_id in owed {
                self.queue().owe(wa_id);
            }
            let now = Instant::now();
            if now >= next_poll {
                // Nothing can start while the instance is not confirmed alive: no poll either.
                if self.membership.valid().is_some() {
                    self.poll().await;
                }
                next_poll = Instant::now() + self.settings.poll;
            }
            if now >= next_adjust {
                let pressure = self.engine.store().pressure();
                let mut limit = self.limit.lock().unwrap_or_else(|e| e.into_inner());
                if limit.adjust(pressure.as_ref(), busy) {
                    tracing::debug!(
                        limit = limit.get(),
                        ?pressure,
                        "worker concurrency adjusted"
                    );
                }
                metrics::gauge!("zaguan_worker_concurrency").set(limit.get() as f64);
                drop(limit);
                busy = false;
                next_adjust = Instant::now() + ADJUST_EVERY;
            }
            if now >= next_release {
                self.release_idle().await;
                next_release = Instant::now() + self.settings.idle_release / 4;
            }
            busy |= self.start_work(&mut tasks);
            while let Some(done) = tasks.try_join_next() {
                if let Err(error) = done
                    && error.is_panic()
                {
                    tracing::error!("a conversation's worker panicked: {error}");
                }
            }
            let wait = next_poll
                .min(next_adjust)
                .min(next_release)
                .saturating_duration_since(Instant::now());
            tokio::select! {
                () = arrivals.signal.notified() => tokio::time::sleep(DEBOUNCE).await,
                () = self.finished.notified() => {}
                () = tokio::time::sleep(wait) => {}
                _ = stopped.changed() => {}
            }
        }
        // Draining: the turns in flight finish, then every lease goes back at once.
        while tasks.join_next().await.is_some() {}
        self.release_all().await;
    }

    /// Reads the pending inbox and the replies due: what other instances received, what a
    /// crash left behind, what waits for a retry.
    async fn poll(&self) {
        let store = self.engine.store();
        // As many as the workers could take soon: a strained store is asked for less.
        let limit = self.limit.lock().unwrap_or_else(|e| e.into_inner()).get();
        let room = limit.saturating_mul(4).max(64);
        match store.pending_inbox(room).await {
            Ok(entries) => {
                let mut queue = self.queue();
                for entry in entries {
                    let known = queue
                        .read
                        .get(&entry.wa_id)
                        .is_some_and(|read| read.contains(&entry.wamid));
                    if !known && !queue.elsewhere.contains_key(&entry.wa_id) {
                        queue.arrived(entry.wa_id, entry.received_at);
                    }
                }
            }
            Err(error) => tracing::warn!("workers cannot read the inbox: {error}"),
        }
        match store
            .conversations_with_unsent_outbox(Utc::now(), room)
            .await
        {
            Ok(keys) => {
                let mut queue = self.queue();
                for key in keys {
                    if !queue.elsewhere.contains_key(&key) {
                        queue.owe(key);
                    }
                }
            }
            Err(error) => tracing::warn!("workers cannot read the outbox: {error}"),
        }
        self.outbound.keep_shared_pauses().await;
        self.outbound.forget_idle();
    }

    /// Starts serving conversations with work while the limit allows. Returns whether work
    /// was left waiting for room.
    fn start_work(self: &Arc<Self>, tasks: &mut JoinSet<()>) -> bool {
        let limit = self.limit.lock().unwrap_or_else(|e| e.into_inner()).get();
        let mut queue = self.queue();
        let now = Instant::now();
        queue.elsewhere.retain(|_, until| *until > now);
        while queue.in_flight.len() < limit {
            let Some((_, wa_id)) = queue.order.pop_first() else {
                break;
            };
            if !queue.has_work(&wa_id) {
                queue.since.remove(&wa_id);
                continue;
            }
            queue.in_flight.insert(wa_id.clone());
            let dispatcher = self.clone();
            tasks.spawn(async move {
                dispatcher.serve(&wa_id).await;
                dispatcher.queue().let_go(&wa_id);
                dispatcher.finished.notify_one();
            });
        }
        // Work left waiting for room.
        !queue.order.is_empty()
    }
}
