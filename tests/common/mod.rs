//! Test helpers shared by the integration tests: a fresh MongoDB database per test, the app
//! behind its real router, signed webhook requests.
#![allow(
    dead_code,
    reason = "each test crate uses a different part of the helpers"
)]

pub mod crash;
pub mod graph;
pub mod provider;
pub mod proxy;
pub mod rule_model;
pub mod service;
pub mod spec;
pub mod traffic;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use secrecy::SecretString;
use tower::ServiceExt;
use zaguan::app::{AppState, router};
use zaguan::store::pool::MongoConfig;
use zaguan::store::{MemoryStore, MongoStore, Store};
use zaguan::webhook::signature;

pub const APP_SECRET: &str = "test-app-secret";
pub const VERIFY_TOKEN: &str = "test-verify-token";
pub const ADMIN_TOKEN: &str = "admin-test-token";

/// `Bearer` + [`ADMIN_TOKEN`].
pub fn bearer() -> String {
    format!("Bearer {ADMIN_TOKEN}")
}

/// Signs in through the form: the session cookie (`name=value`), or the refusal's status.
pub async fn console_sign_in(
    app: &TestApp,
    name: &str,
    password: &str,
) -> Result<String, axum::http::StatusCode> {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("operator", name)
        .append_pair("password", password)
        .finish();
    let response = tower::ServiceExt::oneshot(
        app.router.clone(),
        axum::http::Request::post("/console/sign-in")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(axum::body::Body::from(body))
            .unwrap(),
    )
    .await
    .unwrap();
    if response.status() != axum::http::StatusCode::SEE_OTHER {
        return Err(response.status());
    }
    let cookie = response.headers()["set-cookie"].to_str().unwrap();
    Ok(cookie.split(';').next().unwrap().to_owned())
}

/// The `Authorization` header of `name`'s API token, added to `app`'s team as an operator on
/// first use: what a test's `"operator"` acts as, since the API records the token's owner.
pub async fn operator_token(app: &TestApp, name: &str) -> String {
    use zaguan::admin::team::OperatorRole;
    let team = app.state.team();
    if team.store().operator(name).await.unwrap().is_some() {
        // A fresh token for a known name (the old one is not kept in clear anywhere).
        let issued = team.reset(name, "test", chrono::Utc::now()).await.unwrap();
        return format!("Bearer {}", issued.token);
    }
    app.operator(name, OperatorRole::Operator).await.1
}

/// A database of its own on the MongoDB of `MONGODB_URI`, dropped by [`TestMongo::drop`].
pub struct TestMongo {
    pub store: MongoStore,
}

impl TestMongo {
    /// `None` (with a message) when no MongoDB is configured outside CI; under `CI=true` a
    /// missing or silent MongoDB fails the test instead of skipping it.
    pub async fn new() -> Option<Self> {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        let Some(uri) = std::env::var("MONGODB_URI").ok().filter(|u| !u.is_empty()) else {
            assert!(
                !ci,
                "CI=true but MONGODB_URI is unset: the Mongo tests cannot run"
            );
            eprintln!("MONGODB_URI unset: skipping this MongoDB test (run ./scripts/test)");
            return None;
        };
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let database = format!(
            "zaguan_test_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let store = MongoStore::connect(&MongoConfig {
            uri: SecretString::from(uri),
            database,
        })
        .await
        .expect("MONGODB_URI parses");
        store
            .ensure_indexes()
            .await
            .expect("MongoDB at MONGODB_URI answers");
        Some(Self { store })
    }

    /// A second store on this database, through a [`proxy::MongoProxy`] in front of
    /// `MONGODB_URI`'s server, for a test to make the database unkind.
    pub async fn behind_proxy(&self) -> (proxy::MongoProxy, Arc<MongoStore>) {
        let uri = std::env::var("MONGODB_URI").expect("a TestMongo has a MONGODB_URI");
        let proxy = proxy::MongoProxy::start(proxy::MongoProxy::host_of(&uri)).await;
        let store = MongoStore::connect(&MongoConfig {
            uri: SecretString::from(proxy.uri("")),
            database: self.store.database().name().to_owned(),
        })
        .await
        .expect("the proxy's URI parses");
        (proxy, Arc::new(store))
    }

    pub async fn drop(self) {
        self.store
            .drop_database()
            .await
            .expect("test database dropped");
    }
}

/// Where a test suite runs: the embedded stores, or MongoDB (FerretDB in CI).
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Memory,
    Mongo,
}

/// The conversation store and the business data of one test, on one backend; for MongoDB a
/// database of its own, dropped by [`Stores::close`].
pub struct Stores {
    pub store: Arc<dyn Store>,
    pub realestate: Arc<dyn zaguan::realestate::RealEstateStore>,
    /// The team's operators and console sessions.
    pub team: Arc<dyn zaguan::admin::team::TeamStore>,
    mongo: Option<TestMongo>,
}

impl Stores {
    /// `None` when MongoDB is asked for and none is configured outside CI (under `CI=true`
    /// that fails instead, see [`TestMongo::new`]).
    pub async fn open(backend: Backend) -> Option<Self> {
        match backend {
            Backend::Memory => Some(Self {
                store: Arc::new(MemoryStore::new()),
                realestate: Arc::new(zaguan::realestate::MemoryRealEstate::new()),
                team: Arc::new(zaguan::admin::team::MemoryTeam::default()),
                mongo: None,
            }),
            Backend::Mongo => {
                let db = TestMongo::new().await?;
                let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
                realestate.ensure_indexes().await.unwrap();
                let team = zaguan::admin::team::MongoTeam::new(db.store.pool().clone());
                team.ensure_indexes().await.unwrap();
                Some(Self {
                    store: Arc::new(db.store.clone()),
                    realestate: Arc::new(realestate),
                    team: Arc::new(team),
                    mongo: Some(db),
                })
            }
        }
    }

    /// The conversation store as a fresh run finds it: a new one in memory, every collection
    /// emptied on MongoDB (its indexes stay).
    pub async fn fresh(&self) -> Arc<dyn Store> {
        let Some(db) = &self.mongo else {
            return Arc::new(MemoryStore::new());
        };
        let database = db.store.database();
        for name in database.list_collection_names().await.unwrap() {
            database
                .collection::<bson::Document>(&name)
                .delete_many(bson::doc! {})
                .await
                .unwrap();
        }
        self.store.clone()
    }

    /// The MongoDB database's name (for the binary's `MONGODB_DATABASE`); `None` in memory.
    pub fn database_name(&self) -> Option<String> {
        self.mongo
            .as_ref()
            .map(|db| db.store.database().name().to_owned())
    }

    pub async fn close(self) {
        if let Some(db) = self.mongo {
            db.drop().await;
        }
    }
}

/// Runs each named `async fn` once over the embedded stores (`mod memory`) and once over
/// MongoDB (`mod mongo`): the one suite that shows a behaviour on both.
///
/// - `both_stores!(a, b)`: each gets the conversation store, `Arc<dyn Store>`;
/// - `both_stores!(|s| (ARGS…) => a, b)`: each gets ARGS built from [`Stores`] `s`;
/// - `multi_thread` first: on a multi-threaded runtime (races).
#[macro_export]
macro_rules! both_stores {
    (multi_thread |$s:ident| $args:tt => $($name:ident),* $(,)?) => {
        $crate::both_stores!(@suite [tokio::test(flavor = "multi_thread", worker_threads = 4)]
            |$s| $args => $($name),*);
    };
    (|$s:ident| $args:tt => $($name:ident),* $(,)?) => {
        $crate::both_stores!(@suite [tokio::test] |$s| $args => $($name),*);
    };
    (@suite $test:tt |$s:ident| $args:tt => $($name:ident),*) => {
        mod memory {
            $(
                #$test
                async fn $name() {
                    let $s = $crate::common::Stores::open($crate::common::Backend::Memory)
                        .await
                        .unwrap();
                    super::$name $args .await;
                    $s.close().await;
                }
            )*
        }
        mod mongo {
            $(
                #$test
                async fn $name() {
                    let Some($s) =
                        $crate::common::Stores::open($crate::common::Backend::Mongo).await
                    else {
                        return;
                    };
                    super::$name $args .await;
                    $s.close().await;
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        $crate::both_stores!(|s| (s.store.clone()) => $($name),*);
    };
}

/// A MongoStore pointed at a port where nothing listens.
pub async fn unreachable_mongo() -> MongoStore {
    MongoStore::connect(&MongoConfig {
        uri: SecretString::from(
            "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300&connectTimeoutMS=300".to_owned(),
        ),
        database: "unreachable".to_owned(),
    })
    .await
    .unwrap()
}

/// The app with its real router, driven without a socket.
pub struct TestApp {
    pub router: Router,
    pub store: Arc<dyn Store>,
    pub state: AppState,
}

impl TestApp {
    pub fn with_store(store: Arc<dyn Store>) -> Self {
        Self::configured(
            store,
            Some(VERIFY_TOKEN.to_owned()),
            Some(APP_SECRET.to_owned()),
        )
    }

    pub fn memory() -> Self {
        Self::with_store(Arc::new(MemoryStore::new()))
    }

    pub fn configured(
        store: Arc<dyn Store>,
        verify_token: Option<String>,
        app_secret: Option<String>,
    ) -> Self {
        let state = AppState::new(
            store.clone(),
            verify_token.map(SecretString::from),
            app_secret.map(SecretString::from),
        );
        Self {
            router: router(state.clone()),
            store,
            state,
        }
    }

    /// The same app with a new state (an admin token, a prompt set…), routed again.
    pub fn with_state(mut self, change: impl FnOnce(AppState) -> AppState) -> Self {
        self.state = change(self.state);
        self.router = router(self.state.clone());
        self
    }

    /// `with_state` opening the admin API to [`ADMIN_TOKEN`] (or keeping it closed).
    pub fn with_admin(self, token: Option<&str>) -> Self {
        self.with_state(|state| {
            state.with_admin_token(token.map(|t| SecretString::from(t.to_owned())))
        })
    }

    /// A named operator of this app's team, and the `Authorization` header of their token.
    pub async fn operator(
        &self,
        name: &str,
        role: zaguan::admin::team::OperatorRole,
    ) -> (zaguan::admin::team::Issued, String) {
        let issued = self
            .state
            .team()
            .add(name, role, None, "test", chrono::Utc::now())
            .await
            .unwrap();
        let auth = format!("Bearer {}", issued.token);
        (issued, auth)
    }

    /// An admin API call: status and JSON body (`Null` when the body is not JSON).
    pub async fn admin(
        &self,
        method: &str,
        uri: &str,
        auth: Option<&str>,
        body: Option<&str>,
    ) -> (StatusCode, serde_json::Value) {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let request = match body {
            Some(body) => request
                .header("content-type", "application/json")
                .body(Body::from(body.to_owned())),
            None => request.body(Body::empty()),
        }
        .unwrap();
        let (status, text) = self.request(request).await;
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        )
    }

    pub async fn request(&self, request: Request<Body>) -> (StatusCode, String) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    pub async fn get(&self, uri: &str) -> (StatusCode, String) {
        self.request(Request::get(uri).body(Body::empty()).unwrap())
            .await
    }

    /// Posts `body` signed with the test app secret, as Meta would.
    pub async fn post_webhook(&self, body: impl Into<Vec<u8>>) -> StatusCode {
        let body = body.into();
        let signature = signature::sign(APP_SECRET.as_bytes(), &body);
        self.post_webhook_with(body, Some(&signature)).await
    }

    pub async fn post_webhook_with(&self, body: Vec<u8>, signature: Option<&str>) -> StatusCode {
        let mut request = Request::post("/webhook").header("content-type", "application/json");
        if let Some(signature) = signature {
            request = request.header("x-hub-signature-256", signature);
        }
        self.request(request.body(Body::from(body)).unwrap())
            .await
            .0
    }
}

/// The real `zaguan` binary with an empty environment (only `PATH`): each test sets exactly
/// the variables it means.
pub fn zaguan() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_zaguan"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    command
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Serves `app` on a free loopback port for the rest of the test (a fake LLM or Graph API);
/// returns `http://127.0.0.1:PORT`.
pub async fn serve_local(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Now, as WhatsApp stamps a message (Unix seconds, a string): a message written now, inside
/// the customer's 24-hour window.
pub fn now_timestamp() -> String {
    chrono::Utc::now().timestamp().to_string()
}

/// A notification with one text message per `(wamid, from, body)`.
pub fn text_notification(messages: &[(&str, &str, &str)]) -> Vec<u8> {
    let messages: Vec<serde_json::Value> = messages
        .iter()
        .map(|(id, from, body)| {
            serde_json::json!({
                "from": from, "id": id, "timestamp": now_timestamp(),
                "type": "text", "text": {"body": body}
            })
        })
        .collect();
    let contacts: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| serde_json::json!({"profile": {"name": "Lucía Fernández"}, "wa_id": m["from"]}))
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
            "contacts": contacts,
            "messages": messages,
        }}]}]
    }))
    .unwrap()
}

/// One body of `tests/fixtures/cloud_api.json`, as bytes.
pub fn cloud_api_fixture(name: &str) -> Vec<u8> {
    let all: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(include_str!("../fixtures/cloud_api.json")).unwrap();
    serde_json::to_vec(&all[name]).unwrap()
}

/// Checks a conversation whose inbox has drained: the `sent` texts appear once each, in order,
/// across its human messages (a merged turn joins them with a newline); each turn has exactly
/// one reply, to its last message; every message in `wamids` is `done`. Returns each turn as
/// (human text, reply body).
pub async fn assert_answered_once_in_order(
    store: &dyn Store,
    wa_id: &str,
    sent: &[String],
    wamids: &[String],
) -> Vec<(String, String)> {
    use zaguan::domain::MessageRole;
    use zaguan::domain::{WaId, WaMessageId};
    use zaguan::store::InboxStatus;

    let wa_id = WaId::parse(wa_id).unwrap();
    let history = store.recent_messages(&wa_id, 10_000).await.unwrap();
    let humans: Vec<_> = history
        .iter()
        .filter(|m| m.message.role == MessageRole::Human)
        .collect();
    let said: Vec<&str> = humans
        .iter()
        .flat_map(|m| m.message.content.split('\n'))
        .collect();
    assert_eq!(
        said, sent,
        "conversation {wa_id}: every message once, in order"
    );
    let mut turns = Vec::new();
    for human in humans {
        let (last, earlier) = human.message.wamids.split_last().unwrap();
        let replies = store.outbox_in_reply_to(last).await.unwrap();
        assert_eq!(
            replies.len(),
            1,
            "conversation {wa_id}: {:?}",
            human.message.content
        );
        for id in earlier {
            assert!(store.outbox_in_reply_to(id).await.unwrap().is_empty());
        }
        turns.push((human.message.content.clone(), replies[0].body.clone()));
    }
    for id in wamids {
        let id = WaMessageId::parse(id).unwrap();
        let entry = store.inbox_entry(&id).await.unwrap().unwrap();
        assert_eq!(entry.status, InboxStatus::Done, "{id}");
    }
    turns
}

/// The text of the last human message a model is asked about (empty when there is none): what
/// the tests' echo models answer to.
pub fn last_human(request: &zaguan::llm::LlmRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            zaguan::llm::ChatMessage::Human { content } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A text inbox entry of `wa_id` received now, in `status` (a `processing` one has had its
/// attempt counted).
pub fn inbox_entry(
    wamid: &str,
    wa_id: &zaguan::domain::WaId,
    text: &str,
    status: zaguan::store::InboxStatus,
) -> zaguan::store::InboxEntry {
    zaguan::store::InboxEntry {
        wamid: zaguan::domain::WaMessageId::parse(wamid).unwrap(),
        wa_id: wa_id.clone(),
        phone_number_id: "109876543210".into(),
        kind: "text".into(),
        text: Some(text.into()),
        payload: "{}".into(),
        content: zaguan::domain::Content::Text { body: text.into() },
        context_id: None,
        sent_at: None,
        status,
        received_at: chrono::Utc::now(),
        attempts: u32::from(status == zaguan::store::InboxStatus::Processing),
    }
}

/// `text` from `wa_id` as a new inbound message; the turn's reply.
pub async fn say(
    engine: &zaguan::engine::Engine,
    store: &std::sync::Arc<dyn zaguan::store::Store>,
    wa_id: &zaguan::domain::WaId,
    n: u32,
    text: &str,
) -> Option<String> {
    let entry = inbox_entry(
        &format!("wamid.{wa_id}.{n}"),
        wa_id,
        text,
        zaguan::store::InboxStatus::Pending,
    );
    store.insert_inbox(&[entry]).await.unwrap();
    let open = store.open_inbox(wa_id).await.unwrap();
    let outcome = engine.run_turn(wa_id, &open).await.unwrap();
    store
        .set_inbox_status(&outcome.answered, zaguan::store::InboxStatus::Done)
        .await
        .unwrap();
    outcome.reply
}

/// Today's demo data set, loaded into `realestate`.
pub async fn seeded_demo(
    realestate: &dyn zaguan::realestate::RealEstateStore,
) -> zaguan::realestate::demo::DemoSet {
    let today = chrono::Utc::now()
        .with_timezone(&chrono_tz::Europe::Madrid)
        .date_naive();
    let set = zaguan::realestate::demo::demo_set(today, chrono_tz::Europe::Madrid);
    zaguan::realestate::demo::seed(realestate, &set)
        .await
        .unwrap();
    set
}

/// An engine over `store` and `realestate` with every domain tool, the ones that flag a person
/// (`request_human`, `request_callback`, `request_listing_change`) and the shipped prompts;
/// no fast path, so the scripted model decides every step.
pub fn realestate_engine(
    store: &std::sync::Arc<dyn zaguan::store::Store>,
    realestate: &std::sync::Arc<dyn zaguan::realestate::RealEstateStore>,
    llm: &std::sync::Arc<zaguan::llm::ScriptedLlm>,
) -> zaguan::engine::Engine {
    use zaguan::realestate::tools::{RequestCallback, RequestListingChange};
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry =
        zaguan::agents::AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    let desk = Arc::new(zaguan::engine::handoff::HandoffDesk::new(
        store.clone(),
        Some(Arc::new(zaguan::realestate::roles::DataRoles(
            realestate.clone(),
        ))),
        zaguan::engine::handoff::HandoffSettings::default(),
    ));
    let tools = zaguan::realestate::tools::registry(realestate.clone())
        .with(zaguan::engine::handoff::RequestHuman::new(desk.clone()))
        .with(RequestCallback::new(realestate.clone(), desk.clone()))
        .with(RequestListingChange::new(realestate.clone(), desk.clone()));
    zaguan::engine::Engine::new(
        store.clone(),
        llm.clone(),
        Arc::new(registry),
        Arc::new(tools),
        zaguan::engine::EngineSettings {
            fast_route: false,
            ..zaguan::engine::EngineSettings::default()
        },
    )
    .with_handoffs(desk)
}
