//! The process's MongoDB connections, and the gate in front of them.
//!
//! Why a gate: the driver queues checkouts beyond its pool, and its pool worker serves that
//! queue one place per event. A caller that gives up (a timeout dropping its future) leaves its
//! place behind. Under a burst — 256 workers over a pool of 10, a slow database — thousands of
//! abandoned places piled up, every new call (`/readyz`'s ping included) waited behind them
//! longer than its own timeout and was abandoned in turn, and the client never recovered while
//! the database sat idle. So no more calls reach the driver at once than it has connections:
//! callers wait here, in a semaphore that forgets a caller the moment it leaves, and a call that
//! reached the driver runs to its end in a task of its own (its caller may stop waiting; the
//! connection is not thrown away mid-command, and its permit is held until the database has
//! really answered).
//!
//! The connections are split in lanes so the service's own heartbeat and the webhook are never
//! queued behind the workers: `Control` (readiness, instance heartbeats), `Ingress` (what a
//! webhook stores before its 200), `Work` (turns, sending, operators, jobs).

mod operations;

pub use operations::Find;

use secrecy::SecretString;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bson::Document;
use mongodb::options::ClientOptions;
use mongodb::{Collection, Database};
use secrecy::ExposeSecret;
use tokio::sync::Semaphore;

use super::{StoreError, StoreResult};

/// Where the MongoDB database is (`MONGODB_URI`, `MONGODB_DATABASE`).
#[derive(Debug, Clone)]
pub struct MongoConfig {
    /// May hold a password, hence secret.
    pub uri: SecretString,
    pub database: String,
}

/// Connections of the pool when `MONGODB_URI` does not say (`maxPoolSize`); the driver's own
/// default is 10.
pub const DEFAULT_POOL_SIZE: u32 = 32;
/// How long the driver looks for a server before giving up on a call.
const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(3);
/// A call whose database has not answered by then is dropped (its connection closed) so its
/// permit comes back even from a socket that will never answer.
const ABANDON_AFTER: Duration = Duration::from_secs(60);
/// A call slower than this (waiting included) counts as a sign of a loaded database.
pub const SLOW_CALL: Duration = Duration::from_millis(250);
/// Calls taking this long on average (waiting included) mean the database is queueing them:
/// more at once would only lengthen the queue, and every turn's wait with it.
pub const STRAINED_MEAN: Duration = Duration::from_millis(100);

/// What a call runs, for `zaguan_store_command_seconds`: the command's name and the
/// collection it runs on (`-` for none).
pub type Command<'a> = (&'static str, &'a str);

/// Which share of the connections a call waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Readiness and instance heartbeats: few, small, never behind anything.
    Control,
    /// What a webhook stores before it answers Meta.
    Ingress,
    /// Everything else: turns, sending, operator commands, background jobs.
    Work,
}

impl Lane {
    fn index(self) -> usize {
        self as usize
    }

    fn label(self) -> &'static str {
        match self {
            Lane::Control => "control",
            Lane::Ingress => "ingress",
            Lane::Work => "work",
        }
    }

    /// Longest a call waits for a connection of its lane.
    fn wait_limit(self) -> Duration {
        match self {
            Lane::Control => Duration::from_secs(2),
            Lane::Ingress => Duration::from_secs(10),
            Lane::Work => Duration::from_secs(30),
        }
    }

    /// Longest a caller waits for the database's answer once its call is sent.
    fn answer_limit(self) -> Duration {
        match self {
            Lane::Control => Duration::from_secs(5),
            Lane::Ingress => Duration::from_secs(10),
            Lane::Work => Duration::from_secs(30),
        }
    }
}

/// How the work lane fared since it was last asked: what the workers' concurrency adapts to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    /// Calls finished (answered or given up).
    pub calls: u64,
    /// Calls that took longer than [`SLOW_CALL`], waiting for a connection included.
    pub slow: u64,
    /// Calls that got no answer in time, or no connection.
    pub unavailable: u64,
    /// Calls waiting for a connection right now.
    pub waiting: u64,
    /// The mean time of the calls finished, waiting included.
    pub mean: Duration,
    /// Calls asked and not finished yet (waiting or with the database).
    pub in_flight: u64,
    /// How long, on average, the calls in flight have been going: a database that has not
    /// answered yet shows here before it shows in `mean`.
    pub in_flight_age: Duration,
}

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    slow: AtomicU64,
    unavailable: AtomicU64,
    waiting: AtomicU64,
    /// Sum of the finished calls' times, µs.
    micros: AtomicU64,
    in_flight: AtomicU64,
    /// Sum of the calls in flight's start times, ms since the pool's epoch.
    started_ms: AtomicU64,
}

/// One MongoDB client for the process (shared by the conversation store and the agency's
/// data), behind the gate. Cheap to clone.
#[derive(Clone)]
pub struct MongoPool {
    inner: Arc<Inner>,
}

struct Inner {
    /// The client's database, and the lanes in front of its pool: both replaced together
    /// when the client is rebuilt (calls stuck on the old one keep the old permits).
    client: RwLock<Client>,
    config: MongoConfig,
    adjust: Option<Adjust>,
    sizes: [usize; 3],
    work: Counters,
    /// What the calls' start times are counted from.
    epoch: Instant,
    rebuilds: AtomicU64,
}

/// Changes the client options before a client is built (tests count commands with it).
pub type Adjust = Arc<dyn Fn(&mut ClientOptions) + Send + Sync>;

impl MongoPool {
    /// Parses the URI and builds the client; does not wait for the server (it connects
    /// lazily, so the service starts, and `/readyz` says 503, while MongoDB is down).
    pub async fn connect(config: &MongoConfig, adjust: Option<Adjust>) -> anyhow::Result<Self> {
        let (client, pool_size) = build_client(config, adjust.as_ref()).await?;
        let sizes = lane_sizes(pool_size);
        tracing::debug!(pool_size, ?sizes, "MongoDB connection lanes");
        Ok(Self {
            inner: Arc::new(Inner {
                client: RwLock::new(Client::new(client.database(&config.database), sizes)),
                config: config.clone(),
                adjust,
                sizes,
                work: Counters::default(),
                epoch: Instant::now(),
                rebuilds: AtomicU64::new(0),
            }),
        })
    }

    /// The database as the client sees it now.
    pub fn database(&self) -> Database {
        self.current().database
    }

    fn current(&self) -> Client {
        self.inner
            .client
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn collection(&self, name: &str) -> Collection<Document> {
        self.database().collection(name)
    }

    /// Connections per lane: control, ingress, work.
    pub fn lane_sizes(&self) -> [usize; 3] {
        self.inner.sizes
    }

    /// Runs `op` against the database through `lane`: waits for a connection of the lane (at
    /// most the lane's wait), then lets the call run to its end in a task of its own and waits
    /// for its answer (at most the lane's answer time). Either limit passed is
    /// [`StoreError::Unavailable`]; the driver's errors are sorted by [`classify`]. `command`
    /// names what it runs (the command and its collection) for `zaguan_store_command_seconds`.
    pub async fn run<T, F, Fut>(&self, lane: Lane, command: Command<'_>, op: F) -> StoreResult<T>
    where
        F: FnOnce(Database) -> Fut,
        Fut: Future<Output = mongodb::error::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.run_raw(lane, command, op).await?.map_err(classify)
    }

    /// [`run`](Self::run), handing the driver's own result to the caller (to tell a duplicate
    /// key from other failures).
    pub async fn run_raw<T, F, Fut>(
        &self,
        lane: Lane,
        command: Command<'_>,
        op: F,
    ) -> StoreResult<mongodb::error::Result<T>>
    where
        F: FnOnce(Database) -> Fut,
        Fut: Future<Output = mongodb::error::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let asked = Instant::now();
        let counters = (lane == Lane::Work).then_some(&self.inner.work);
        let in_flight = counters.map(|c| InFlightGuard::enter(c, self.millis_since_epoch(asked)));
        let result = self.gated(lane, command, op).await;
        drop(in_flight);
        let elapsed = asked.elapsed();
        let outcome = match &result {
            Ok(_) => "ok",
            Err(StoreError::Unavailable(_)) => "unavailable",
            Err(StoreError::Unexpected(_)) => "error",
        };
        metrics::counter!("zaguan_store_calls_total", "lane" => lane.label(), "outcome" => outcome)
            .increment(1);
        metrics::histogram!("zaguan_store_call_seconds", "lane" => lane.label())
            .record(elapsed.as_secs_f64());
        if let Some(counters) = counters {
            counters.calls.fetch_add(1, Ordering::Relaxed);
            let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            counters.micros.fetch_add(micros, Ordering::Relaxed);
            if elapsed > SLOW_CALL {
                counters.slow.fetch_add(1, Ordering::Relaxed);
            }
            if matches!(result, Err(StoreError::Unavailable(_))) {
                counters.unavailable.fetch_add(1, Ordering::Relaxed);
            }
        }
        result
    }

    async fn gated<T, F, Fut>(
        &self,
        lane: Lane,
        (name, collection): Command<'_>,
        op: F,
    ) -> StoreResult<mongodb::error::Result<T>>
    where
        F: FnOnce(Database) -> Fut,
        Fut: Future<Output = mongodb::error::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let client = self.current();
        let semaphore = client.lanes[lane.index()].clone();
        let waiting = (lane == Lane::Work).then(|| WaitingGuard::enter(&self.inner.work));
        let permit = match tokio::time::timeout(lane.wait_limit(), semaphore.acquire_owned()).await
        {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(StoreError::Unavailable("store closed".to_owned())),
            Err(_) => {
                return Err(StoreError::Unavailable(format!(
                    "no MongoDB connection free within {:?} ({} lane busy)",
                    lane.wait_limit(),
                    lane.label()
                )));
            }
        };
        drop(waiting);
        let call = op(client.database);
        let collection = collection.to_owned();
        let mut task = tokio::spawn(async move {
            // The permit goes back when the database has answered, not when the caller stops
            // waiting: the gate counts what the database is really doing.
            let started = Instant::now();
            let answer = tokio::time::timeout(ABANDON_AFTER, call).await;
            drop(permit);
            // Timed here, not by the driver's command events: those copy and parse every
            // command and reply into documents, a tenth of the service's CPU on a busy store.
            let outcome = match &answer {
                Ok(Ok(_)) => "ok",
                Ok(Err(_)) => "error",
                Err(_) => "abandoned",
            };
            metrics::histogram!(
                "zaguan_store_command_seconds",
                "command" => name,
                "collection" => collection,
                "outcome" => outcome
            )
            .record(started.elapsed().as_secs_f64());
            answer
        });
        match tokio::time::timeout(lane.answer_limit(), &mut task).await {
            Ok(Ok(Ok(answer))) => Ok(answer),
            Ok(Ok(Err(_))) => Err(StoreError::Unavailable(format!(
                "no answer within {ABANDON_AFTER:?}"
            ))),
            Ok(Err(join)) => Err(StoreError::Unexpected(anyhow::anyhow!(
                "MongoDB call task failed: {join}"
            ))),
            Err(_) => Err(StoreError::Unavailable(format!(
                "no answer within {:?}",
                lane.answer_limit()
            ))),
        }
    }

    /// How the work lane fared since the last call (counters reset), and how many wait now.
    pub fn pressure(&self) -> Pressure {
        let work = &self.inner.work;
        let calls = work.calls.swap(0, Ordering::Relaxed);
        let micros = work.micros.swap(0, Ordering::Relaxed);
        let in_flight = work.in_flight.load(Ordering::Acquire);
        let started_ms = work.started_ms.load(Ordering::Acquire);
        let now_ms = self.millis_since_epoch(Instant::now());
        // The loads are not one snapshot: when a call started or ended between them, the age
        // is not known this time, and zero leaves the window to the finished calls alone (the
        // age only ever holds growth back).
        let settled = work.in_flight.load(Ordering::Acquire) == in_flight;
        let in_flight_age = match started_ms.checked_div(in_flight) {
            Some(mean_start) if settled => Duration::from_millis(now_ms.saturating_sub(mean_start)),
            _ => Duration::ZERO,
        };
        Pressure {
            calls,
            slow: work.slow.swap(0, Ordering::Relaxed),
            unavailable: work.unavailable.swap(0, Ordering::Relaxed),
            waiting: work.waiting.load(Ordering::Relaxed),
            mean: Duration::from_micros(micros.checked_div(calls).unwrap_or(0)),
            in_flight,
            in_flight_age,
        }
    }

    fn millis_since_epoch(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.inner.epoch).as_millis()).unwrap_or(0)
    }

    /// Replaces the client by a new one built from the same configuration; calls in flight on
    /// the old one finish there. For a client that no longer answers while the database does.
    pub async fn rebuild(&self) -> anyhow::Result<()> {
        let (client, _) = build_client(&self.inner.config, self.inner.adjust.as_ref()).await?;
        let database = client.database(&self.inner.config.database);
        *self.inner.client.write().unwrap_or_else(|e| e.into_inner()) =
            Client::new(database, self.inner.sizes);
        self.inner.rebuilds.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("zaguan_store_client_rebuilds_total").increment(1);
        Ok(())
    }

    /// Client rebuilds so far.
    pub fn rebuilds(&self) -> u64 {
        self.inner.rebuilds.load(Ordering::Relaxed)
    }

    /// Whether a client of its own, built now, gets an answer to a ping within `within`: tells
    /// a database that is down from a client of ours that is stuck.
    pub async fn fresh_client_answers(&self, within: Duration) -> bool {
        let Ok((client, _)) = build_client(&self.inner.config, None).await else {
            return false;
        };
        let database = client.database(&self.inner.config.database);
        let answered = tokio::time::timeout(within, database.run_command(bson::doc! {"ping": 1}))
            .await
            .is_ok_and(|answer| answer.is_ok());
        // Its background tasks end with it; nothing of it is shared.
        drop(client);
        answered
    }
}

/// MongoDB's duplicate-key error code.
pub const DUPLICATE_KEY: i32 = 11000;

/// A write refused because a unique key is taken.
pub fn is_duplicate_key(error: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*error.kind {
        ErrorKind::Write(WriteFailure::WriteError(e)) => e.code == DUPLICATE_KEY,
        ErrorKind::Command(e) => e.code == DUPLICATE_KEY,
        ErrorKind::InsertMany(failure) => {
            failure.write_concern_error.is_none()
                && failure
                    .write_errors
                    .as_deref()
                    .is_some_and(|errors| errors.iter().all(|e| e.code == DUPLICATE_KEY))
        }
        _ => false,
    }
}

/// One driver client's database and the lanes in front of its connections.
#[derive(Clone)]
struct Client {
    database: Database,
    lanes: [Arc<Semaphore>; 3],
}

impl Client {
    fn new(database: Database, sizes: [usize; 3]) -> Self {
        Self {
            database,
            lanes: sizes.map(|n| Arc::new(Semaphore::new(n))),
        }
    }
}

/// Counts a caller as waiting for a connection while it exists.
/// A work call asked and not finished: counted in flight, with its start, until dropped (its
/// caller may stop waiting at any point).
struct InFlightGuard<'a> {
    counters: &'a Counters,
    started_ms: u64,
}

impl<'a> InFlightGuard<'a> {
    fn enter(counters: &'a Counters, started_ms: u64) -> Self {
        counters.in_flight.fetch_add(1, Ordering::Relaxed);
        counters.started_ms.fetch_add(started_ms, Ordering::Relaxed);
        Self {
            counters,
            started_ms,
        }
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.counters
            .started_ms
            .fetch_sub(self.started_ms, Ordering::Relaxed);
        self.counters.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

struct WaitingGuard<'a>(&'a Counters);

impl<'a> WaitingGuard<'a> {
    fn enter(counters: &'a Counters) -> Self {
        counters.waiting.fetch_add(1, Ordering::Relaxed);
        Self(counters)
    }
}

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Control gets 2 (1 in a pool under 8), ingress a quarter (at least 1), work the rest (at
/// least 1). A pool is never smaller than 3.
fn lane_sizes(pool_size: u32) -> [usize; 3] {
    let pool = usize::try_from(pool_size).unwrap_or(usize::MAX).max(3);
    let control = if pool >= 8 { 2 } else { 1 };
    let ingress = (pool / 4).clamp(1, pool - control - 1);
    let work = pool - control - ingress;
    [control, ingress, work]
}

async fn build_client(
    config: &MongoConfig,
    adjust: Option<&Adjust>,
) -> anyhow::Result<(mongodb::Client, u32)> {
    let mut options = ClientOptions::parse(config.uri.expose_secret())
        .await
        .context("MONGODB_URI could not be parsed")?;
    if let Some(adjust) = adjust {
        adjust(&mut options);
    }
    options.app_name.get_or_insert_with(|| "zaguan".to_owned());
    options
        .server_selection_timeout
        .get_or_insert(SERVER_SELECTION_TIMEOUT);
    options
        .connect_timeout
        .get_or_insert(SERVER_SELECTION_TIMEOUT);
    // No more calls go to the driver at once than it has connections (see the module's doc).
    let pool_size = options.max_pool_size.unwrap_or(DEFAULT_POOL_SIZE).max(3);
    options.max_pool_size = Some(pool_size);
    if options.cmap_event_handler.is_none() {
        options.cmap_event_handler = Some(mongodb::event::EventHandler::callback(pool_event));
    }
    let client =
        mongodb::Client::with_options(options).context("MongoDB client options rejected")?;
    Ok((client, pool_size))
}

/// The driver's pool events, as metrics and logs: a cleared pool is worth a warning.
fn pool_event(event: mongodb::event::cmap::CmapEvent) {
    use mongodb::event::cmap::CmapEvent;
    match event {
        CmapEvent::PoolCleared(cleared) => {
            tracing::warn!(address = %cleared.address, "MongoDB connection pool cleared (the server was unreachable or reset)");
            metrics::counter!("zaguan_store_pool_cleared_total").increment(1);
        }
        CmapEvent::ConnectionCreated(_) => {
            metrics::counter!("zaguan_store_connections_total", "event" => "created").increment(1);
        }
        CmapEvent::ConnectionClosed(closed) => {
            tracing::debug!(reason = ?closed.reason, "MongoDB connection closed");
            metrics::counter!("zaguan_store_connections_total", "event" => "closed").increment(1);
        }
        _ => {}
    }
}

/// Unavailable (retry later) or unexpected (a bug, bad data).
pub(crate) fn classify(error: mongodb::error::Error) -> StoreError {
    use mongodb::error::ErrorKind;
    let unavailable = matches!(
        *error.kind,
        ErrorKind::ServerSelection { .. }
            | ErrorKind::Io(_)
            | ErrorKind::ConnectionPoolCleared { .. }
    ) || error.contains_label("RetryableWriteError")
        || error.contains_label("SystemOverloadedError");
    if unavailable {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Unexpected(anyhow::Error::new(error).context("MongoDB call failed"))
    }
}

#[cfg(test)]
mod tests;
