//! The fault-injection suite: the real `zaguan serve` binary on MongoDB (FerretDB in CI), a fake
//! OpenAI-format LLM and a fake Graph API on loopback, and a TCP proxy in front of MongoDB, with
//! one fault per scenario. Each scenario sends `conversations × 5` messages and checks, from the
//! store and from what the fake Graph API delivered, that every inbound message was answered
//! exactly once and in order and that nothing was lost. Like Meta, the fake Graph API posts a
//! signed `sent` status webhook for each message it accepts, echoing its
//! `biz_opaque_callback_data`, to any live instance until one takes it.
//!
//! Every scenario prints one line `faults: {json}` with messages sent, webhooks posted, replies
//! delivered, duplicates, losses and out-of-order replies (and appends it to the file named by
//! `ZAGUAN_FAULTS_REPORT`, when set). `ZAGUAN_FAULTS_CONVERSATIONS` sets the load (default 12,
//! CI's bounded run; `scripts/faults` runs the full one).

mod common;

use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zaguan::store::{HistoryStore, OutboxStore};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bson::doc;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use common::graph::{FakeGraph, GraphFault};
use common::proxy::{Mode, MongoProxy};
use common::{free_port, zaguan};
use zaguan::domain::MessageRole;
use zaguan::domain::{WaId, WaMessageId};
use zaguan::store::OutboxStatus;

/// Messages each simulated user sends.
const MESSAGES: usize = 5;

/// The scenarios load one machine hard: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn conversations() -> usize {
    std::env::var("ZAGUAN_FAULTS_CONVERSATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

// ---------------------------------------------------------------------------------------------
// The fake LLM: OpenAI's Chat Completions, echoing the user's last message, with faults.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LlmFault {
    None,
    /// 500 with an error body.
    ServerError,
    /// Never answers (the service's timeout must fire).
    Hang,
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with no text and no tool call.
    Empty,
}

struct FakeLlm {
    /// Faults of the primary and of the fallback model.
    faults: Mutex<(LlmFault, LlmFault)>,
    /// Milliseconds each answer takes.
    latency: AtomicU64,
    calls: AtomicUsize,
}

const PRIMARY_MODEL: &str = "model-primary";
const FALLBACK_MODEL: &str = "model-fallback";

impl FakeLlm {
    fn set(&self, primary: LlmFault, fallback: LlmFault) {
        *self.faults.lock().unwrap() = (primary, fallback);
    }
}

async fn chat_completions(State(llm): State<Arc<FakeLlm>>, Json(body): Json<Value>) -> Response {
    llm.calls.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(llm.latency.load(Ordering::Relaxed))).await;
    let (primary, fallback) = *llm.faults.lock().unwrap();
    let fault = if body["model"] == FALLBACK_MODEL {
        fallback
    } else {
        primary
    };
    let last_user = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let content = match fault {
        LlmFault::None => format!("Recibido: {last_user}"),
        LlmFault::Empty => String::new(),
        LlmFault::ServerError => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": {"message": "The server had an error", "type": "server_error"}})),
            )
                .into_response();
        }
        LlmFault::Garbage => {
            return (StatusCode::OK, "<html>upstream connect error</html>").into_response();
        }
        LlmFault::Hang => {
            tokio::time::sleep(Duration::from_secs(120)).await;
            String::new()
        }
    };
    Json(json!({
        "id": "chatcmpl-fault", "object": "chat.completion", "created": 1764100800,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                     "message": {"role": "assistant", "content": content, "refusal": null}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}
    }))
    .into_response()
}

/// Posts each status webhook, concurrently, to the instances on `ports` (any of them, as
/// Meta does) until one acknowledges it; counts those posted and those no instance took.
fn post_statuses(
    mut statuses: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    ports: Arc<Mutex<Vec<u16>>>,
    counts: Arc<StatusCounts>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    tokio::spawn(async move {
        while let Some(body) = statuses.recv().await {
            let (http, ports, counts) = (http.clone(), ports.clone(), counts.clone());
            counts.pending.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let signature =
                    zaguan::webhook::signature::sign(common::APP_SECRET.as_bytes(), &body);
                let deadline = Instant::now() + Duration::from_secs(120);
                let mut target = rand::rng().random_range(0..usize::MAX);
                let taken = loop {
                    let port = {
                        let ports = ports.lock().unwrap();
                        ports[target % ports.len()]
                    };
                    let response = http
                        .post(format!("http://127.0.0.1:{port}/webhook"))
                        .header("content-type", "application/json")
                        .header("x-hub-signature-256", &signature)
                        .body(body.clone())
                        .send()
                        .await;
                    if response.is_ok_and(|r| r.status() == reqwest::StatusCode::OK) {
                        break true;
                    }
                    if Instant::now() > deadline {
                        break false;
                    }
                    target = target.wrapping_add(1);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                };
                let count = if taken { &counts.posted } else { &counts.lost };
                count.fetch_add(1, Ordering::SeqCst);
                counts.pending.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
}

#[derive(Default)]
struct StatusCounts {
    posted: AtomicUsize,
    lost: AtomicUsize,
    pending: AtomicUsize,
}

// ---------------------------------------------------------------------------------------------
// The rig: a database, the fakes, the proxy and the `zaguan serve` processes.

struct Instance {
    child: Option<Child>,
    port: u16,
    /// Extra environment (e.g. a skewed clock).
    env: Vec<(String, String)>,
}

struct Rig {
    name: &'static str,
    db: common::TestMongo,
    llm: Arc<FakeLlm>,
    graph: Arc<FakeGraph>,
    llm_url: String,
    graph_url: String,
    /// In front of MongoDB: cut (MongoDB down or restarting) or stalled (answering nothing).
    proxy: MongoProxy,
    instances: Mutex<Vec<Instance>>,
    /// The instances' ports, for the status webhooks.
    ports: Arc<Mutex<Vec<u16>>>,
    statuses: Arc<StatusCounts>,
    http: reqwest::Client,
    posted: AtomicUsize,
}

impl Rig {
    async fn new(name: &'static str, mongo_up: bool) -> Option<Self> {
        let db = common::TestMongo::new().await?;
        let llm = Arc::new(FakeLlm {
            faults: Mutex::new((LlmFault::None, LlmFault::None)),
            latency: AtomicU64::new(0),
            calls: AtomicUsize::new(0),
        });
        let llm_url = common::serve_local(
            Router::new()
                .route("/v1/chat/completions", post(chat_completions))
                .with_state(llm.clone()),
        )
        .await;
        let (status_sender, status_receiver) = tokio::sync::mpsc::unbounded_channel();
        let ports = Arc::new(Mutex::new(Vec::new()));
        let statuses = Arc::new(StatusCounts::default());
        post_statuses(status_receiver, ports.clone(), statuses.clone());
        let graph = Arc::new(FakeGraph::default());
        *graph.statuses.lock().unwrap() = Some(status_sender);
        // ZAGUAN_FAULTS_NO_CALLBACK=1 drops the callback data from the statuses: the control
        // run showing what it prevents (a part whose record died with its process is sent
        // again).
        graph.drop_callback_data.store(
            std::env::var_os("ZAGUAN_FAULTS_NO_CALLBACK").is_some(),
            Ordering::Relaxed,
        );
        let graph_url = common::graph::serve(graph.clone()).await;
        let uri = std::env::var("MONGODB_URI").unwrap();
        let proxy = MongoProxy::start(MongoProxy::host_of(&uri)).await;
        if !mongo_up {
            proxy.set(Mode::Cut);
        }
        Some(Self {
            name,
            db,
            llm,
            graph,
            llm_url,
            graph_url,
            proxy,
            instances: Mutex::new(Vec::new()),
            ports,
            statuses,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
            posted: AtomicUsize::new(0),
        })
    }

    /// Adds an instance (not started).
    fn add_instance(&self, env: &[(&str, &str)]) -> usize {
        let mut instances = self.instances.lock().unwrap();
        let port = free_port();
        self.ports.lock().unwrap().push(port);
        instances.push(Instance {
            child: None,
            port,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        });
        instances.len() - 1
    }

    fn start(&self, i: usize) {
        let mut instances = self.instances.lock().unwrap();
        let instance = &mut instances[i];
        let database = self.db.store.database().name().to_owned();
        let mut command = zaguan();
        command
            .arg("serve")
            .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{}", instance.port))
            .env(
                "MONGODB_URI",
                format!(
                    "mongodb://127.0.0.1:{}/?serverSelectionTimeoutMS=2000&connectTimeoutMS=2000",
                    self.proxy.port
                ),
            )
            .env("MONGODB_DATABASE", database)
            .env("WHATSAPP_APP_SECRET", common::APP_SECRET)
            .env("WHATSAPP_ACCESS_TOKEN", "EAAG-faults")
            .env("WHATSAPP_API_BASE_URL", format!("{}/v21.0", self.graph_url))
            .env("WHATSAPP_API_TIMEOUT", "2s")
            .env("LLM_PRIMARY", format!("openai:{PRIMARY_MODEL}"))
            .env("LLM_FALLBACK", format!("openai:{FALLBACK_MODEL}"))
            .env("OPENAI_API_KEY", "sk-faults")
            .env("OPENAI_BASE_URL", format!("{}/v1", self.llm_url))
            .env("ZAGUAN_LLM_TIMEOUT", "1s")
            .env("ZAGUAN_LLM_BREAKER_COOLDOWN", "1s")
            .env("ZAGUAN_FAST_ROUTE", "false")
            .env("ZAGUAN_USER_TURNS_PER_MINUTE", "0")
            .env("ZAGUAN_LEASE", "6s")
            .env("ZAGUAN_INSTANCE_ID", format!("{}-{i}", self.name))
            .env("ZAGUAN_DRAIN_TIMEOUT", "10s")
            .env(
                "RUST_LOG",
                std::env::var("ZAGUAN_FAULTS_RUST_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .envs(instance.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // ZAGUAN_FAULTS_LOGS=DIR keeps each instance's log (appended across restarts).
        if let Ok(dir) = std::env::var("ZAGUAN_FAULTS_LOGS") {
            let path = format!("{dir}/{}-{i}.log", self.name);
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap();
            command.stderr(log);
        }
        instance.child = Some(command.spawn().unwrap());
    }

    /// Adds an instance with `env`, starts it and waits until it serves.
    async fn launch(&self, env: &[(&str, &str)]) -> usize {
        let i = self.add_instance(env);
        self.start(i);
        self.wait_serving(i).await;
        i
    }

    fn port(&self, i: usize) -> u16 {
        self.instances.lock().unwrap()[i].port
    }

    fn kill(&self, i: usize) {
        if let Some(mut child) = self.instances.lock().unwrap()[i].child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// SIGTERM to every instance; each must drain and exit cleanly.
    fn stop_all(&self) {
        let mut instances = self.instances.lock().unwrap();
        for instance in instances.iter_mut() {
            if let Some(mut child) = instance.child.take() {
                std::process::Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status()
                    .unwrap();
                let exit = child.wait().unwrap();
                assert!(
                    exit.success(),
                    "{}: instance exits cleanly: {exit:?}",
                    self.name
                );
            }
        }
    }

    async fn get(&self, i: usize, path: &str) -> Option<StatusCode> {
        let url = format!("http://127.0.0.1:{}{path}", self.port(i));
        let response = self.http.get(url).send().await.ok()?;
        Some(StatusCode::from_u16(response.status().as_u16()).unwrap())
    }

    /// Waits until instance `i` answers `/healthz`.
    async fn wait_serving(&self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.get(i, "/healthz").await != Some(StatusCode::OK) {
            assert!(
                Instant::now() < deadline,
                "{}: instance {i} not serving",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One signed POST of `body` to instance `i`: its status, `None` when unreachable.
    async fn post(&self, i: usize, body: &[u8]) -> Option<StatusCode> {
        let signature = zaguan::webhook::signature::sign(common::APP_SECRET.as_bytes(), body);
        let response = self
            .http
            .post(format!("http://127.0.0.1:{}/webhook", self.port(i)))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(body.to_vec())
            .send()
            .await
            .ok()?;
        self.posted.fetch_add(1, Ordering::Relaxed);
        Some(StatusCode::from_u16(response.status().as_u16()).unwrap())
    }

    /// Posts until an instance acknowledges with 200, as Meta retries: another instance or
    /// the same one a moment later.
    async fn deliver(&self, body: &[u8], rng: &mut rand::rngs::StdRng) {
        let count = self.instances.lock().unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut target = rng.random_range(0..count);
        loop {
            match self.post(target, body).await {
                Some(StatusCode::OK) => return,
                Some(status) if status.is_client_error() => {
                    panic!("{}: webhook refused with {status}", self.name)
                }
                _ => {}
            }
            assert!(
                Instant::now() < deadline,
                "{}: no instance took a webhook in 120 s",
                self.name
            );
            target = (target + 1) % count;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until nothing is open in the inbox, nothing waits in the outbox and every status
    /// webhook is posted.
    async fn wait_drained(&self) {
        let db = self.db.store.database();
        let inbox = db.collection::<bson::Document>("inbox");
        let outbox = db.collection::<bson::Document>("outbox");
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut quiet = 0;
        while quiet < 3 {
            let open = inbox
                .count_documents(doc! {"status": {"$in": ["pending", "processing"]}})
                .await
                .unwrap();
            let waiting = outbox
                .count_documents(doc! {"status": {"$in": ["queued", "sending"]}})
                .await
                .unwrap();
            let statuses = self.statuses.pending.load(Ordering::SeqCst);
            quiet = if open == 0 && waiting == 0 && statuses == 0 {
                quiet + 1
            } else {
                0
            };
            assert!(
                Instant::now() < deadline,
                "{}: not drained in 600 s ({open} open, {waiting} unsent)",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

fn phone(c: usize) -> String {
    format!("3465{c:07}")
}

fn text(c: usize, m: usize) -> String {
    format!("Hola, soy el cliente {c} y te escribo el mensaje número {m}")
}

fn wamid(name: &str, c: usize, m: usize) -> String {
    format!("wamid.{name}.{c}.{m}")
}

fn notification(name: &str, c: usize, m: usize) -> Vec<u8> {
    common::text_notification(&[(&wamid(name, c, m), &phone(c), &text(c, m))])
}

/// Sends every message once, in rounds: round `m` sends message `m` of every conversation,
/// in a random order of conversations, each to a random instance, spread over at least
/// `span` so that the load meets every phase of the scenario's faults.
async fn send_all(rig: &Rig, seed: u64, span: Duration) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let gap = span / u32::try_from(conversations() * MESSAGES).unwrap();
    for m in 0..MESSAGES {
        let mut order: Vec<usize> = (0..conversations()).collect();
        order.shuffle(&mut rng);
        for c in order {
            let sent = Instant::now();
            rig.deliver(&notification(rig.name, c, m), &mut rng).await;
            tokio::time::sleep(gap.saturating_sub(sent.elapsed())).await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tally: what the user saw, checked against what they sent.

#[derive(Debug, Default, serde::Serialize)]
struct Tally {
    scenario: String,
    messages_sent: usize,
    webhooks_posted: usize,
    replies_delivered: usize,
    /// Replies that are not the model's echo: the offline reply of a turn whose models failed.
    offline_replies: usize,
    duplicates: usize,
    losses: usize,
    out_of_order: usize,
    /// Messages of the recipient the Graph API refuses: their replies must fail once each,
    /// not be retried forever.
    refused_failed_once: usize,
    llm_calls: usize,
    graph_requests: usize,
    /// `sent` status webhooks the fake Graph API posted, and those no instance took in 120 s.
    statuses_posted: usize,
    statuses_lost: usize,
    seconds: f64,
}

async fn tally(rig: &Rig, started: Instant) -> Tally {
    let store = &rig.db.store;
    let refused = rig.graph.refused.lock().unwrap().clone();
    let delivered = rig.graph.delivered();
    let mut tally = Tally {
        scenario: rig.name.to_owned(),
        messages_sent: conversations() * MESSAGES,
        webhooks_posted: rig.posted.load(Ordering::Relaxed),
        llm_calls: rig.llm.calls.load(Ordering::Relaxed),
        graph_requests: rig.graph.requests(),
        statuses_posted: rig.statuses.posted.load(Ordering::SeqCst),
        statuses_lost: rig.statuses.lost.load(Ordering::SeqCst),
        ..Tally::default()
    };
    let mut by_wamid: HashMap<String, (usize, WaMessageId)> = HashMap::new();
    for c in 0..conversations() {
        let wa_id = WaId::parse(&phone(c)).unwrap();
        let is_refused = refused.as_deref() == Some(phone(c).as_str());
        let sent: Vec<String> = (0..MESSAGES).map(|m| text(c, m)).collect();
        let history = store.recent_messages(&wa_id, 10_000).await.unwrap();
        let humans: Vec<_> = history
            .iter()
            .filter(|m| m.message.role == MessageRole::Human)
            .collect();
        // Stored once each, in order.
        let said: Vec<&str> = humans
            .iter()
            .flat_map(|m| m.message.content.split('\n'))
            .collect();
        for text in &sent {
            match said.iter().filter(|s| **s == text).count() {
                0 => tally.losses += 1,
                1 => {}
                n => tally.duplicates += n - 1,
            }
        }
        let positions: Vec<usize> = said
            .iter()
            .filter_map(|s| sent.iter().position(|t| t == s))
            .collect();
        tally.out_of_order += positions.windows(2).filter(|w| w[0] >= w[1]).count();
        // One reply per turn, to the turn's last message; delivered once.
        for (turn, human) in humans.iter().enumerate() {
            let texts = human.message.content.split('\n').count();
            let (last, earlier) = human.message.wamids.split_last().unwrap();
            for id in earlier {
                tally.duplicates += store.outbox_in_reply_to(id).await.unwrap().len();
            }
            let parts = store.outbox_in_reply_to(last).await.unwrap();
            let firsts = parts.iter().filter(|p| p.part == 0).count();
            if firsts > 1 {
                tally.duplicates += firsts - 1;
            }
            if is_refused {
                if firsts == 1 && parts.iter().all(|p| p.status == OutboxStatus::Failed) {
                    tally.refused_failed_once += texts;
                } else {
                    tally.losses += texts;
                }
                continue;
            }
            let sent_parts: Vec<_> = parts.iter().filter(|p| p.wamid.is_some()).collect();
            if firsts == 0 || sent_parts.len() < parts.len() {
                tally.losses += texts;
            }
            for part in sent_parts {
                by_wamid.insert(
                    part.wamid.as_ref().unwrap().as_str().to_owned(),
                    (turn, last.clone()),
                );
            }
        }
    }
    // What the users received: each delivery is a part the outbox knows (else it was sent
    // twice), and each user's deliveries answer their turns in order.
    let mut last_turn: HashMap<&str, usize> = HashMap::new();
    for delivery in &delivered {
        match by_wamid.get(&delivery.wamid) {
            // Not the wamid its part recorded: the part was sent twice.
            None => tally.duplicates += 1,
            Some((turn, _)) => {
                tally.replies_delivered += 1;
                if !delivery.body.starts_with("Recibido: ") {
                    tally.offline_replies += 1;
                }
                if let Some(previous) = last_turn.insert(&delivery.to, *turn)
                    && previous > *turn
                {
                    tally.out_of_order += 1;
                }
            }
        }
        assert!(
            !delivery.body.is_empty(),
            "{}: an empty reply was delivered",
            rig.name
        );
    }
    tally.seconds = started.elapsed().as_secs_f64();
    tally
}

/// Prints and records the tally, then asserts nothing was doubled, lost or reordered.
fn report(tally: &Tally) {
    let line = serde_json::to_string(tally).unwrap();
    eprintln!("faults: {line}");
    if let Ok(path) = std::env::var("ZAGUAN_FAULTS_REPORT") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
    assert_eq!(tally.duplicates, 0, "{line}");
    assert_eq!(tally.losses, 0, "{line}");
    assert_eq!(tally.out_of_order, 0, "{line}");
    assert_eq!(tally.statuses_lost, 0, "{line}");
}

/// Runs a scenario's end: waits for the drain, stops the instances, checks and reports.
async fn finish(rig: Arc<Rig>, started: Instant) -> Tally {
    let rig = Arc::into_inner(rig).expect("the scenario's tasks are done with the rig");
    rig.wait_drained().await;
    rig.stop_all();
    let tally = tally(&rig, started).await;
    // ZAGUAN_FAULTS_KEEP_DB=1 keeps the scenario's database to look into.
    if std::env::var_os("ZAGUAN_FAULTS_KEEP_DB").is_none() {
        rig.db.drop().await;
    } else {
        eprintln!(
            "{}: database {} kept",
            rig.name,
            rig.db.store.database().name()
        );
    }
    report(&tally);
    tally
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

/// Meta redelivers every webhook 1–5 times: some copies at once, some after a delay, to any
/// of two instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redelivered_webhooks_are_answered_once() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("redelivery", true).await else {
        return;
    };
    let rig = Arc::new(rig);
    for _ in 0..2 {
        rig.launch(&[]).await;
    }
    let started = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut copies = Vec::new();
    for m in 0..MESSAGES {
        let mut order: Vec<usize> = (0..conversations()).collect();
        order.shuffle(&mut rng);
        for c in order {
            let body = notification(rig.name, c, m);
            rig.deliver(&body, &mut rng).await;
            for _ in 0..rng.random_range(0..5) {
                let (rig, body) = (rig.clone(), body.clone());
                let delay =
                    Duration::from_millis(rng.random_range(0..3000) * rng.random_range(0..2));
                let seed = rng.random();
                copies.push(tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                    rig.deliver(&body, &mut rng).await;
                }));
            }
        }
    }
    for copy in copies {
        copy.await.unwrap();
    }
    let tally = finish(rig, started).await;
    assert!(
        tally.webhooks_posted > tally.messages_sent,
        "copies were posted"
    );
}

/// The LLMs fail in every way, one after the other and both at once, then recover. A turn
/// whose models all fail gets the offline reply: still exactly one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_failures_still_answer_each_message_once() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("llm_faults", true).await else {
        return;
    };
    let rig = Arc::new(rig);
    rig.launch(&[]).await;
    let started = Instant::now();
    let phases = [
        (LlmFault::ServerError, LlmFault::None),
        (LlmFault::Hang, LlmFault::None),
        (LlmFault::Garbage, LlmFault::None),
        (LlmFault::Empty, LlmFault::None),
        (LlmFault::ServerError, LlmFault::ServerError),
        (LlmFault::Hang, LlmFault::Garbage),
        (LlmFault::Empty, LlmFault::Hang),
        (LlmFault::None, LlmFault::None),
    ];
    let faults = {
        let rig = rig.clone();
        tokio::spawn(async move {
            for (primary, fallback) in phases {
                rig.llm.set(primary, fallback);
                tokio::time::sleep(Duration::from_millis(1500)).await;
            }
        })
    };
    send_all(&rig, 2, Duration::from_secs(12)).await;
    faults.await.unwrap();
    finish(rig, started).await;
}

/// The Graph API rate-limits with Retry-After, fails with 500s, hangs past the timeout, and
/// refuses one recipient for good: everyone else gets each reply once, in order; the refused
/// recipient's replies fail once each, without a retry storm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_failures_deliver_each_reply_once() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("graph_faults", true).await else {
        return;
    };
    let rig = Arc::new(rig);
    *rig.graph.refused.lock().unwrap() = Some(phone(0));
    rig.launch(&[]).await;
    let started = Instant::now();
    let faults = {
        let rig = rig.clone();
        tokio::spawn(async move {
            for fault in [
                GraphFault::RateLimited,
                GraphFault::ServerError,
                GraphFault::Hang,
                GraphFault::None,
            ] {
                *rig.graph.fault.lock().unwrap() = fault;
                tokio::time::sleep(Duration::from_millis(2000)).await;
            }
        })
    };
    send_all(&rig, 3, Duration::from_secs(8)).await;
    faults.await.unwrap();
    let tally = finish(rig, started).await;
    // Counted per message: a turn that merged several counts them all.
    assert_eq!(tally.refused_failed_once, MESSAGES);
}

/// MongoDB is unreachable when the service starts: it runs, `/readyz` and `POST /webhook`
/// answer 503 (Meta retries); once MongoDB is back, everything is answered. Then MongoDB
/// "restarts" twice under load (every connection cut, refused for two seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_down_at_start_and_restarted_under_load_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("mongodb_down", false).await else {
        return;
    };
    let rig = Arc::new(rig);
    let i = rig.launch(&[]).await;
    assert_eq!(
        rig.get(i, "/readyz").await,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    let body = notification(rig.name, 0, 0);
    assert_eq!(
        rig.post(i, &body).await,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(
        rig.db
            .store
            .database()
            .collection::<bson::Document>("inbox")
            .count_documents(doc! {})
            .await
            .unwrap(),
        0,
        "nothing stored from a refused webhook"
    );
    rig.proxy.set(Mode::Pass);
    let deadline = Instant::now() + Duration::from_secs(60);
    while rig.get(i, "/readyz").await != Some(StatusCode::OK) {
        assert!(
            Instant::now() < deadline,
            "not ready after MongoDB came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = Instant::now();
    let restarts = {
        let rig = rig.clone();
        tokio::spawn(async move {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(2500)).await;
                rig.proxy.set(Mode::Cut);
                tokio::time::sleep(Duration::from_secs(2)).await;
                rig.proxy.set(Mode::Pass);
            }
        })
    };
    send_all(&rig, 4, Duration::from_secs(9)).await;
    restarts.await.unwrap();
    finish(rig, started).await;
}

/// One of two instances is SIGKILLed at random moments under load, 20 times or more, and
/// restarted each time; its conversations are taken over when their leases expire. A kill
/// between the Graph API accepting a reply and its record leaves the part `sending`: its
/// status webhook, naming it by its callback data, records it sent, and it is not sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_sigkills_under_load_lose_nothing_and_double_nothing() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("sigkill", true).await else {
        return;
    };
    // Turns long enough for kills to land inside them, and sends long enough for kills to
    // land between the Graph API accepting a reply and the process learning its wamid.
    rig.llm.latency.store(300, Ordering::Relaxed);
    *rig.graph.delay.lock().unwrap() = Duration::from_millis(300);
    let rig = Arc::new(rig);
    for _ in 0..2 {
        rig.launch(&[]).await;
    }
    let started = Instant::now();
    let sending = Arc::new(AtomicBool::new(true));
    let killer = {
        let (rig, sending) = (rig.clone(), sending.clone());
        tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(5);
            let mut kills = 0;
            while kills < 20 || sending.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(rng.random_range(200..1200))).await;
                rig.kill(0);
                kills += 1;
                rig.start(0);
                rig.wait_serving(0).await;
            }
            kills
        })
    };
    send_all(&rig, 5, Duration::from_secs(20)).await;
    sending.store(false, Ordering::SeqCst);
    let kills = killer.await.unwrap();
    assert!(kills >= 20, "{kills} kills");
    eprintln!("sigkill: {kills} kills");
    finish(rig, started).await;
}

/// MongoDB answers nothing for 30 s in the middle of the load (connections open, bytes held:
/// a replica-set election, a stalled disk), then recovers. Webhooks meanwhile answer 503 and
/// are posted again; turns wait. Nothing is lost or doubled, and replies flow again within
/// 10 s of the recovery — the client was not left wedged by the calls that gave up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_stalled_for_30_seconds_mid_load_recovers_in_seconds_losing_nothing() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("stall", true).await else {
        return;
    };
    // Turns in flight when the stall begins.
    rig.llm.latency.store(200, Ordering::Relaxed);
    let rig = Arc::new(rig);
    for _ in 0..2 {
        rig.launch(&[]).await;
    }
    let started = Instant::now();
    let stall = {
        let rig = rig.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            rig.proxy.set(Mode::Stall);
            let delivered = rig.graph.delivered.lock().unwrap().len();
            tokio::time::sleep(Duration::from_secs(30)).await;
            rig.proxy.set(Mode::Pass);
            let recovered = Instant::now();
            // Replies owed from before the stall (and messages retried during it) flow again.
            let deadline = recovered + Duration::from_secs(60);
            loop {
                let first_after = rig
                    .graph
                    .delivered
                    .lock()
                    .unwrap()
                    .iter()
                    .skip(delivered)
                    .map(|d| d.at)
                    .find(|at| *at >= recovered);
                if let Some(at) = first_after {
                    break at - recovered;
                }
                assert!(
                    Instant::now() < deadline,
                    "nothing delivered after the stall"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    send_all(&rig, 6, Duration::from_secs(12)).await;
    let resumed_after = stall.await.unwrap();
    eprintln!("stall: replies flowed again {resumed_after:?} after MongoDB recovered");
    assert!(
        resumed_after <= Duration::from_secs(10),
        "replies resumed {resumed_after:?} after the database recovered"
    );
    finish(rig, started).await;
}

/// A turn is waiting on the model when its instance is SIGKILLed; the same instance is
/// restarted at once (same ZAGUAN_INSTANCE_ID, as a container restart keeps the host name).
/// It takes its conversations back without waiting out its previous leases: the customer
/// gets one reply within 5 s of the new process being ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_instance_answers_the_turn_it_was_killed_in_within_seconds() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("restart", true).await else {
        return;
    };
    rig.llm.latency.store(3_000, Ordering::Relaxed);
    let i = rig.launch(&[("ZAGUAN_LEASE", "30s")]).await;
    let body = notification(rig.name, 0, 0);
    assert_eq!(rig.post(i, &body).await, Some(StatusCode::OK));
    let deadline = Instant::now() + Duration::from_secs(20);
    while rig.llm.calls.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig.kill(i);
    rig.llm.latency.store(0, Ordering::Relaxed);
    rig.start(i);
    let deadline = Instant::now() + Duration::from_secs(30);
    while rig.get(i, "/readyz").await != Some(StatusCode::OK) {
        assert!(
            Instant::now() < deadline,
            "the restarted instance never got ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready = Instant::now();
    let deadline = ready + Duration::from_secs(40);
    let answered = loop {
        if let Some(at) = rig.graph.delivered.lock().unwrap().first().map(|d| d.at) {
            break at.saturating_duration_since(ready);
        }
        assert!(Instant::now() < deadline, "no reply after the restart");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("restart: the reply went out {answered:?} after the new process was ready");
    assert!(
        answered <= Duration::from_secs(5),
        "the reply went out {answered:?} after the restarted process was ready"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rig.graph.delivered.lock().unwrap().len(), 1, "one reply");
    rig.stop_all();
    rig.db.drop().await;
}

/// An instance dies mid-turn and never comes back: another takes its conversation over soon
/// after its heartbeat stops (ZAGUAN_LEASE, 10 s by default), not a lease's length after its
/// last renewal: the reply is out within 15 s of the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_takes_over_a_dead_ones_turn_within_fifteen_seconds() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("takeover", true).await else {
        return;
    };
    rig.llm.latency.store(3_000, Ordering::Relaxed);
    let lease = [("ZAGUAN_LEASE", "10s")];
    let doomed = rig.launch(&lease).await;
    let survivor = rig.launch(&lease).await;
    let body = notification(rig.name, 0, 0);
    assert_eq!(rig.post(doomed, &body).await, Some(StatusCode::OK));
    let deadline = Instant::now() + Duration::from_secs(20);
    while rig.llm.calls.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig.kill(doomed);
    let killed = Instant::now();
    rig.llm.latency.store(0, Ordering::Relaxed);
    let deadline = killed + Duration::from_secs(60);
    let answered = loop {
        if let Some(at) = rig.graph.delivered.lock().unwrap().first().map(|d| d.at) {
            break at.saturating_duration_since(killed);
        }
        assert!(
            Instant::now() < deadline,
            "no instance took the conversation over"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("takeover: the reply went out {answered:?} after the kill");
    assert!(
        answered <= Duration::from_secs(15),
        "taken over {answered:?} after the kill"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rig.graph.delivered.lock().unwrap().len(), 1, "one reply");
    assert_eq!(rig.get(survivor, "/readyz").await, Some(StatusCode::OK));
    rig.stop_all();
    rig.db.drop().await;
}

/// The libfaketime preload library, when installed (Debian's `libfaketime`).
fn faketime() -> Option<&'static str> {
    const PATH: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
    std::path::Path::new(PATH).exists().then_some(PATH)
}

/// Two instances whose wall clocks differ by 1.5 s, within the lease's margin: an instance
/// stops working a conversation when its last confirmed renewal is older than 5/6 of the lease,
/// so a peer whose clock is ahead by less than lease/6 (2 s of a 12 s lease) never overlaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_skew_within_the_lease_margin_doubles_nothing() {
    let _serial = SERIAL.lock().await;
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let Some(preload) = faketime() else {
        assert!(
            !ci,
            "CI=true but libfaketime is missing (scripts/test installs it)"
        );
        eprintln!("libfaketime missing: skipping the clock-skew scenario");
        return;
    };
    let Some(rig) = Rig::new("clock_skew", true).await else {
        return;
    };
    // Turns that outlast a renewal period, so leases are renewed while the peer looks.
    rig.llm.latency.store(1500, Ordering::Relaxed);
    let rig = Arc::new(rig);
    for env in [
        vec![("ZAGUAN_LLM_TIMEOUT", "5s"), ("ZAGUAN_LEASE", "12s")],
        vec![
            ("ZAGUAN_LLM_TIMEOUT", "5s"),
            ("ZAGUAN_LEASE", "12s"),
            ("LD_PRELOAD", preload),
            ("FAKETIME", "+1.5"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("FAKETIME_DONT_RESET", "1"),
        ],
    ] {
        rig.launch(&env).await;
    }
    let started = Instant::now();
    send_all(&rig, 6, Duration::from_secs(10)).await;
    finish(rig, started).await;
}

/// Both models answer 500 while a customer is mid-conversation: the offline engine serves
/// them from the agency's data (a search with its list), and once the breaker closes the
/// model answers again. Each message is answered once; nothing is lost or sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_models_down_a_customer_is_served_offline_then_by_the_model_again() {
    let _serial = SERIAL.lock().await;
    let Some(rig) = Rig::new("offline_spell", true).await else {
        return;
    };
    let realestate = zaguan::realestate::MongoRealEstate::new(rig.db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    common::seeded_demo(&realestate).await;
    rig.launch(&[]).await;
    let customer = "34650000777";
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let said = [
        "Hola, buenas tardes",
        "busco piso de 2 habitaciones en Valencia para alquilar",
        "gracias",
    ];
    let wamids: Vec<String> = (0..said.len())
        .map(|m| format!("wamid.offline_spell.{m}"))
        .collect();
    let bodies_to = |rig: &Rig| -> Vec<String> {
        rig.graph
            .received()
            .into_iter()
            .filter(|r| r.body["to"] == json!(customer) && r.body["type"] != Value::Null)
            .map(|r| r.body.to_string())
            .collect()
    };
    let wait_for = |needle: &'static str| {
        let rig = &rig;
        async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !bodies_to(rig).iter().any(|b| b.contains(needle)) {
                assert!(
                    Instant::now() < deadline,
                    "no reply with «{needle}»: {:#?}",
                    bodies_to(rig)
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    // The model answers.
    let notification = |m: usize| common::text_notification(&[(&wamids[m], customer, said[m])]);
    rig.deliver(&notification(0), &mut rng).await;
    wait_for("Recibido: Hola, buenas tardes").await;
    // Both models fail: the search is served from the data, with its list to tap.
    rig.llm.set(LlmFault::ServerError, LlmFault::ServerError);
    rig.deliver(&notification(1), &mut rng).await;
    wait_for("modo limitado").await;
    wait_for("ask:property_assistant:P-").await;
    // The models are back; past the breaker's cooldown (1 s), the model answers again.
    rig.llm.set(LlmFault::None, LlmFault::None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    rig.deliver(&notification(2), &mut rng).await;
    wait_for("Recibido: gracias").await;
    rig.wait_drained().await;
    rig.stop_all();
    // Each message answered once, every part sent once.
    let store = &rig.db.store;
    let delivered = rig.graph.delivered();
    let mut replies = 0;
    for wamid in &wamids {
        let id = WaMessageId::parse(wamid).unwrap();
        let parts = store.outbox_in_reply_to(&id).await.unwrap();
        assert_eq!(
            parts.iter().filter(|p| p.part == 0).count(),
            1,
            "{wamid}: {parts:?}"
        );
        replies += parts.len();
        for part in &parts {
            let sent = part.wamid.as_ref().expect("every part was sent");
            assert_eq!(
                delivered
                    .iter()
                    .filter(|d| d.wamid == sent.as_str())
                    .count(),
                1,
                "{wamid}: part {} delivered once",
                part.part
            );
        }
    }
    assert_eq!(
        delivered.iter().filter(|d| d.to == customer).count(),
        replies,
        "nothing but the replies was delivered"
    );
    rig.db.drop().await;
}
