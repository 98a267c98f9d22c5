//! Load harness for whole turns: signed webhooks in, replies out through the Graph API, with a
//! fake LLM and a fake Graph API served in-process.
//!
//! It starts, on free loopback ports:
//! - a fake OpenAI-compatible server (`POST /v1/chat/completions`): when the request offers the
//!   `ToAppointmentAssistant` delegation tool and nothing was delegated since the last user
//!   message, it answers after `--llm-latency-ms` with one call to that tool; otherwise with the
//!   text «¿Qué día te viene bien?». Both answers carry a `usage` object;
//! - a fake Graph API (`POST /v21.0/{phone_number_id}/messages`): read marks (with the typing
//!   indicator) get `{"success": true}`, texts a `wamid.OUTn`; the arrival time of each text to
//!   each recipient is what ends a turn;
//! - `zaguan serve` itself (`--zaguan PATH`, by default the `zaguan` binary of the same build
//!   profile as this example) as a child process pointed at both fakes, with the MemoryStore, or
//!   the MongoDB of `MONGODB_URI` when set (a fresh `zaguan_load_…` database unless
//!   `MONGODB_DATABASE` is set; the fresh one is dropped afterwards unless `--keep-db`).
//!   `ZAGUAN_FAST_ROUTE=false`, so a user's first turn makes two LLM calls (the primary
//!   assistant delegates, the appointment assistant answers) and later turns one (the
//!   conversation stays in the appointment assistant). `--target URL` drives a service that is
//!   already running instead; it must be pointed at the fakes (the variables are printed; their
//!   ports are fixed in that mode, `--llm-port`/`--graph-port`), and CPU and memory are measured
//!   only with `--pid`.
//!
//! Load: `--users N` simulated users (distinct wa_ids), each of whose messages is sent only once
//! the reply to the previous one has arrived, so every inbound message maps to exactly one
//! reply. Without `--rate`, flat out over `--connections` keep-alive connections: `--messages M`
//! per user, or as many as fit in `--duration S`. With `--rate R`, open loop: message k is due
//! at k/R s and goes to user k mod N (after that user's pending reply, if any: `user_waits`);
//! ack and end-to-end latency are measured from the due time, so a slow service is not hidden
//! by coordinated omission. `--duration S` bounds the run, else N × M messages are sent.
//! `--batch B` sends the users' first messages B to a webhook (the backlog Meta replays after
//! an outage comes as up to 1,000 messages per POST), `--pad BYTES` makes each message that
//! long, and `--probe-after S` keeps the last user out of the batch and has it write alone S
//! seconds in: how long a plain message waits behind a backlog. `/readyz` is watched all along;
//! with MongoDB, once the service has stopped, no inbox message may be left open or failed and
//! no lease held.
//!
//! Figures: webhook acks/s and ack latency p50/p99/p99.9; turns completed and turns/s (replies
//! received by the fake Graph API over the time from the first send to the last reply);
//! end-to-end latency (webhook send → reply at the fake Graph API) and the same minus the time
//! the fake LLM spent answering that turn's calls (its own measured latency, i.e. ≥
//! `--llm-latency-ms` per call), p50/p99; LLM and Graph calls; CPU seconds of the service
//! (utime + stime from `/proc/PID/stat`) in all and per turn; its peak RSS (`VmHWM`); with
//! MongoDB, the CPU of the `ferretdb`/`mongod` process found (or `--store-pid`) plus any
//! `postgres` processes (FerretDB's PostgreSQL backend). Errors, `/readyz` not answering 200, replies
//! nobody was waiting for (duplicates), wrong reply texts and turns not completed within
//! `--drain-timeout` of the last progress are reported; any of them makes the exit status 1.
//!
//! ```sh
//! scripts/bench-turns --users 2000 --messages 1                  # builds both, then runs this
//! cargo build --release --bin zaguan                             # cargo run builds only this
//! cargo run --release --example turn_load -- --smoke             # 20 users × 2 messages
//! cargo run --release --example turn_load -- --users 10000 --llm-latency-ms 1000
//! cargo run --release --example turn_load -- --rate 20 --duration 20 --users 200
//! cargo run --release --example turn_load -- --users 1001 --batch 1000 --pad 2300 --probe-after 10
//! ```
//!
//! Prints a summary and one JSON line starting with `{"bench":"turn_load"`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::error::Error;
use std::fmt::Debug;
use std::net::SocketAddr;
use std::ops::RangeBounds;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::{sleep, timeout};

#[path = "common/procfs.rs"]
mod procfs;

type BoxError = Box<dyn Error + Send + Sync>;

/// Longest a webhook POST may take before it counts as an error.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// What every user writes; the number lets the fake LLM tell users apart.
const ASK: &str = "Quiero agendar una visita al piso de la calle Mayor, número";
/// What the fake LLM's subgraph answers, hence the reply every turn should get.
const REPLY: &str = "¿Qué día te viene bien?";
const DELEGATION: &str = "ToAppointmentAssistant";
const PHONE_NUMBER_ID: &str = "109876543210";
/// Users' wa_ids: `34` + 4 digits of run salt + 6 digits of user index.
const USER_DIGITS: u32 = 6;

#[derive(Parser, Debug)]
#[command(about = "Load harness for whole turns: webhooks in, replies out, fake LLM and Graph API")]
struct Args {
    /// The `zaguan` binary to start (default: the one next to this example's build directory).
    #[arg(long)]
    zaguan: Option<PathBuf>,
    /// Drive an already running service at this base URL (e.g. http://127.0.0.1:8080) instead.
    #[arg(long)]
    target: Option<Uri>,
    /// With --target: the service's pid, to measure its CPU and peak RSS.
    #[arg(long)]
    pid: Option<u32>,
    /// The store's pid (FerretDB, mongod) to measure its CPU; default: found by name with MongoDB.
    #[arg(long)]
    store_pid: Option<u32>,
    /// HMAC secret of the webhooks (the service's WHATSAPP_APP_SECRET).
    #[arg(long, default_value = "load-secret")]
    secret: String,
    /// Simulated users (distinct wa_ids).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..1_000_000))]
    users: u64,
    /// Messages per user (ignored with --duration).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    messages: u32,
    /// Seconds during which messages are sent (then the run drains).
    #[arg(long, value_parser = |s: &str| number(s, 1e-3..1e6))]
    duration: Option<f64>,
    /// Messages per second, open loop; absent: flat out.
    #[arg(long, value_parser = |s: &str| number(s, 1e-3..1e7))]
    rate: Option<f64>,
    /// Keep-alive connections the webhooks are sent over.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..100_000))]
    connections: u64,
    /// ZAGUAN_WORKER_CONCURRENCY and ZAGUAN_LLM_MAX_CONCURRENCY of the service started.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Speak HTTP/1.1 to the fake LLM (one connection per call waiting), not HTTP/2.
    #[arg(long)]
    llm_http1: bool,
    /// The fake LLM's latency per call, in milliseconds.
    #[arg(long, default_value_t = 0)]
    llm_latency_ms: u64,
    /// Give up on the turns still open when nothing progressed for this many seconds.
    #[arg(long, default_value_t = 30.0, value_parser = |s: &str| number(s, 0.0..1e6))]
    drain_timeout: f64,
    /// Port of the fake LLM (default: free one; 18091 with --target).
    #[arg(long)]
    llm_port: Option<u16>,
    /// Port of the fake Graph API (default: free one; 18092 with --target).
    #[arg(long)]
    graph_port: Option<u16>,
    /// Extra KEY=VALUE for the service started, applied last (e.g. ZAGUAN_LEASE=60s).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Keep the fresh MongoDB database of the run.
    #[arg(long)]
    keep_db: bool,
    /// CI check: 20 users × 2 messages, no LLM latency; fails unless every turn completes once.
    #[arg(long)]
    smoke: bool,
    /// Flat out: the users' first messages go in webhooks of this many messages each (Meta
    /// batches up to 1,000 updates per POST when it replays a backlog).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    batch: u64,
    /// Pad each message's text to about this many bytes (a long voice-to-text run-on).
    #[arg(long, default_value_t = 0)]
    pad: usize,
    /// Keep the last user out of the batch and send its message alone this many seconds after
    /// the load starts: how long a plain «Hola» waits behind a backlog.
    #[arg(long, value_parser = |s: &str| number(s, 0.0..1e6))]
    probe_after: Option<f64>,
}

fn number(s: &str, range: impl RangeBounds<f64> + Debug) -> Result<f64, String> {
    let value: f64 = s.parse().map_err(|e| format!("{e}"))?;
    match range.contains(&value) {
        true => Ok(value),
        false => Err(format!("{value} is not in {range:?}")),
    }
}

/// SplitMix64, for the run's nonce and salt.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The floor the time to the first sign of life must keep: webhook sent → read mark and typing
/// indicator at the Graph API, p99, in milliseconds. Printed as met or not; not an exit status
/// (timings on a shared machine vary).
const TYPING_P99_FLOOR_MS: f64 = 100.0;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
}

// ---- shared state -------------------------------------------------------------------------

/// A message sent and not answered yet.
struct Pending {
    seq: u32,
    /// When it was due: the send time flat out, the slot's time open loop.
    start: Instant,
}

#[derive(Default)]
struct User {
    pending: Option<Pending>,
    /// Open loop: due times of messages waiting for the pending reply.
    backlog: VecDeque<Instant>,
    next_seq: u32,
    /// Time the fake LLM spent on the pending turn's calls.
    llm: Duration,
}

#[derive(Default)]
struct Figures {
    /// Ack latency, end to end, end to end minus the fake LLM's time (µs).
    ack: Option<Histogram<u64>>,
    e2e: Option<Histogram<u64>>,
    e2e_net: Option<Histogram<u64>>,
    first_send: Option<Instant>,
    last_ack: Option<Instant>,
    last_reply: Option<Instant>,
    /// A few examples of what went wrong, for the summary.
    samples: Vec<String>,
    /// The probe user's wait from its send to its reply.
    probe: Option<Duration>,
    /// The first user's first message (the batch's first sender): its wait for the reply.
    first_answer: Option<Duration>,
    /// From a message's send to its read mark and typing indicator (µs).
    typing: Option<Histogram<u64>>,
}

#[derive(Default)]
struct Counters {
    dispatched: AtomicU64,
    acks: AtomicU64,
    status_4xx: AtomicU64,
    status_5xx: AtomicU64,
    status_other: AtomicU64,
    send_errors: AtomicU64,
    replies: AtomicU64,
    /// Texts to a user with no message pending: duplicates, or a late answer to a failed send.
    unexpected: AtomicU64,
    /// Replies whose text is not the fake subgraph's answer (an apology, an offline reply…).
    wrong_text: AtomicU64,
    /// Texts to a recipient that is not one of this run's users.
    strangers: AtomicU64,
    /// Open loop: messages that waited for their user's previous reply.
    user_waits: AtomicU64,
    llm_calls: AtomicU64,
    llm_delegations: AtomicU64,
    llm_unattributed: AtomicU64,
    llm_bad_requests: AtomicU64,
    llm_request_bytes: AtomicU64,
    graph_calls: AtomicU64,
    graph_texts: AtomicU64,
    graph_read_marks: AtomicU64,
    graph_other: AtomicU64,
    unknown_routes: AtomicU64,
    /// µs since `epoch` of the last ack or reply.
    last_progress: AtomicU64,
    /// `/readyz` polls during the run, and those not answered 200 within 2 s.
    ready_checks: AtomicU64,
    not_ready: AtomicU64,
}

struct Shared {
    args: Args,
    epoch: Instant,
    nonce: u64,
    /// wa_id = 34 + salt (4 digits) + user index (6 digits).
    salt: u64,
    llm_latency: Duration,
    /// The service's address and host header.
    addr: String,
    host: HeaderValue,
    users: Vec<Mutex<User>>,
    counters: Counters,
    figures: Mutex<Figures>,
    /// Connections to the service: a permit per connection, the idle ones.
    permits: Semaphore,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    /// Timed runs: no message is started after this (set when the load starts).
    end: OnceLock<Instant>,
    /// Open loop: every slot has been released.
    pacer_done: AtomicBool,
}

impl Shared {
    fn wa_id(&self, user: usize) -> String {
        format!("34{:04}{user:06}", self.salt)
    }

    fn user_of(&self, wa_id: &str) -> Option<usize> {
        let rest = wa_id.strip_prefix(&format!("34{:04}", self.salt))?;
        let user: usize = rest
            .parse()
            .ok()
            .filter(|_| rest.len() == USER_DIGITS as usize)?;
        (user < self.users.len()).then_some(user)
    }

    fn progress(&self) {
        let now = self.epoch.elapsed().as_micros() as u64;
        self.counters
            .last_progress
            .fetch_max(now, Ordering::Relaxed);
    }

    fn sample(&self, what: String) {
        let mut figures = self.figures.lock().unwrap();
        if figures.samples.len() < 8 && !figures.samples.contains(&what) {
            figures.samples.push(what);
        }
    }

    /// The user's next message, if any is due now: marks it pending. Called with the user's
    /// lock held and nothing pending.
    fn next_message(&self, user: &mut User, now: Instant) -> Option<(u32, Instant)> {
        let start = if self.args.rate.is_some() {
            user.backlog.pop_front()?
        } else if let Some(end) = self.end.get().copied() {
            Some(now).filter(|now| *now < end)?
        } else if user.next_seq < self.args.messages {
            now
        } else {
            return None;
        };
        let seq = user.next_seq;
        user.next_seq += 1;
        user.llm = Duration::ZERO;
        user.pending = Some(Pending { seq, start });
        Some((seq, start))
    }

    /// Sends message `seq` of `user` (already marked pending) in a task of its own.
    fn dispatch(self: &Arc<Self>, user: usize, seq: u32, start: Instant) {
        self.dispatch_batch(vec![(user, seq)], start);
    }

    /// Sends the messages of `batch` (each already marked pending) in one webhook.
    fn dispatch_batch(self: &Arc<Self>, batch: Vec<(usize, u32)>, start: Instant) {
        self.counters
            .dispatched
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let shared = self.clone();
        tokio::spawn(async move { shared.send_webhook(batch, start).await });
    }

    /// One notification carrying message `seq` of each `(user, seq)`, from as many senders.
    fn notification(&self, batch: &[(usize, u32)]) -> String {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut contacts = Vec::with_capacity(batch.len());
        let mut messages = Vec::with_capacity(batch.len());
        for &(user, seq) in batch {
            let wa_id = self.wa_id(user);
            let wamid = format!("wamid.LOAD{:016X}{user:06}{seq:06}", self.nonce);
            let mut text = format!("{ASK} {user}");
            if self.args.pad > text.len() {
                // Words, as a long dictated message would have; the number stays right after ASK.
                text.push_str(" y");
                while text.len() + 12 < self.args.pad {
                    text.push_str(" por favor");
                }
            }
            contacts.push(format!(
                r#"{{"profile":{{"name":"Lucía Fernández"}},"wa_id":"{wa_id}"}}"#
            ));
            messages.push(format!(
                r#"{{"from":"{wa_id}","id":"{wamid}","timestamp":"{ts}","type":"text","text":{{"body":"{text}"}}}}"#
            ));
        }
        format!(
            r#"{{"object":"whatsapp_business_account","entry":[{{"id":"102290129340398","changes":[{{"field":"messages","value":{{"messaging_product":"whatsapp","metadata":{{"display_phone_number":"34910000000","phone_number_id":"{PHONE_NUMBER_ID}"}},"contacts":[{}],"messages":[{}]}}}}]}}]}}"#,
            contacts.join(","),
            messages.join(",")
        )
    }

    async fn send_webhook(self: Arc<Self>, batch: Vec<(usize, u32)>, start: Instant) {
        let body = Bytes::from(self.notification(&batch));
        let signature = zaguan::webhook::signature::sign(self.args.secret.as_bytes(), &body);
        let request = Request::post("/webhook")
            .header(HOST, self.host.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, "zaguan-turn-load")
            .header("x-hub-signature-256", signature)
            .body(Full::new(body))
            .expect("valid request");
        let permit = self.permits.acquire().await.expect("never closed");
        let pooled = self.idle.lock().unwrap().pop();
        let now = Instant::now();
        // Flat out, a message counts from when a connection is free to send it; open loop,
        // from when it was due.
        let start = match self.args.rate {
            Some(_) => start,
            None => {
                for &(user, seq) in &batch {
                    if let Some(p) = self.users[user].lock().unwrap().pending.as_mut()
                        && p.seq == seq
                    {
                        p.start = now;
                    }
                }
                now
            }
        };
        {
            let mut figures = self.figures.lock().unwrap();
            figures.first_send = Some(figures.first_send.map_or(start, |t| t.min(start)));
        }
        let mut conn = pooled.filter(|c| !c.is_closed());
        let outcome = timeout(WEBHOOK_TIMEOUT, send(&mut conn, &self.addr, request)).await;
        let done = Instant::now();
        // A connection whose request failed or timed out may be mid-exchange: not reused.
        if let (Some(conn), Ok(Ok(_))) = (conn.filter(|c| !c.is_closed()), &outcome) {
            self.idle.lock().unwrap().push(conn);
        }
        drop(permit);
        let c = &self.counters;
        let n = batch.len() as u64;
        let failure = match outcome {
            Ok(Ok(200..=299)) => {
                c.acks.fetch_add(n, Ordering::Relaxed);
                let mut figures = self.figures.lock().unwrap();
                let micros = done.saturating_duration_since(start).as_micros() as u64;
                figures
                    .ack
                    .get_or_insert_with(histogram)
                    .saturating_record(micros);
                figures.last_ack = Some(figures.last_ack.map_or(done, |t| t.max(done)));
                drop(figures);
                self.progress();
                return;
            }
            Ok(Ok(status @ 400..=499)) => (&c.status_4xx, format!("webhook answered {status}")),
            Ok(Ok(status @ 500..=599)) => (&c.status_5xx, format!("webhook answered {status}")),
            Ok(Ok(status)) => (&c.status_other, format!("webhook answered {status}")),
            Ok(Err(e)) => (&c.send_errors, format!("webhook not sent: {e}")),
            Err(_) => (&c.send_errors, "webhook timed out".to_owned()),
        };
        failure.0.fetch_add(n, Ordering::Relaxed);
        self.sample(failure.1);
        // No reply will come for them: the users go on with their next message.
        for (user, seq) in batch {
            let next = {
                let mut state = self.users[user].lock().unwrap();
                match &state.pending {
                    Some(p) if p.seq == seq => {
                        state.pending = None;
                        self.next_message(&mut state, done)
                    }
                    _ => None,
                }
            };
            if let Some((seq, start)) = next {
                self.dispatch(user, seq, start);
            }
        }
    }

    /// The user kept out of the batch to measure the wait behind it, if any.
    fn probe_user(&self) -> Option<usize> {
        self.args.probe_after.map(|_| self.users.len() - 1)
    }

    /// A text reached the fake Graph API for `to` at `at`.
    /// The read mark (with the typing indicator) of message `wamid` arrived at `at`: the
    /// customer's first sign of life, timed from the message's send.
    fn read_mark(&self, wamid: &str, at: Instant) {
        let Some(rest) = wamid.strip_prefix(&format!("wamid.LOAD{:016X}", self.nonce)) else {
            return;
        };
        let (Some(user), Some(seq)) = (
            rest.get(..6).and_then(|u| u.parse::<usize>().ok()),
            rest.get(6..).and_then(|q| q.parse::<u32>().ok()),
        ) else {
            return;
        };
        let Some(state) = self.users.get(user) else {
            return;
        };
        let start = match &state.lock().unwrap().pending {
            Some(pending) if pending.seq == seq => pending.start,
            _ => return,
        };
        let waited = at.saturating_duration_since(start).as_micros() as u64;
        self.figures
            .lock()
            .unwrap()
            .typing
            .get_or_insert_with(histogram)
            .saturating_record(waited);
    }

    fn reply(self: &Arc<Self>, to: &str, text: &str, at: Instant) {
        let c = &self.counters;
        let Some(user) = self.user_of(to) else {
            c.strangers.fetch_add(1, Ordering::Relaxed);
            self.sample(format!("text to an unknown recipient {to}"));
            return;
        };
        let (finished, next) = {
            let mut state = self.users[user].lock().unwrap();
            match state.pending.take() {
                None => (None, None),
                Some(pending) => {
                    let llm = state.llm;
                    let next = self.next_message(&mut state, at);
                    (Some((pending, llm)), next)
                }
            }
        };
        let Some((pending, llm)) = finished else {
            c.unexpected.fetch_add(1, Ordering::Relaxed);
            self.sample(format!(
                "a text to user {user} with nothing pending (duplicate?): {text:?}"
            ));
            return;
        };
        if let Some((seq, start)) = next {
            self.dispatch(user, seq, start);
        }
        c.replies.fetch_add(1, Ordering::Relaxed);
        if text != REPLY {
            c.wrong_text.fetch_add(1, Ordering::Relaxed);
            self.sample(format!("unexpected reply text: {text:?}"));
        }
        let e2e = at.saturating_duration_since(pending.start);
        let mut figures = self.figures.lock().unwrap();
        if Some(user) == self.probe_user() && pending.seq == 0 {
            figures.probe = Some(e2e);
        }
        if user == 0 && pending.seq == 0 {
            figures.first_answer = Some(e2e);
            // At once, not only in the summary: a long backlog can be stopped here.
            eprintln!(
                "turn_load: first sender answered after {:.2} s",
                e2e.as_secs_f64()
            );
        }
        let micros = |d: Duration| d.as_micros() as u64;
        figures
            .e2e
            .get_or_insert_with(histogram)
            .saturating_record(micros(e2e));
        figures
            .e2e_net
            .get_or_insert_with(histogram)
            .saturating_record(micros(e2e.saturating_sub(llm)));
        figures.last_reply = Some(figures.last_reply.map_or(at, |t| t.max(at)));
        drop(figures);
        self.progress();
    }
}

type Conn = SendRequest<Full<Bytes>>;

async fn connect(addr: &str) -> Result<Conn, BoxError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn send(
    conn: &mut Option<Conn>,
    addr: &str,
    req: Request<Full<Bytes>>,
) -> Result<u16, BoxError> {
    if conn.as_ref().is_none_or(Conn::is_closed) {
        *conn = Some(connect(addr).await?);
    }
    let sender = conn.as_mut().expect("connected above");
    sender.ready().await?;
    let response = sender.send_request(req).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok(status)
}

// ---- the fake LLM -------------------------------------------------------------------------

#[derive(Deserialize)]
struct ChatRequest<'a> {
    #[serde(borrow)]
    messages: Vec<ChatMessage<'a>>,
    #[serde(default, borrow)]
    tools: Vec<ChatTool<'a>>,
}

#[derive(Deserialize)]
struct ChatMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChatTool<'a> {
    #[serde(borrow)]
    function: ChatFunction<'a>,
}

#[derive(Deserialize)]
struct ChatFunction<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// The user whose number ends the last user message (merged messages are joined by newlines).
fn asking_user(request: &ChatRequest<'_>) -> Option<usize> {
    let last = request.messages.iter().rev().find(|m| m.role == "user")?;
    let content = last.content.as_deref()?;
    let (_, number) = content.rsplit_once(ASK)?;
    number.split_whitespace().next()?.parse().ok()
}

async fn chat_completions(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let arrived = Instant::now();
    let c = &shared.counters;
    let n = c.llm_calls.fetch_add(1, Ordering::Relaxed) + 1;
    c.llm_request_bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    let Ok(request) = serde_json::from_slice::<ChatRequest<'_>>(&body) else {
        c.llm_bad_requests.fetch_add(1, Ordering::Relaxed);
        shared.sample("the fake LLM got an unreadable request".to_owned());
        let error =
            json!({"error": {"message": "unreadable request", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    let last_user = request.messages.iter().rposition(|m| m.role == "user");
    let delegated = request
        .messages
        .iter()
        .skip(last_user.unwrap_or(0))
        .any(|m| m.role == "tool");
    let offered = request.tools.iter().any(|t| t.function.name == DELEGATION);
    let delegate = offered && !delegated;
    let user = asking_user(&request).filter(|u| *u < shared.users.len());
    drop(request);
    if !shared.llm_latency.is_zero() {
        sleep(shared.llm_latency).await;
    }
    match user {
        Some(user) => shared.users[user].lock().unwrap().llm += arrived.elapsed(),
        None => {
            c.llm_unattributed.fetch_add(1, Ordering::Relaxed);
        }
    }
    let message = if delegate {
        c.llm_delegations.fetch_add(1, Ordering::Relaxed);
        format!(
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_load{n}","type":"function","function":{{"name":"{DELEGATION}","arguments":"{{\"query\":\"Agendar una visita al piso de la calle Mayor\"}}"}}}}]}}"#
        )
    } else {
        format!(r#"{{"role":"assistant","content":"{REPLY}"}}"#)
    };
    let finish = if delegate { "tool_calls" } else { "stop" };
    let body = format!(
        r#"{{"id":"chatcmpl-load{n}","object":"chat.completion","created":{},"model":"gpt-test","choices":[{{"index":0,"message":{message},"finish_reason":"{finish}"}}],"usage":{{"prompt_tokens":812,"completion_tokens":24,"total_tokens":836}}}}"#,
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
    );
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

// ---- the fake Graph API -------------------------------------------------------------------

#[derive(Deserialize)]
struct GraphRequest<'a> {
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    to: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    recipient: Option<Cow<'a, str>>,
    #[serde(default)]
    text: Option<GraphText<'a>>,
    #[serde(default)]
    interactive: Option<Value>,
}

#[derive(Deserialize)]
struct GraphText<'a> {
    #[serde(borrow)]
    body: Cow<'a, str>,
}

async fn graph_messages(
    State(shared): State<Arc<Shared>>,
    Path(_phone_number_id): Path<String>,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let c = &shared.counters;
    c.graph_calls.fetch_add(1, Ordering::Relaxed);
    let json = |body: String| ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    let Ok(request) = serde_json::from_slice::<GraphRequest<'_>>(&body) else {
        c.graph_other.fetch_add(1, Ordering::Relaxed);
        shared.sample("the fake Graph API got an unreadable request".to_owned());
        return StatusCode::BAD_REQUEST.into_response();
    };
    if request.status.is_some() {
        c.graph_read_marks.fetch_add(1, Ordering::Relaxed);
        if let Some(wamid) = &request.message_id {
            shared.read_mark(wamid, at);
        }
        return json(r#"{"success":true}"#.to_owned());
    }
    let text = match (&request.text, &request.interactive) {
        (Some(text), _) => Some(text.body.to_string()),
        (None, Some(interactive)) => interactive["body"]["text"].as_str().map(str::to_owned),
        (None, None) => None,
    };
    let to = request.to.as_deref().or(request.recipient.as_deref());
    let n = c.graph_texts.fetch_add(1, Ordering::Relaxed) + 1;
    match (to, text) {
        (Some(to), Some(text)) => shared.reply(to, &text, at),
        _ => {
            c.graph_other.fetch_add(1, Ordering::Relaxed);
            shared.sample("the fake Graph API got a message that is not a text".to_owned());
        }
    }
    let to = json!(to.unwrap_or_default());
    json(format!(
        r#"{{"messaging_product":"whatsapp","contacts":[{{"input":{to},"wa_id":{to}}}],"messages":[{{"id":"wamid.OUT{n}"}}]}}"#
    ))
}

async fn unknown_route(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> StatusCode {
    shared
        .counters
        .unknown_routes
        .fetch_add(1, Ordering::Relaxed);
    shared.sample(format!("a fake server was asked for {}", uri.path()));
    StatusCode::NOT_FOUND
}

/// A loopback listener with a backlog deep enough for thousands of connections at once.
fn listen(port: u16) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    socket.listen(8192)
}

// ---- the service's process ----------------------------------------------------------------

/// Peak resident set size (`VmHWM`) in MiB.
fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The `ferretdb*` or `mongod` process listening on `port` (the one whose command line names
/// it), else the newest one, as `pgrep -n` would find it.
fn find_store_process(port: Option<u16>) -> Option<(u32, String)> {
    let candidates: Vec<(u32, String, String)> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let comm = comm.trim().to_owned();
            let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ");
            (comm.starts_with("ferretdb") || comm == "mongod").then_some((pid, comm, cmdline))
        })
        .collect();
    let listening = port.and_then(|port| {
        candidates
            .iter()
            .find(|(_, _, cmdline)| {
                cmdline.contains(&format!(":{port} ")) || cmdline.ends_with(&format!(":{port}"))
            })
            .map(|(pid, comm, _)| (*pid, comm.clone()))
    });
    listening.or_else(|| {
        candidates
            .into_iter()
            .max_by_key(|(pid, ..)| *pid)
            .map(|(pid, comm, _)| (pid, comm))
    })
}

fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

struct Service {
    child: Child,
    log: PathBuf,
}

impl Service {
    fn start(
        path: &std::path::Path,
        env: &[(String, String)],
        log: PathBuf,
    ) -> Result<Self, BoxError> {
        let file = std::fs::File::create(&log)?;
        let mut command = Command::new(path);
        command
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        // Only what this run sets (and MONGODB_URI/MONGODB_DATABASE) reaches the service.
        for name in zaguan::config::VARIABLES {
            if !matches!(*name, "MONGODB_URI" | "MONGODB_DATABASE") {
                command.env_remove(name);
            }
        }
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", path.display()))?;
        Ok(Self { child, log })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_text(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// SIGTERM, up to 10 s to drain, then SIGKILL.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` without its terminal colour sequences (`ESC [ … letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn default_zaguan() -> PathBuf {
    // target/<profile>/examples/turn_load → target/<profile>/zaguan
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("zaguan")))
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from("target/release/zaguan"))
}

fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

async fn wait_ready(base: &str, service: Option<&mut Service>) -> Result<(), BoxError> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut service = service;
    loop {
        if let Ok(response) = client.get(format!("{base}/readyz")).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if let Some(service) = service.as_deref_mut()
            && let Ok(Some(status)) = service.child.try_wait()
        {
            return Err(format!("zaguan exited ({status}):\n{}", service.log_text()).into());
        }
        if Instant::now() > deadline {
            return Err(format!("{base}/readyz did not answer 200 within 60 s").into());
        }
        sleep(Duration::from_millis(50)).await;
    }
}

// ---- the run ------------------------------------------------------------------------------

fn quantiles(hist: Option<&Histogram<u64>>, qs: &[f64]) -> Vec<f64> {
    qs.iter()
        .map(|q| hist.map_or(0.0, |h| h.value_at_quantile(*q) as f64 / 1000.0))
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = Args::parse();
    if args.smoke {
        (args.users, args.messages, args.llm_latency_ms) = (20, 2, 0);
        (args.duration, args.rate) = (None, None);
    }
    if args.target.is_some() && args.zaguan.is_some() {
        return Err("--target and --zaguan exclude each other".into());
    }
    let spawn = args.target.is_none();
    let needed = args.users.min(u64::from(args.concurrency)) * 2 + args.connections + 256;
    if let Some(limit) = open_files_limit().filter(|limit| *limit < needed) {
        eprintln!(
            "warning: open files limit {limit} < about {needed} sockets this run may need at \
             once; raise it (`ulimit -n 65536`, as scripts/bench-turns does)"
        );
    }

    // The fakes first: the service is told their ports.
    let (llm_port, graph_port) = match spawn {
        true => (args.llm_port.unwrap_or(0), args.graph_port.unwrap_or(0)),
        false => (
            args.llm_port.unwrap_or(18091),
            args.graph_port.unwrap_or(18092),
        ),
    };
    let llm_listener = listen(llm_port)?;
    let graph_listener = listen(graph_port)?;
    let llm_url = format!("http://{}/v1", llm_listener.local_addr()?);
    let graph_url = format!("http://{}/v21.0", graph_listener.local_addr()?);

    let mongo = std::env::var("MONGODB_URI")
        .ok()
        .filter(|uri| !uri.trim().is_empty());
    let fresh_db = match (&mongo, std::env::var("MONGODB_DATABASE")) {
        (Some(_), Err(_)) if spawn => Some(format!(
            "zaguan_load_{}_{}",
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs(),
            std::process::id()
        )),
        _ => None,
    };
    let store_name = match (&mongo, spawn) {
        (_, false) => "as configured (--target)".to_owned(),
        (None, true) => "memory".to_owned(),
        (Some(_), true) => format!(
            "mongodb (database {})",
            fresh_db
                .clone()
                .or_else(|| std::env::var("MONGODB_DATABASE").ok())
                .unwrap_or_default()
        ),
    };

    let (base, mut service) = if spawn {
        let port = free_port()?;
        let concurrency = args.concurrency.to_string();
        let prompts = concat!(env!("CARGO_MANIFEST_DIR"), "/prompts");
        let mut env: Vec<(String, String)> = [
            ("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}")),
            ("WHATSAPP_APP_SECRET", args.secret.clone()),
            ("WHATSAPP_ACCESS_TOKEN", "load-token".to_owned()),
            ("WHATSAPP_API_BASE_URL", graph_url.clone()),
            ("WHATSAPP_SEND_RATE", "10000".to_owned()),
            // Meta's per-user pair limit would pace long runs, not the service.
            ("WHATSAPP_PAIR_INTERVAL", "1ms".to_owned()),
            ("WHATSAPP_PAIR_BURST", "1000".to_owned()),
            ("OPENAI_API_KEY", "load-key".to_owned()),
            ("OPENAI_BASE_URL", llm_url.clone()),
            ("LLM_PRIMARY", "openai:gpt-test".to_owned()),
            ("LLM_FALLBACK", "openai:gpt-test".to_owned()),
            ("ZAGUAN_FAST_ROUTE", "false".to_owned()),
            // The harness's users write as fast as they are answered: abuse limits off.
            ("ZAGUAN_USER_TURNS_PER_MINUTE", "0".to_owned()),
            ("ZAGUAN_DAILY_TOKEN_BUDGET", "0".to_owned()),
            ("ZAGUAN_WORKER_CONCURRENCY", concurrency.clone()),
            ("ZAGUAN_LLM_MAX_CONCURRENCY", concurrency),
            // The fake LLM speaks HTTP/2 without TLS: the calls waiting on it share connections,
            // as they do with a provider over TLS (`--llm-http1`: one connection per call).
            (
                "LLM_HTTP2",
                if args.llm_http1 {
                    "off"
                } else {
                    "prior-knowledge"
                }
                .to_owned(),
            ),
            ("ZAGUAN_PROMPTS_DIR", prompts.to_owned()),
            ("RUST_LOG", "warn".to_owned()),
            ("NO_COLOR", "1".to_owned()),
            ("ZAGUAN_LOG_FORMAT", "text".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some(db) = &fresh_db {
            env.push(("MONGODB_DATABASE".to_owned(), db.clone()));
        }
        for extra in &args.env {
            let (k, v) = extra
                .split_once('=')
                .ok_or_else(|| format!("--env {extra}: expected KEY=VALUE"))?;
            env.push((k.to_owned(), v.to_owned()));
        }
        let path = args.zaguan.clone().unwrap_or_else(default_zaguan);
        if !path.exists() {
            return Err(format!(
                "{} not found: build it (`cargo build --release --bin zaguan`) or pass --zaguan",
                path.display()
            )
            .into());
        }
        let log = std::env::temp_dir().join(format!("turn_load-{}.log", std::process::id()));
        let service = Service::start(&path, &env, log)?;
        (format!("http://127.0.0.1:{port}"), Some(service))
    } else {
        let target = args.target.as_ref().expect("target mode");
        let base = target.to_string().trim_end_matches('/').to_owned();
        eprintln!(
            "driving {base}; it must run with:\n  WHATSAPP_APP_SECRET={} WHATSAPP_ACCESS_TOKEN=load-token \
             WHATSAPP_API_BASE_URL={graph_url} WHATSAPP_SEND_RATE=10000 WHATSAPP_PAIR_INTERVAL=1ms \
             WHATSAPP_PAIR_BURST=1000 OPENAI_API_KEY=load-key OPENAI_BASE_URL={llm_url} \
             LLM_PRIMARY=openai:gpt-test LLM_FALLBACK=openai:gpt-test ZAGUAN_FAST_ROUTE=false",
            args.secret
        );
        (base, None)
    };
    let authority: Uri = base.parse()?;
    let authority = authority
        .authority()
        .ok_or("--target must be http://host[:port]")?
        .clone();
    let addr = format!(
        "{}:{}",
        authority.host(),
        authority.port_u16().unwrap_or(80)
    );

    let epoch = Instant::now();
    let nonce = mix(epoch.elapsed().as_nanos() as u64
        ^ SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64
        ^ u64::from(std::process::id()) << 32);
    let users = (0..args.users).map(|_| Mutex::default()).collect();
    let connections = args.connections as usize;
    let shared = Arc::new(Shared {
        epoch,
        nonce,
        salt: nonce % 10_000,
        llm_latency: Duration::from_millis(args.llm_latency_ms),
        host: HeaderValue::from_str(authority.as_str())?,
        addr,
        users,
        counters: Counters::default(),
        figures: Mutex::default(),
        permits: Semaphore::new(connections),
        idle: Mutex::new(Vec::with_capacity(connections)),
        end: OnceLock::new(),
        pacer_done: AtomicBool::new(false),
        args,
    });
    let fallback = Router::new().fallback(unknown_route);
    let llm_app = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .merge(fallback.clone())
        .with_state(shared.clone());
    let graph_app = Router::new()
        .route("/v21.0/{phone_number_id}/messages", post(graph_messages))
        .merge(fallback)
        .with_state(shared.clone());
    tokio::spawn(async move { axum::serve(llm_listener, llm_app).await });
    tokio::spawn(async move { axum::serve(graph_listener, graph_app).await });

    if let Err(e) = wait_ready(&base, service.as_mut()).await {
        if let Some(service) = service {
            service.stop();
        }
        return Err(e);
    }
    let log_offset = service.as_ref().map_or(0, |s| s.log_text().len());
    let ticks = procfs::clock_ticks();
    let pid = service.as_ref().map(Service::pid).or(shared.args.pid);
    let store = shared
        .args
        .store_pid
        .map(|pid| (pid, "--store-pid".to_owned()))
        .or_else(|| {
            let port = mongo.as_deref().and_then(|uri| {
                let hosts = uri.strip_prefix("mongodb://")?.split(['/', '?']).next()?;
                hosts.rsplit('@').next()?.rsplit_once(':')?.1.parse().ok()
            });
            mongo.as_ref().and_then(|_| find_store_process(port))
        });
    let cpu = |pid: Option<u32>| pid.and_then(|pid| procfs::seconds_of_pid(pid, ticks));
    let service_before = cpu(pid);
    let store_before = cpu(store.as_ref().map(|s| s.0));
    let postgres_before = mongo
        .as_ref()
        .and_then(|_| procfs::seconds_of_named(|comm| comm == "postgres", ticks));
    let self_before = cpu(Some(std::process::id()));

    // ---- load ----
    let a = &shared.args;
    let start = Instant::now() + Duration::from_millis(20);
    let end = a.duration.map(|d| start + Duration::from_secs_f64(d));
    if let Some(end) = end {
        shared.end.set(end).expect("set once");
    }
    shared.progress();
    let planned = a.users * u64::from(a.messages);
    let released = Arc::new(AtomicU64::new(0));
    let mut pacing_end = end;
    match a.rate {
        Some(rate) => {
            let slots = match a.duration {
                Some(d) => (d * rate).ceil() as u64,
                None => planned,
            };
            pacing_end = Some(start + Duration::from_secs_f64(slots as f64 / rate));
            let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Instant)>();
            // OS sleeps are precise to tens of µs where tokio's timer has 1 ms ticks.
            std::thread::spawn(move || {
                for k in 0..slots {
                    let at = start + Duration::from_secs_f64(k as f64 / rate);
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    if tx.send((k, at)).is_err() {
                        break;
                    }
                }
            });
            let (shared, released) = (shared.clone(), released.clone());
            tokio::spawn(async move {
                let n = shared.users.len() as u64;
                while let Some((k, at)) = rx.recv().await {
                    released.fetch_add(1, Ordering::Relaxed);
                    let user = (k % n) as usize;
                    let next = {
                        let mut state = shared.users[user].lock().unwrap();
                        state.backlog.push_back(at);
                        match state.pending {
                            Some(_) => {
                                shared.counters.user_waits.fetch_add(1, Ordering::Relaxed);
                                None
                            }
                            None => shared.next_message(&mut state, Instant::now()),
                        }
                    };
                    if let Some((seq, start)) = next {
                        shared.dispatch(user, seq, start);
                    }
                }
                shared.pacer_done.store(true, Ordering::Relaxed);
            });
        }
        None => {
            sleep(start.saturating_duration_since(Instant::now())).await;
            let probe = shared.probe_user();
            let mut batch = Vec::new();
            for user in (0..shared.users.len()).filter(|u| Some(*u) != probe) {
                let next = {
                    let mut state = shared.users[user].lock().unwrap();
                    shared.next_message(&mut state, Instant::now())
                };
                if let Some((seq, start)) = next {
                    batch.push((user, seq));
                    if batch.len() as u64 >= a.batch {
                        shared.dispatch_batch(std::mem::take(&mut batch), start);
                    }
                }
            }
            if !batch.is_empty() {
                shared.dispatch_batch(batch, Instant::now());
            }
            if let (Some(user), Some(after)) = (probe, a.probe_after) {
                let shared = shared.clone();
                tokio::spawn(async move {
                    sleep(Duration::from_secs_f64(after)).await;
                    let next = {
                        let mut state = shared.users[user].lock().unwrap();
                        shared.next_message(&mut state, Instant::now())
                    };
                    if let Some((seq, start)) = next {
                        shared.dispatch(user, seq, start);
                    }
                });
            }
        }
    }
    // "Ready throughout": /readyz is watched for the whole run.
    let watcher = {
        let (shared, base) = (shared.clone(), base.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .expect("a plain HTTP client");
            loop {
                let ok = client
                    .get(format!("{base}/readyz"))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                let c = &shared.counters;
                c.ready_checks.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    c.not_ready.fetch_add(1, Ordering::Relaxed);
                    shared.sample("/readyz did not answer 200 within 2 s".to_owned());
                }
                sleep(Duration::from_millis(250)).await;
            }
        })
    };

    // ---- drain ----
    let drain = Duration::from_secs_f64(a.drain_timeout);
    let c = &shared.counters;
    let failures = || {
        [
            &c.status_4xx,
            &c.status_5xx,
            &c.status_other,
            &c.send_errors,
        ]
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .sum::<u64>()
    };
    let gave_up = loop {
        sleep(Duration::from_millis(5)).await;
        let now = Instant::now();
        let dispatched = c.dispatched.load(Ordering::Relaxed);
        let failed = failures();
        let answered = c.replies.load(Ordering::Relaxed) + failed;
        let acked = c.acks.load(Ordering::Relaxed) + failed;
        let settled = answered >= dispatched && acked >= dispatched;
        let closed = match (a.rate, end) {
            (Some(_), _) => {
                shared.pacer_done.load(Ordering::Relaxed)
                    && dispatched >= released.load(Ordering::Relaxed)
            }
            (None, Some(end)) => now >= end,
            (None, None) => dispatched >= planned,
        };
        if closed && settled {
            break false;
        }
        let last = shared.epoch + Duration::from_micros(c.last_progress.load(Ordering::Relaxed));
        let stalled = now.saturating_duration_since(last) > drain;
        let overdue = pacing_end.is_some_and(|end| now > end + drain);
        if stalled || overdue {
            break true;
        }
    };
    let finished = Instant::now();
    watcher.abort();
    let service_after = cpu(pid);
    let store_after = cpu(store.as_ref().map(|s| s.0));
    let postgres_after = mongo
        .as_ref()
        .and_then(|_| procfs::seconds_of_named(|comm| comm == "postgres", ticks));
    let self_after = cpu(Some(std::process::id()));
    let peak_rss = pid.and_then(peak_rss_mib);
    // Late duplicates show up here.
    sleep(Duration::from_millis(500)).await;
    // With MongoDB: where the database's time went, by command and collection.
    let commands = match &mongo {
        Some(_) => store_commands(&base).await,
        None => Vec::new(),
    };
    let log = service.as_ref().map(|s| s.log_text()).unwrap_or_default();
    let log_tail = log.get(log_offset..).unwrap_or_default().to_owned();
    let log_path = service.as_ref().map(|s| s.log.clone());
    if let Some(service) = service.take() {
        service.stop();
    }
    // What the run left in the database, once the service drained: nothing open, nothing
    // given up on, no conversation still held.
    let mut left = None;
    if let (Some(db), Some(uri)) = (&fresh_db, &mongo) {
        let config = zaguan::store::pool::MongoConfig {
            uri: uri.clone().into(),
            database: db.clone(),
        };
        match zaguan::store::MongoStore::connect(&config).await {
            Ok(store) => {
                left = Some(leftovers(&store).await);
                if !a.keep_db
                    && let Err(e) = store.drop_database().await
                {
                    eprintln!("could not drop the database {db}: {e}");
                }
            }
            Err(e) => eprintln!("could not read the database {db}: {e:#}"),
        }
    }
    let result = report(
        &shared,
        Outcome {
            store_name,
            gave_up,
            finished,
            planned,
            released: released.load(Ordering::Relaxed),
            service_cpu: service_before.zip(service_after).map(|(b, a)| a - b),
            store_cpu: store_before.zip(store_after).map(|(b, a)| a - b),
            postgres_cpu: postgres_before.zip(postgres_after).map(|(b, a)| a - b),
            store,
            harness_cpu: self_before.zip(self_after).map(|(b, a)| a - b),
            peak_rss,
            log_tail,
            log_path: log_path.clone(),
            left,
            commands,
        },
    );
    if let (Ok(()), Some(path)) = (&result, log_path) {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// What the run measured besides the shared counters.
struct Outcome {
    store_name: String,
    gave_up: bool,
    finished: Instant,
    planned: u64,
    released: u64,
    service_cpu: Option<f64>,
    store_cpu: Option<f64>,
    /// FerretDB's PostgreSQL backend, when one runs on this machine.
    postgres_cpu: Option<f64>,
    store: Option<(u32, String)>,
    harness_cpu: Option<f64>,
    peak_rss: Option<f64>,
    log_tail: String,
    /// The service's log file (kept when the run finds a problem).
    log_path: Option<PathBuf>,
    /// With MongoDB: what the run left once the service stopped.
    left: Option<Leftovers>,
    /// With MongoDB: the service's commands, by command and collection, most time first.
    commands: Vec<CommandTime>,
}

/// One kind of MongoDB command the service sent: how many, and their time on the database.
struct CommandTime {
    command: String,
    collection: String,
    count: u64,
    seconds: f64,
}

/// Reads `zaguan_store_command_seconds` off the service's `/metrics`.
async fn store_commands(base: &str) -> Vec<CommandTime> {
    let Ok(response) = reqwest::get(format!("{base}/metrics")).await else {
        return Vec::new();
    };
    let text = response.text().await.unwrap_or_default();
    let mut found: Vec<CommandTime> = Vec::new();
    for line in text.lines() {
        let (is_sum, rest) =
            if let Some(rest) = line.strip_prefix("zaguan_store_command_seconds_sum{") {
                (true, rest)
            } else if let Some(rest) = line.strip_prefix("zaguan_store_command_seconds_count{") {
                (false, rest)
            } else {
                continue;
            };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let (command, collection) = (label("command"), label("collection"));
        let value: f64 = value.trim().parse().unwrap_or(0.0);
        let entry = match found
            .iter_mut()
            .position(|c| c.command == command && c.collection == collection)
        {
            Some(index) => &mut found[index],
            None => {
                found.push(CommandTime {
                    command,
                    collection,
                    count: 0,
                    seconds: 0.0,
                });
                found.last_mut().expect("just pushed")
            }
        };
        if is_sum {
            entry.seconds += value;
        } else {
            entry.count += value as u64;
        }
    }
    found.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    found
}

/// Inbox messages open or given up on, and leases not given back, after the service stopped.
#[derive(Debug, Default, Clone, Copy)]
struct Leftovers {
    inbox_open: u64,
    inbox_failed: u64,
    leases_held: u64,
}

async fn leftovers(store: &zaguan::store::MongoStore) -> Leftovers {
    let db = store.database();
    let count = async |collection: &str, filter: bson::Document| {
        db.collection::<bson::Document>(collection)
            .count_documents(filter)
            .await
            .unwrap_or(u64::MAX)
    };
    Leftovers {
        inbox_open: count(
            "inbox",
            bson::doc! {"status": {"$in": ["pending", "processing"]}},
        )
        .await,
        inbox_failed: count("inbox", bson::doc! {"status": "failed"}).await,
        leases_held: count("leases", bson::doc! {"released": false}).await,
    }
}

fn report(shared: &Shared, outcome: Outcome) -> Result<(), BoxError> {
    let (a, c) = (&shared.args, &shared.counters);
    let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
    let figures = shared.figures.lock().unwrap();
    let first = figures.first_send.unwrap_or(outcome.finished);
    let secs = |until: Option<Instant>| {
        until.map_or(0.0, |t| t.saturating_duration_since(first).as_secs_f64())
    };
    let (ack_span, reply_span) = (secs(figures.last_ack), secs(figures.last_reply));
    let dispatched = load(&c.dispatched);
    let acks = load(&c.acks);
    let (s4, s5, so, errors) = (
        load(&c.status_4xx),
        load(&c.status_5xx),
        load(&c.status_other),
        load(&c.send_errors),
    );
    let failed = s4 + s5 + so + errors;
    let replies = load(&c.replies);
    let not_completed = dispatched.saturating_sub(replies + failed);
    let unsent = match (a.rate, a.duration) {
        (Some(_), _) => outcome.released.saturating_sub(dispatched),
        (None, Some(_)) => 0,
        (None, None) => outcome.planned.saturating_sub(dispatched),
    };
    let per_s = |n: u64, span: f64| if span > 0.0 { n as f64 / span } else { 0.0 };
    let (acks_per_s, turns_per_s) = (per_s(acks, ack_span), per_s(replies, reply_span));
    let ack = quantiles(figures.ack.as_ref(), &[0.5, 0.99, 0.999]);
    let e2e = quantiles(figures.e2e.as_ref(), &[0.5, 0.99, 0.999, 1.0]);
    let net = quantiles(figures.e2e_net.as_ref(), &[0.5, 0.99, 0.999, 1.0]);
    let typing = quantiles(figures.typing.as_ref(), &[0.5, 0.99, 0.999]);
    let has_typing = figures.typing.is_some();
    let typing_met = has_typing.then(|| typing[1] <= TYPING_P99_FLOOR_MS);
    let first_answer = figures.first_answer.map(|d| d.as_secs_f64());
    // No sample, no figure: null rather than a 0 ms that reads as a measurement.
    let (has_ack, has_e2e) = (figures.ack.is_some(), figures.e2e.is_some());
    let llm_calls = load(&c.llm_calls);
    let llm_per_turn = if replies > 0 {
        llm_calls as f64 / replies as f64
    } else {
        0.0
    };
    let llm_request_kib = match llm_calls {
        0 => 0.0,
        n => load(&c.llm_request_bytes) as f64 / n as f64 / 1024.0,
    };
    let cpu_per_turn_us = outcome
        .service_cpu
        .filter(|_| replies > 0)
        .map(|s| s * 1e6 / replies as f64);
    // The database's CPU: the MongoDB-compatible server, and PostgreSQL behind FerretDB.
    let database_cpu = match (outcome.store_cpu, outcome.postgres_cpu) {
        (Some(store), Some(pg)) => Some(store + pg),
        (store, pg) => store.or(pg),
    };
    let store_per_turn_us = database_cpu
        .filter(|_| replies > 0)
        .map(|s| s * 1e6 / replies as f64);
    let (ready_checks, not_ready) = (load(&c.ready_checks), load(&c.not_ready));
    let probe = figures.probe.map(|d| d.as_secs_f64());
    let warnings = outcome
        .log_tail
        .lines()
        .filter(|l| l.contains(" WARN "))
        .count();
    let log_errors = outcome
        .log_tail
        .lines()
        .filter(|l| l.contains(" ERROR "))
        .count();
    let (unexpected, wrong, strangers) =
        (load(&c.unexpected), load(&c.wrong_text), load(&c.strangers));
    let mode = match (a.rate, a.duration) {
        (Some(rate), Some(d)) => format!("open loop at {rate} msg/s for {d} s"),
        (Some(rate), None) => format!("open loop at {rate} msg/s, {} msg/user", a.messages),
        (None, Some(d)) => format!("flat out for {d} s over {} connections", a.connections),
        (None, None) => format!(
            "flat out, {} msg/user over {} connections",
            a.messages, a.connections
        ),
    };
    let opt = |v: Option<f64>, unit: &str| v.map_or("n/a".to_owned(), |v| format!("{v:.2}{unit}"));
    println!(
        "turn_load: {} users, {mode}, LLM latency {} ms, store {}\n\
         webhooks sent {dispatched}: acked {acks}, 4xx {s4}, 5xx {s5}, other {so}, errors {errors}, unsent {unsent}\n\
         acks/s      {acks_per_s:.1}   ack latency p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms\n\
         turns       {replies} completed, {not_completed} not completed{}, {turns_per_s:.1} turns/s over {reply_span:.2} s\n\
         end to end  p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms\n\
         minus LLM   p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms\n\
         typing      webhook sent → read mark and typing indicator: {}; first sender answered after {}\n\
         LLM calls   {llm_calls} ({llm_per_turn:.2}/turn, {} delegations, {} unattributed, {llm_request_kib:.1} KiB each); Graph calls {} ({} texts, {} read marks)\n\
         replies     {unexpected} with nothing pending (duplicates?), {wrong} with another text, {strangers} to unknown recipients; {} user waits\n\
         service     CPU {} ({} per turn), peak RSS {}; harness CPU {}; /readyz {not_ready} of {ready_checks} checks not ready{}\n\
         store       {}",
        a.users,
        a.llm_latency_ms,
        outcome.store_name,
        ack[0],
        ack[1],
        ack[2],
        if outcome.gave_up {
            format!(" (gave up after {} s without progress)", a.drain_timeout)
        } else {
            String::new()
        },
        e2e[0],
        e2e[1],
        e2e[2],
        e2e[3],
        net[0],
        net[1],
        net[2],
        net[3],
        if has_typing {
            format!(
                "p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms (floor: p99 ≤ {TYPING_P99_FLOOR_MS} ms, {})",
                typing[0],
                typing[1],
                typing[2],
                if typing_met == Some(true) {
                    "met"
                } else {
                    "NOT MET"
                }
            )
        } else {
            "n/a".to_owned()
        },
        opt(first_answer, " s"),
        load(&c.llm_delegations),
        load(&c.llm_unattributed),
        load(&c.graph_calls),
        load(&c.graph_texts),
        load(&c.graph_read_marks),
        load(&c.user_waits),
        opt(outcome.service_cpu, " s"),
        opt(cpu_per_turn_us, " µs"),
        opt(outcome.peak_rss, " MiB"),
        opt(outcome.harness_cpu, " s"),
        match (a.probe_after, probe) {
            (Some(after), Some(waited)) => {
                format!("; probe sent at {after} s answered after {waited:.2} s")
            }
            (Some(after), None) => format!("; probe sent at {after} s never answered"),
            (None, _) => String::new(),
        },
        match &outcome.store {
            Some((pid, name)) => format!(
                "{name} (pid {pid}) CPU {}{} ({} per turn)",
                opt(outcome.store_cpu, " s"),
                outcome
                    .postgres_cpu
                    .map_or(String::new(), |pg| format!(" + PostgreSQL {pg:.2} s")),
                opt(store_per_turn_us, " µs")
            ),
            None => "no store process measured".to_owned(),
        },
    );
    if let Some(left) = outcome.left {
        println!(
            "left        {} inbox messages open, {} failed, {} leases held, once the service stopped",
            left.inbox_open, left.inbox_failed, left.leases_held
        );
    }
    if !outcome.commands.is_empty() {
        let total: f64 = outcome.commands.iter().map(|c| c.seconds).sum();
        println!("database    time per command (as the driver saw it), most first:");
        for c in outcome.commands.iter().take(12) {
            println!(
                "            {:>5.1} %  {:>8} × {} on {} ({:.2} ms each)",
                100.0 * c.seconds / total.max(f64::MIN_POSITIVE),
                c.count,
                c.command,
                c.collection,
                1000.0 * c.seconds / c.count.max(1) as f64
            );
        }
    }
    for sample in &figures.samples {
        println!("problem     {sample}");
    }
    if warnings + log_errors > 0 {
        println!(
            "service log {warnings} warnings, {log_errors} errors during the run; first lines:"
        );
        for line in outcome
            .log_tail
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .take(5)
        {
            println!("  {}", line.chars().take(300).collect::<String>());
        }
    }

    let fields: Vec<(&str, Value)> = vec![
        ("bench", json!("turn_load")),
        ("target", json!(a.target.as_ref().map(ToString::to_string))),
        ("store", json!(outcome.store_name)),
        (
            "mode",
            json!(if a.rate.is_some() { "open" } else { "closed" }),
        ),
        ("users", json!(a.users)),
        (
            "messages_per_user",
            json!(a.duration.is_none().then_some(a.messages)),
        ),
        ("rate", json!(a.rate)),
        ("duration_s", json!(a.duration)),
        ("connections", json!(a.connections)),
        ("concurrency", json!(a.concurrency)),
        ("llm_latency_ms", json!(a.llm_latency_ms)),
        ("webhooks_sent", json!(dispatched)),
        ("acks", json!(acks)),
        ("status_4xx", json!(s4)),
        ("status_5xx", json!(s5)),
        ("status_other", json!(so)),
        ("send_errors", json!(errors)),
        ("unsent", json!(unsent)),
        ("acks_per_s", json!(round(acks_per_s, 1))),
        ("ack_p50_ms", json!(has_ack.then(|| round(ack[0], 3)))),
        ("ack_p99_ms", json!(has_ack.then(|| round(ack[1], 3)))),
        ("ack_p999_ms", json!(has_ack.then(|| round(ack[2], 3)))),
        ("turns_completed", json!(replies)),
        ("turns_not_completed", json!(not_completed)),
        ("gave_up", json!(outcome.gave_up)),
        ("turns_per_s", json!(round(turns_per_s, 1))),
        ("elapsed_s", json!(round(reply_span, 3))),
        ("e2e_p50_ms", json!(has_e2e.then(|| round(e2e[0], 2)))),
        ("e2e_p99_ms", json!(has_e2e.then(|| round(e2e[1], 2)))),
        ("e2e_p999_ms", json!(has_e2e.then(|| round(e2e[2], 2)))),
        ("e2e_max_ms", json!(has_e2e.then(|| round(e2e[3], 2)))),
        (
            "e2e_minus_llm_p50_ms",
            json!(has_e2e.then(|| round(net[0], 2))),
        ),
        (
            "e2e_minus_llm_p99_ms",
            json!(has_e2e.then(|| round(net[1], 2))),
        ),
        (
            "e2e_minus_llm_p999_ms",
            json!(has_e2e.then(|| round(net[2], 2))),
        ),
        (
            "e2e_minus_llm_max_ms",
            json!(has_e2e.then(|| round(net[3], 2))),
        ),
        (
            "typing_p50_ms",
            json!(has_typing.then(|| round(typing[0], 2))),
        ),
        (
            "typing_p99_ms",
            json!(has_typing.then(|| round(typing[1], 2))),
        ),
        ("typing_p99_floor_ms", json!(TYPING_P99_FLOOR_MS)),
        ("typing_p99_met", json!(typing_met)),
        (
            "first_sender_answer_s",
            json!(first_answer.map(|v| round(v, 3))),
        ),
        ("llm_calls", json!(llm_calls)),
        ("llm_delegations", json!(load(&c.llm_delegations))),
        ("llm_unattributed", json!(load(&c.llm_unattributed))),
        ("llm_request_kib", json!(round(llm_request_kib, 1))),
        ("graph_calls", json!(load(&c.graph_calls))),
        ("graph_texts", json!(load(&c.graph_texts))),
        ("graph_read_marks", json!(load(&c.graph_read_marks))),
        ("unexpected_replies", json!(unexpected)),
        ("wrong_replies", json!(wrong)),
        ("unknown_recipients", json!(strangers)),
        ("user_waits", json!(load(&c.user_waits))),
        (
            "service_cpu_s",
            json!(outcome.service_cpu.map(|v| round(v, 3))),
        ),
        (
            "cpu_us_per_turn",
            json!(cpu_per_turn_us.map(|v| round(v, 1))),
        ),
        ("peak_rss_mib", json!(outcome.peak_rss.map(|v| round(v, 1)))),
        ("store_process", json!(outcome.store.as_ref().map(|s| &s.1))),
        ("store_cpu_s", json!(outcome.store_cpu.map(|v| round(v, 3)))),
        (
            "postgres_cpu_s",
            json!(outcome.postgres_cpu.map(|v| round(v, 3))),
        ),
        ("batch", json!(a.batch)),
        ("pad_bytes", json!(a.pad)),
        ("probe_after_s", json!(a.probe_after)),
        ("probe_reply_s", json!(probe.map(|v| round(v, 3)))),
        ("ready_checks", json!(ready_checks)),
        ("inbox_open_left", json!(outcome.left.map(|l| l.inbox_open))),
        (
            "inbox_failed_left",
            json!(outcome.left.map(|l| l.inbox_failed)),
        ),
        (
            "leases_held_left",
            json!(outcome.left.map(|l| l.leases_held)),
        ),
        ("not_ready", json!(not_ready)),
        (
            "store_cpu_us_per_turn",
            json!(store_per_turn_us.map(|v| round(v, 1))),
        ),
        (
            "harness_cpu_s",
            json!(outcome.harness_cpu.map(|v| round(v, 3))),
        ),
        ("service_log_warnings", json!(warnings)),
        ("service_log_errors", json!(log_errors)),
    ];
    let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("{{{}}}", fields.join(","));
    let problems = failed
        + not_completed
        + unsent
        + unexpected
        + wrong
        + strangers
        + load(&c.llm_bad_requests)
        + load(&c.unknown_routes)
        + not_ready
        + u64::from(a.probe_after.is_some() && probe.is_none())
        + outcome
            .left
            .map_or(0, |l| l.inbox_open + l.inbox_failed + l.leases_held);
    if problems > 0 || replies == 0 {
        if let Some(path) = &outcome.log_path {
            println!("service log kept: {}", path.display());
        }
        return Err(format!("{problems} problem(s): see the summary above").into());
    }
    Ok(())
}

fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}
