//! The instances sharing one MongoDB, and this process's place among them.
//!
//! An instance has a stable id (`ZAGUAN_INSTANCE_ID`, by default the host name, which a
//! container restart keeps) and a heartbeat in `instances`, stamped by the database's clock so
//! that the instances' own clocks need not agree. The heartbeat is what keeps the instance's
//! conversations its own: a lease is held while its holder beats.
//!
//! - The heartbeat runs on a thread and a runtime of its own, so the load it guards cannot
//!   starve it: thousands of turns queued on the service's runtime do not delay a beat.
//! - Its own work, beside other instances: a process works only while its last confirmed
//!   heartbeat is recent — within 3/5 of `ZAGUAN_LEASE` of when that beat was sent, on its own
//!   monotonic clock. When it cannot confirm one in time (a stalled database), it stops every
//!   turn and drops its leases, and claims them anew once a beat lands again.
//! - Alone (no other instance was alive at its last confirmed beat), a late beat stops nothing:
//!   nobody is there to take its conversations over, so stopping would only abandon turns and
//!   redo them. When the late beat lands, the work stops only if another instance beat while
//!   this one was silent for longer than the lease (it may have taken conversations over).
//! - The others: an instance whose last heartbeat is older than `ZAGUAN_LEASE` by the
//!   database's clock is gone; its conversations are taken over. By then it has stopped itself
//!   (3/5 < 1), with the difference left for its last writes to land.
//! - A restart under the same id takes its id back at once when the previous process is gone
//!   (no heartbeat for two beats), and gives back every lease that process held, so its
//!   conversations are served again straight away. Two live processes sharing one id are
//!   refused: the newcomer exits, and a process that finds its id taken stops.
//! - Arrivals are stamped by the database's clock as each beat brings it ([`StoreClock`]), so
//!   a conversation's messages keep their order whichever instances' webhooks took them.
//! - Meta's messages per second for a business number are split evenly between the live
//!   instances.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::outbound::Limiters;
use crate::store::{InstanceRecord, LeaseStore, StoreClock, StoreError};

/// The default lease: an instance silent this long is taken over.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// Why this process cannot be the instance it was asked to be.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "ZAGUAN_INSTANCE_ID `{0}` is in use by another running process (its heartbeat goes on); \
         give each process an id of its own"
    )]
    InUse(String),
    #[error("cannot register the instance: {0}")]
    Store(#[from] StoreError),
}

/// This process as an instance: its id, its heartbeat and what it knows of the others.
pub struct Membership {
    store: Arc<dyn LeaseStore>,
    id: String,
    /// Tells this process from another one started under the same id.
    nonce: String,
    lease: Duration,
    limiters: Option<Arc<Limiters>>,
    state: Mutex<Liveness>,
    /// Bumped when the validity lapses or the id is lost: work under the old value stops.
    epochs: watch::Sender<u64>,
    /// Without a store heartbeat (tests, the in-process CLI): always valid.
    solo: bool,
    /// The database's clock, anchored by each confirmed beat.
    clock: Arc<StoreClock>,
}

#[derive(Debug)]
struct Liveness {
    /// Until when this process may work, from its last confirmed heartbeat.
    valid_until: Option<Instant>,
    /// The others' last heartbeats.
    others: Vec<InstanceRecord>,
    /// Another process took this id: this one must stop for good.
    superseded: bool,
    /// No other instance was alive at the last confirmed beat: a late beat stops nothing.
    alone: bool,
    /// The database's time of the last confirmed beat.
    last_beat: Option<DateTime<Utc>>,
}

impl Membership {
    /// Becomes instance `id`: waits out a previous process of that id whose heartbeat may
    /// still be going (at most two beats), refuses if it goes on, then takes the id, gives back
    /// every lease the previous process held, and confirms a first heartbeat.
    pub async fn establish(
        store: Arc<dyn LeaseStore>,
        id: String,
        lease: Duration,
        limiters: Option<Arc<Limiters>>,
        clock: Arc<StoreClock>,
    ) -> Result<Arc<Self>, IdentityError> {
        let membership = Arc::new(Self::unregistered(store, id, lease, limiters, false, clock));
        membership.take_id().await?;
        Ok(membership)
    }

    /// A process alone with its store (tests, `zaguan chat`): always valid, nobody else alive.
    pub fn solo(store: Arc<dyn LeaseStore>, id: String, lease: Duration) -> Arc<Self> {
        Arc::new(Self::unregistered(
            store,
            id,
            lease,
            None,
            true,
            Arc::default(),
        ))
    }

    fn unregistered(
        store: Arc<dyn LeaseStore>,
        id: String,
        lease: Duration,
        limiters: Option<Arc<Limiters>>,
        solo: bool,
        clock: Arc<StoreClock>,
    ) -> Self {
        Self {
            store,
            id,
            nonce: format!("{:016x}", rand::random::<u64>()),
            lease,
            limiters,
            state: Mutex::new(Liveness {
                valid_until: None,
                others: Vec::new(),
                superseded: false,
                alone: true,
                last_beat: None,
            }),
            epochs: watch::channel(0).0,
            solo,
            clock,
        }
    }

    /// The instance id: the owner of this process's leases.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How often the heartbeat goes.
    pub fn beat_every(&self) -> Duration {
        self.lease / 5
    }

    /// How long a confirmed beat keeps this process working.
    fn valid_for(&self) -> Duration {
        self.lease * 3 / 5
    }

    fn liveness(&self) -> std::sync::MutexGuard<'_, Liveness> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn take_id(&self) -> Result<(), IdentityError> {
        let beat = self.beat_every();
        let previous = self
            .store
            .instances()
            .await?
            .into_iter()
            .find(|record| record.id == self.id);
        if let Some(previous) = previous {
            let now = self.store.server_time().await?;
            let silent = (now - previous.seen_at).to_std().unwrap_or_default();
            // A live process beats every `beat`: one silent for two beats is gone.
            let gone_after = beat * 2;
            if silent < gone_after {
                let wait = gone_after - silent;
                tracing::info!(
                    instance = %self.id,
                    ?wait,
                    "a previous process of this instance beat moments ago; waiting to see whether it is gone"
                );
                tokio::time::sleep(wait).await;
                let again = self
                    .store
                    .instances()
                    .await?
                    .into_iter()
                    .find(|record| record.id == self.id);
                if again.is_some_and(|record| record.seen_at != previous.seen_at) {
                    return Err(IdentityError::InUse(self.id.clone()));
                }
            }
        }
        let sent = Instant::now();
        let Some(at) = self
            .store
            .instance_beat(&self.id, &self.nonce, true)
            .await?
        else {
            return Err(IdentityError::InUse(self.id.clone()));
        };
        self.confirmed(sent, at);
        let released = self.store.release_all_leases(&self.id).await?;
        if released > 0 {
            tracing::info!(
                instance = %self.id,
                conversations = released,
                "took back the conversations this instance held before its restart"
            );
            metrics::counter!("zaguan_leases_recovered_total").increment(released);
        }
        self.refresh_others().await;
        Ok(())
    }

    /// A beat sent at `sent` landed, stamped `at` by the database: the validity is renewed.
    /// Returns what the work under the current epoch needs to judge it: whether the validity
    /// had run out, whether this instance was alone then, and the previous beat's time.
    fn confirmed(&self, sent: Instant, at: DateTime<Utc>) -> Renewal {
        let mut state = self.liveness();
        let renewal = Renewal {
            lapsed: state
                .valid_until
                .is_some_and(|until| Instant::now() >= until),
            alone: state.alone,
            previous: state.last_beat,
            at,
        };
        state.valid_until = Some(sent + self.valid_for());
        state.last_beat = Some(at);
        drop(state);
        self.clock.anchor(at, Instant::now());
        renewal
    }

    /// After a late beat landed and the others were read again: stops the work of the old
    /// epoch when it may have run beside another instance. Beside others, a lapse already
    /// stopped it (new work claims anew); alone, only another instance that beat while this one
    /// was silent for longer than the lease can have taken its conversations over.
    fn judge(&self, renewal: &Renewal) {
        let stop = if !renewal.alone {
            renewal.lapsed
        } else {
            renewal.previous.is_some_and(|previous| {
                let lease = chrono::Duration::from_std(self.lease).unwrap_or_default();
                renewal.at - previous > lease
                    && self
                        .liveness()
                        .others
                        .iter()
                        .any(|record| record.id != self.id && record.seen_at > previous)
            })
        };
        if renewal.lapsed && !stop {
            tracing::warn!(
                instance = %self.id,
                "this instance's heartbeat was late, and no other instance could take its \
                 conversations over: its work went on"
            );
            metrics::counter!("zaguan_instance_late_beats_total").increment(1);
        }
        if stop {
            // Work started under the lapsed validity stays stopped; new work claims anew.
            self.epochs.send_modify(|epoch| *epoch += 1);
        }
    }

    async fn refresh_others(&self) {
        match self.store.instances().await {
            Ok(records) => {
                let mut state = self.liveness();
                if let Some(at) = state.last_beat {
                    let since = at - chrono::Duration::from_std(self.lease).unwrap_or_default();
                    state.alone = !records
                        .iter()
                        .any(|record| record.id != self.id && record.seen_at >= since);
                }
                state.others = records;
                drop(state);
                let live = self.live();
                metrics::gauge!("zaguan_instances").set(live.len() as f64);
                if let Some(limiters) = &self.limiters {
                    limiters.set_instances(u32::try_from(live.len()).unwrap_or(u32::MAX));
                }
            }
            Err(error) => {
                // Not knowing, assume company: a lapse then stops the work, as beside others.
                self.liveness().alone = false;
                tracing::warn!("cannot read the other instances: {error}");
            }
        }
    }

    /// One heartbeat; `false` when another process took the id.
    pub async fn beat(&self) -> bool {
        if self.solo {
            return true;
        }
        let sent = Instant::now();
        match self.store.instance_beat(&self.id, &self.nonce, false).await {
            Ok(Some(at)) => {
                let renewal = self.confirmed(sent, at);
                self.refresh_others().await;
                self.judge(&renewal);
                true
            }
            Ok(None) => {
                tracing::error!(
                    instance = %self.id,
                    "another process took this instance's id (ZAGUAN_INSTANCE_ID): this one stops"
                );
                self.liveness().superseded = true;
                self.epochs.send_modify(|epoch| *epoch += 1);
                false
            }
            Err(error) => {
                // The last confirmed beat still counts until it runs out.
                tracing::warn!("instance heartbeat failed: {error}");
                metrics::counter!("zaguan_instance_heartbeat_failures_total").increment(1);
                true
            }
        }
    }

    /// The current epoch if this process may work now: leases claimed under it are held.
    pub fn valid(&self) -> Option<u64> {
        let epoch = *self.epochs.borrow();
        if self.solo {
            return Some(epoch);
        }
        let state = self.liveness();
        (!state.superseded
            && state
                .valid_until
                .is_some_and(|until| state.alone || Instant::now() < until))
        .then_some(epoch)
    }

    /// Resolves when work started in `epoch` must stop: beside other instances, the validity
    /// ran out without a beat; or a late beat found that another instance may have taken
    /// over (a new epoch); or the id was taken.
    pub async fn lapsed(&self, epoch: u64) {
        let mut epochs = self.epochs.subscribe();
        loop {
            if *epochs.borrow_and_update() != epoch {
                return;
            }
            if self.solo {
                if epochs.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                continue;
            }
            let until = {
                let state = self.liveness();
                if state.superseded {
                    return;
                }
                match state.valid_until {
                    // Alone, a late beat stops nothing: look again a beat later (the others
                    // are read again when a beat lands).
                    Some(_) if state.alone => Instant::now() + self.beat_every(),
                    Some(until) if Instant::now() < until => until,
                    _ => return,
                }
            };
            tokio::select! {
                () = tokio::time::sleep_until(until.into()) => {}
                changed = epochs.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Whether another process took this instance's id.
    pub fn superseded(&self) -> bool {
        self.liveness().superseded
    }

    /// Resolves once another process took this instance's id.
    pub async fn until_superseded(&self) {
        let mut epochs = self.epochs.subscribe();
        while !self.superseded() {
            if epochs.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The instances alive now (this one included): those whose last heartbeat is within the
    /// lease by the database's clock, as best known here (never later than the truth).
    pub fn live(&self) -> Vec<String> {
        let state = self.liveness();
        let mut live = vec![self.id.clone()];
        if let Some(now) = self.clock.anchored_now() {
            let since = now - chrono::Duration::from_std(self.lease).unwrap_or_default();
            live.extend(
                state
                    .others
                    .iter()
                    .filter(|record| record.id != self.id && record.seen_at >= since)
                    .map(|record| record.id.clone()),
            );
        }
        live
    }

    /// Beats every [`beat_every`](Self::beat_every) until stopped, on a thread with a runtime
    /// of its own: however busy the service's runtime is, the beat goes out on time.
    pub fn spawn(self: Arc<Self>) -> MembershipTask {
        let beating = self.clone();
        let (stop, mut stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("zaguan-heartbeat".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        tracing::error!("cannot start the heartbeat's runtime: {error}");
                        return;
                    }
                };
                runtime.block_on(async move {
                    loop {
                        tokio::select! {
                            () = tokio::time::sleep(beating.beat_every()) => {}
                            _ = stopped.changed() => break,
                        }
                        let beat = beating.beat();
                        tokio::select! {
                            beating = beat => if !beating { break },
                            _ = stopped.changed() => break,
                        }
                    }
                });
            });
        if let Err(error) = &thread {
            tracing::error!("cannot start the heartbeat thread: {error}");
        }
        MembershipTask {
            membership: self,
            stop,
            thread: thread.ok(),
        }
    }
}

/// What a landed beat tells about the time before it.
struct Renewal {
    /// The validity had run out before it landed.
    lapsed: bool,
    /// No other instance was alive at the beat before.
    alone: bool,
    /// The database's time of the beat before, and of this one.
    previous: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
}

/// The running heartbeat; `leave` stops it and tells the others at once.
pub struct MembershipTask {
    membership: Arc<Membership>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MembershipTask {
    pub async fn leave(self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread {
            // The thread ends at its next await; joined off the runtime's threads.
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        let membership = &self.membership;
        if membership.solo {
            return;
        }
        if let Err(error) = membership
            .store
            .instance_left(&membership.id, &membership.nonce)
            .await
        {
            tracing::warn!("cannot deregister this instance: {error}");
        }
    }
}

/// `ZAGUAN_INSTANCE_ID` when set, else the host name (which a container restart keeps), else
/// `zaguan`.
pub fn default_instance_id() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
        })
        .unwrap_or_else(|| "zaguan".to_owned())
}
