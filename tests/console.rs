//! The operators' console in a real headless Chromium, driven over WebDriver (Debian's
//! `chromium` and `chromium-driver`, installed by `scripts/test` when missing). One operator
//! unsticks a conversation: signs in (a wrong password refused), finds it stuck in
//! `appointment_assistant` with the filter, opens it, resets it, takes it over, replies (the
//! fake Graph API receives it), releases it; a form without its CSRF token is refused. Then a
//! team at work, on the memory store and on FerretDB: a viewer reads the queue with masked
//! numbers, cannot search by a part of one and cannot act, and reads the funnel of a scripted
//! week; an operator takes the oldest handoff from the queue and answers it there; an admin adds
//! an operator. Screenshots of each page go to the target directory, and to `docs/console/` with
//! `UPDATE_SCREENSHOTS=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use common::graph::FakeGraph;
use fantoccini::{Client, ClientBuilder, Locator};
use secrecy::SecretString;
use serde_json::json;
use zaguan::admin::team::OperatorRole;
use zaguan::agents::AgentRegistry;
use zaguan::app::{AppState, router};
use zaguan::domain::MessageRole;
use zaguan::domain::ToolCall;
use zaguan::domain::WaId;
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::ScriptedLlm;
use zaguan::outbound::{GraphClient, Limiters, Outbound, OutboundSettings, SendLimits};
use zaguan::runtime::PromptReloader;
use zaguan::store::{ContactSeen, MemoryStore, NewMessage, Store};

const TOKEN: &str = "console-test-token";

/// chromedriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find(binaries: &[&str]) -> Option<PathBuf> {
    binaries
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| {
            binaries.iter().find_map(|name| {
                let found = Command::new("which").arg(name).output().ok()?;
                let path = String::from_utf8(found.stdout).ok()?;
                let path = path.trim();
                (!path.is_empty()).then(|| PathBuf::from(path))
            })
        })
}

/// The driver and the browser, or `None` (with a message) outside CI when they are missing;
/// under `CI=true` their absence fails the test.
async fn browser() -> Option<(Driver, Client)> {
    browser_speaking(None).await
}

/// The browser, its `Accept-Language` set to `languages` when given (as a Spanish operator's
/// browser sends it).
async fn browser_speaking(languages: Option<&str>) -> Option<(Driver, Client)> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let driver = find(&["/usr/bin/chromedriver", "chromedriver"]);
    let chromium = find(&["/usr/bin/chromium", "chromium", "chromium-browser"]);
    let (Some(driver), Some(chromium)) = (driver, chromium) else {
        assert!(
            !ci,
            "CI=true but chromium or chromedriver is missing (scripts/test installs them)"
        );
        eprintln!(
            "chromium or chromedriver missing: skipping the browser test (run ./scripts/test)"
        );
        return None;
    };
    let port = common::free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let profile = tempfile::tempdir().unwrap().keep();
    let mut caps = serde_json::Map::new();
    let mut options = json!({
        "binary": chromium,
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1100,900",
                 format!("--user-data-dir={}", profile.display())],
    });
    if let Some(languages) = languages {
        options["prefs"] = json!({"intl.accept_languages": languages});
    }
    caps.insert("goog:chromeOptions".into(), options);
    let mut last = None;
    for _ in 0..50 {
        // Plain HTTP to the local driver: no TLS stack needed.
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&driver.url)
            .await
        {
            Ok(client) => return Some((driver, client)),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("chromedriver did not answer: {last:?}");
}

fn message(
    wa_id: &WaId,
    role: MessageRole,
    content: &str,
    agent: Option<&str>,
    calls: Vec<ToolCall>,
) -> NewMessage {
    NewMessage {
        wa_id: wa_id.clone(),
        role,
        content: content.into(),
        agent: agent.map(Into::into),
        tool_calls: calls,
        tool_call_id: None,
        wamids: Vec::new(),
        attachments: Vec::new(),
        at: Utc::now() - chrono::Duration::hours(3),
    }
}

async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    if std::env::var("UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join(format!("{name}.png")), &png).unwrap();
    }
}

async fn text_of(client: &Client, css: &str) -> String {
    element(client, css).await.text().await.unwrap()
}

/// Waits until the browser is at `path` (a form's answer has loaded).
async fn wait_path(client: &Client, path: &str) {
    for _ in 0..100 {
        if client.current_url().await.is_ok_and(|u| u.path() == path) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never reached {path}: {:?}", client.current_url().await);
}

/// Waits until the element `css` shows `wanted` (an action's page has loaded).
async fn wait_text(client: &Client, css: &str, wanted: &str) {
    for _ in 0..100 {
        if let Ok(element) = client.find(Locator::Css(css)).await
            && element.text().await.is_ok_and(|t| t.contains(wanted))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{css} never showed {wanted:?}:\n{}",
        client.source().await.unwrap_or_default()
    );
}

/// The element `css` on the page, waiting for it to appear (a navigation may still be on).
async fn element(client: &Client, css: &str) -> fantoccini::elements::Element {
    match client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
    {
        Ok(element) => element,
        Err(error) => panic!(
            "{css}: {error}\n{}",
            client.source().await.unwrap_or_default()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_unsticks_a_conversation_in_the_browser() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let stuck = WaId::parse("34611000961").unwrap();
    let other = WaId::parse("34611000962").unwrap();
    let three_hours_ago = Utc::now() - chrono::Duration::hours(3);
    // More conversations idle for longer, back with the primary assistant, than the overview
    // counts at most: they are not stuck, and must not hide the one that is.
    for i in 0..201 {
        let wa_id = WaId::parse(&format!("3461100{i:04}")).unwrap();
        store
            .set_dialog_state(
                &wa_id,
                &zaguan::domain::DialogState::primary(),
                Utc::now() - chrono::Duration::hours(5),
            )
            .await
            .unwrap();
    }
    for (wa_id, name) in [(&stuck, "Lucía Pérez"), (&other, "Tomás")] {
        store
            .record_contact(&ContactSeen {
                wa_id: wa_id.clone(),
                phone: Some(wa_id.as_str().to_owned()),
                user_id: None,
                name: Some(name.into()),
                username: None,
                seen_at: three_hours_ago,
            })
            .await
            .unwrap();
    }
    store
        .set_dialog_state(
            &stuck,
            &zaguan::domain::DialogState::entered("appointment_assistant"),
            three_hours_ago,
        )
        .await
        .unwrap();
    for m in [
        message(
            &stuck,
            MessageRole::Human,
            "Quiero ver el piso de Ruzafa el jueves",
            None,
            Vec::new(),
        ),
        message(
            &stuck,
            MessageRole::Ai,
            "",
            Some("primary_assistant"),
            vec![ToolCall {
                id: "call_1".into(),
                name: "ToAppointment_Assistant".into(),
                args: json!({"query": "visita el jueves"}).into(),
            }],
        ),
        message(
            &stuck,
            MessageRole::Ai,
            "",
            Some("appointment_assistant"),
            vec![ToolCall {
                id: "call_2".into(),
                name: "list_available_slots".into(),
                args: json!({"property_id": "P-1017"}).into(),
            }],
        ),
        message(
            &stuck,
            MessageRole::Tool,
            "Huecos: jueves 10:00 (S-1), jueves 17:30 (S-2)",
            Some("appointment_assistant"),
            Vec::new(),
        ),
        message(
            &stuck,
            MessageRole::Ai,
            "Tengo el jueves a las 10:00 o a las 17:30, ¿cuál prefieres?",
            Some("appointment_assistant"),
            Vec::new(),
        ),
    ] {
        store.append_message(m).await.unwrap();
    }
    store
        .set_dialog_state(&other, &zaguan::domain::DialogState::primary(), Utc::now())
        .await
        .unwrap();
    let now = Utc::now();
    assert!(
        store
            .claim_conversation(
                &stuck,
                "zaguan-7f3",
                now,
                now + chrono::Duration::seconds(30),
                &[]
            )
            .await
            .unwrap()
    );
    store
        .insert_inbox(&[common::inbox_entry(
            "wamid.CONSOLE1",
            &stuck,
            "Quiero ver el piso de Ruzafa el jueves",
            zaguan::store::InboxStatus::Done,
        )])
        .await
        .unwrap();

    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Arc::new(Engine::new(
        store.clone(),
        Arc::new(ScriptedLlm::new()),
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(zaguan::engine::ToolRegistry::new()),
        EngineSettings::default(),
    ));
    // No model answers this instance: the overview says so, and since when.
    engine
        .model_status()
        .went_offline(Utc::now() - chrono::Duration::minutes(75));
    // Nor any other: the call records show a model's last answer, then two steps served
    // offline, whichever instance served them.
    let step = |provider: &str, ago: i64| zaguan::domain::LlmCall {
        conversation: None,
        agent: "searcher_assistant".into(),
        provider: provider.into(),
        model: "gpt-test".into(),
        outcome: zaguan::domain::CallOutcome::Ok,
        input_tokens: 0,
        output_tokens: 0,
        latency: Duration::ZERO,
        error: None,
        at: Utc::now() - chrono::Duration::seconds(ago),
    };
    let offline_from = step("offline", 10);
    store
        .insert_llm_calls(&[step("openai", 20), offline_from.clone(), step("offline", 5)])
        .await
        .unwrap();
    let reloader = Arc::new(PromptReloader::new(
        prompts,
        zaguan::startup::known_tools(),
        engine.clone(),
    ));
    let config = zaguan::config::Config::from_vars(
        [(
            "ZAGUAN_PROMPTS_DIR".to_owned(),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("prompts")
                .display()
                .to_string(),
        )]
        .into(),
    )
    .unwrap();
    let state = AppState::new(store.clone(), None, None)
        .with_admin_token(Some(SecretString::from(TOKEN.to_owned())))
        .with_prompts(reloader)
        .with_config(config);
    let marta = state
        .team()
        .add("marta", OperatorRole::Admin, None, "test", Utc::now())
        .await
        .unwrap();
    let base = common::serve_local(router(state)).await;
    let graph = Arc::new(FakeGraph::default());
    let graph_base = common::graph::serve(graph.clone()).await;
    let outbound = Outbound::new(
        store.clone(),
        GraphClient::new(
            format!("{graph_base}/v21.0").parse().unwrap(),
            Some(SecretString::from("EAAG-test".to_owned())),
            Duration::from_secs(5),
        )
        .unwrap(),
        Limiters::new(&SendLimits::default()),
        OutboundSettings::default(),
    );

    // Not signed in: the sign-in form.
    client.goto(&format!("{base}/console")).await.unwrap();
    assert_eq!(
        client.current_url().await.unwrap().path(),
        "/console/sign-in"
    );
    screenshot(&client, "sign-in").await;
    let form = client.form(Locator::Css("#sign-in")).await.unwrap();
    form.set_by_name("operator", "Marta").await.unwrap();
    form.set_by_name("password", "not-her-password")
        .await
        .unwrap();
    form.submit().await.unwrap();
    assert!(
        text_of(&client, ".error")
            .await
            .contains("Wrong name or password")
    );
    let form = client.form(Locator::Css("#sign-in")).await.unwrap();
    form.set_by_name("operator", "Marta").await.unwrap();
    form.set_by_name("password", &marta.password).await.unwrap();
    form.submit().await.unwrap();
    wait_path(&client, "/console").await;
    assert_eq!(
        text_of(&client, "#stuck").await,
        "1",
        "one conversation stuck"
    );
    assert_eq!(
        text_of(&client, "#answered").await,
        "1",
        "the last hour's answered message"
    );
    let offline = text_of(&client, "#offline").await;
    assert!(offline.contains("Offline since"), "{offline}");
    assert!(offline.contains("1h 15m"), "{offline}");
    let deployment = text_of(&client, "#deployment-offline").await;
    // In the agency's time zone (ZAGUAN_TIMEZONE's default), as every console page shows times.
    let since = offline_from
        .at
        .with_timezone(&chrono_tz::Europe::Madrid)
        .format("%d/%m %H:%M")
        .to_string();
    assert!(
        deployment.contains(&format!("any instance since {since}")),
        "{deployment}"
    );
    assert!(deployment.contains(": 2 steps served"), "{deployment}");
    screenshot(&client, "overview").await;
    // A model answers this instance again, and another instance's call: both banners are gone.
    engine.model_status().answered();
    store
        .insert_llm_calls(&[step("anthropic", 0)])
        .await
        .unwrap();
    client.refresh().await.unwrap();
    wait_text(&client, "#stuck", "1").await;
    assert!(
        client.find(Locator::Css("#offline")).await.is_err(),
        "no offline banner once a model answers"
    );
    assert!(
        client
            .find(Locator::Css("#deployment-offline"))
            .await
            .is_err(),
        "no deployment banner once a model answers any instance"
    );

    // Find it with the filter.
    client
        .goto(&format!("{base}/console/conversations"))
        .await
        .unwrap();
    element(&client, "select[name=state]")
        .await
        .select_by_value("appointment_assistant")
        .await
        .unwrap();
    client
        .form(Locator::Css("#filters"))
        .await
        .unwrap()
        .submit()
        .await
        .unwrap();
    for _ in 0..100 {
        let url = client.current_url().await.unwrap();
        if url
            .query()
            .is_some_and(|q| q.contains("state=appointment_assistant"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = text_of(&client, "#conversations").await;
    assert!(
        listed.contains(stuck.as_str()) && listed.contains("Lucía Pérez"),
        "{listed}"
    );
    assert!(!listed.contains(other.as_str()), "{listed}");
    screenshot(&client, "conversations").await;

    // Open it: the transcript, the handover marked.
    client
        .find(Locator::LinkText(stuck.as_str()))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let transcript = text_of(&client, "#transcript").await;
    assert!(
        transcript.contains("Quiero ver el piso de Ruzafa"),
        "{transcript}"
    );
    assert!(transcript.contains("handed over"), "{transcript}");
    // "Save as a test": the conversation as a test file, the customer's name replaced.
    let exported = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(document.querySelector('#export-test').href)
               .then(r => r.text().then(t => done(r.status + '\\n' + t)));",
            Vec::new(),
        )
        .await
        .unwrap();
    let exported = exported.as_str().unwrap_or_default().to_owned();
    assert!(exported.starts_with("200\n"), "{exported}");
    assert!(
        exported.contains("- user: Quiero ver el piso de Ruzafa el jueves"),
        "{exported}"
    );
    assert!(!exported.contains("Pérez"), "{exported}");
    assert_eq!(
        text_of(&client, "#dialog-state").await,
        "appointment_assistant"
    );
    assert_eq!(text_of(&client, "#lease").await, "zaguan-7f3");
    screenshot(&client, "conversation").await;

    // A form without its CSRF token is refused, and changes nothing.
    let status = client
        .execute(
            &format!(
                "var x = new XMLHttpRequest(); x.open('POST', '/console/conversations/{}/reset', false); \
                 x.setRequestHeader('Content-Type', 'application/x-www-form-urlencoded'); x.send('csrf=forged'); return x.status;",
                stuck.as_str()
            ),
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    assert_eq!(
        store
            .conversation(&stuck)
            .await
            .unwrap()
            .unwrap()
            .dialog_state
            .to_list(),
        ["appointment_assistant"]
    );

    // Reset, take over, reply, release.
    element(&client, "#reset").await.click().await.unwrap();
    wait_text(&client, "#dialog-state", "primary").await;
    assert!(
        text_of(&client, ".notice")
            .await
            .contains("primary assistant")
    );
    let conversation = store.conversation(&stuck).await.unwrap().unwrap();
    assert!(conversation.dialog_state.is_primary());
    assert_eq!(conversation.reset_by.as_deref(), Some("marta"));
    element(&client, "#take").await.click().await.unwrap();
    element(&client, "#release").await;
    let handoff = store
        .conversation(&stuck)
        .await
        .unwrap()
        .unwrap()
        .handoff
        .unwrap();
    assert_eq!(handoff.operator, "marta");
    let reply = client.form(Locator::Css("#reply")).await.unwrap();
    reply
        .set_by_name(
            "text",
            "Hola Lucía, soy Marta: te confirmo el jueves a las 17:30.",
        )
        .await
        .unwrap();
    reply.submit().await.unwrap();
    wait_text(&client, ".notice", "queued").await;
    outbound.flush(&stuck).await.unwrap();
    assert!(
        graph
            .texts()
            .iter()
            .any(|t| t.contains("te confirmo el jueves a las 17:30")),
        "{:?}",
        graph.texts()
    );
    screenshot(&client, "taken").await;
    element(&client, "#release").await.click().await.unwrap();
    element(&client, "#take").await;
    assert!(
        store
            .conversation(&stuck)
            .await
            .unwrap()
            .unwrap()
            .handoff
            .is_none()
    );

    // Forgetting a user asks first, then erases them.
    client
        .goto(&format!(
            "{base}/console/conversations/{}/forget",
            other.as_str()
        ))
        .await
        .unwrap();
    assert!(
        store.conversation(&other).await.unwrap().is_some(),
        "asked, not done"
    );
    element(&client, "#forget").await.click().await.unwrap();
    element(&client, "#filters").await;
    assert!(store.conversation(&other).await.unwrap().is_none());

    // The prompts as staff wrote them.
    client
        .goto(&format!("{base}/console/prompts"))
        .await
        .unwrap();
    assert!(
        client
            .source()
            .await
            .unwrap()
            .contains("appointment_assistant")
    );
    screenshot(&client, "prompts").await;

    // Signed out: back to the form.
    client
        .find(Locator::Css("header button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_path(&client, "/console/sign-in").await;
    client
        .goto(&format!("{base}/console/conversations"))
        .await
        .unwrap();
    assert_eq!(
        client.current_url().await.unwrap().path(),
        "/console/sign-in"
    );
    client.close().await.unwrap();
}

/// Signs in through the form and waits for the overview.
async fn sign_in_as(client: &Client, base: &str, name: &str, password: &str) {
    client
        .goto(&format!("{base}/console/sign-in"))
        .await
        .unwrap();
    let form = client.form(Locator::Css("#sign-in")).await.unwrap();
    form.set_by_name("operator", name).await.unwrap();
    form.set_by_name("password", password).await.unwrap();
    form.submit().await.unwrap();
    wait_path(client, "/console").await;
    assert!(text_of(client, "#who").await.contains(name));
}

async fn sign_out(client: &Client) {
    element(client, "header button")
        .await
        .click()
        .await
        .unwrap();
    wait_path(client, "/console/sign-in").await;
}

/// A team at work, in the browser, on one backend: a viewer reads the queue with masked
/// numbers and cannot act, then the funnel of a scripted week; an operator takes the oldest
/// handoff from the queue and answers it there; an admin adds an operator.
/// What the team's pages say, in the language the pass reads them in.
struct Words {
    lang: &'static str,
    past_sla: &'static str,
    mine: &'static str,
    taken: &'static str,
    queued: &'static str,
    viewer: &'static str,
    not_read_since: &'static str,
    added: &'static str,
    saved: &'static str,
}

const ENGLISH: Words = Words {
    lang: "en",
    past_sla: "past SLA",
    mine: "lucia (you)",
    taken: "You have the conversation",
    queued: "queued",
    viewer: "viewer",
    not_read_since: "not read since",
    added: "added.",
    saved: "saved.",
};

const SPANISH: Words = Words {
    lang: "es",
    past_sla: "fuera de plazo",
    mine: "lucia (tú)",
    taken: "Tienes la conversación",
    queued: "en cola",
    viewer: "lector",
    not_read_since: "sin leer desde el",
    added: "dado de alta.",
    saved: "guardado.",
};

async fn a_team_at_work(
    client: &Client,
    backend: common::Backend,
    screenshots: bool,
    words: &Words,
) {
    use zaguan::store::HandoffReason;
    let Some(stores) = common::Stores::open(backend).await else {
        return;
    };
    let today = Utc::now().date_naive();
    let expected =
        common::traffic::week(stores.store.as_ref(), stores.realestate.as_ref(), today).await;
    // Two customers wait for a person: one for 40 minutes (past the 15-minute SLA), one for 5.
    let now = Utc::now();
    for (number, minutes, reason) in [
        ("34600300001", 40, "Quiere negociar el precio del P-1021"),
        ("34600300002", 5, "Pregunta por la reforma de la cocina"),
    ] {
        let wa_id = WaId::parse(number).unwrap();
        stores
            .store
            .record_contact(&ContactSeen {
                wa_id: wa_id.clone(),
                phone: Some(number.into()),
                user_id: None,
                name: Some("Carmen Ruiz".into()),
                username: None,
                seen_at: now - chrono::Duration::minutes(minutes),
            })
            .await
            .unwrap();
        stores
            .store
            .insert_inbox(&[common::inbox_entry(
                &format!("wamid.QUEUE{number}"),
                &wa_id,
                reason,
                zaguan::store::InboxStatus::Done,
            )])
            .await
            .unwrap();
        stores
            .store
            .request_handoff(
                &wa_id,
                &HandoffReason {
                    at: now - chrono::Duration::minutes(minutes),
                    reason: reason.into(),
                    key: number.into(),
                },
                None,
            )
            .await
            .unwrap();
    }
    // The agency's clock: the pages show its times, not UTC.
    let config = zaguan::config::Config::from_vars(
        [("ZAGUAN_TIMEZONE".to_owned(), "Europe/Madrid".to_owned())].into(),
    )
    .unwrap();
    let state = AppState::new(stores.store.clone(), None, None)
        .with_admin_token(Some(SecretString::from(TOKEN.to_owned())))
        .with_realestate(stores.realestate.clone())
        .with_team(stores.team.clone())
        .with_config(config);
    let team = state.team();
    let pablo = team
        .add("pablo", OperatorRole::Viewer, None, "test", now)
        .await
        .unwrap();
    let lucia = team
        .add("lucia", OperatorRole::Operator, None, "test", now)
        .await
        .unwrap();
    let marta = team
        .add("marta", OperatorRole::Admin, None, "test", now)
        .await
        .unwrap();
    let base = common::serve_local(router(state)).await;

    // The viewer: the queue, numbers masked, nothing to press; a forged take is refused.
    sign_in_as(client, &base, "pablo", &pablo.password).await;
    client.goto(&format!("{base}/console/queue")).await.unwrap();
    let html_lang = element(client, "html").await.attr("lang").await.unwrap();
    assert_eq!(html_lang.as_deref(), Some(words.lang));
    assert!(
        text_of(client, "#timezone").await.contains("Europe/Madrid"),
        "the footer names the agency's time zone"
    );
    let queue = text_of(client, "#waiting").await;
    assert!(
        queue.contains("…0001") && queue.contains("…0002"),
        "{queue}"
    );
    assert!(!client.source().await.unwrap().contains("34600300001"));
    assert!(client.find(Locator::Css("button.take")).await.is_err());
    let status = client
        .execute(
            "var csrf = document.querySelector('input[name=csrf]').value; \
             var x = new XMLHttpRequest(); x.open('POST', '/console/conversations/34600300001/take', false); \
             x.setRequestHeader('Content-Type', 'application/x-www-form-urlencoded'); x.send('csrf=' + csrf); return x.status;",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403), "a viewer cannot act");
    // Her search is by the last four digits or a name: a part of a number finds nothing (the
    // masked rows cannot be rebuilt digit by digit).
    for (q, found) in [("0001", true), ("carmen", true), ("346003000", false)] {
        client
            .goto(&format!("{base}/console/conversations?q={q}"))
            .await
            .unwrap();
        let source = client.source().await.unwrap();
        assert_eq!(source.contains("…0001"), found, "q={q}");
        assert!(!source.contains("34600300001"), "q={q}");
    }
    // The funnel of the scripted week, as the records hold it.
    let period = format!("from={}&to={}", today - chrono::Duration::days(6), today);
    client
        .goto(&format!("{base}/console/reports?{period}"))
        .await
        .unwrap();
    for (step, count) in [
        ("inquiry", expected.inquiry),
        ("qualified", expected.qualified),
        ("visit_booked", expected.visit_booked),
        ("visit_attended", expected.visit_attended),
        ("offer", expected.offer),
    ] {
        assert_eq!(
            text_of(client, &format!("tr[data-step={step}] .count")).await,
            count.to_string(),
            "{step}"
        );
    }
    assert_eq!(text_of(client, "#to-person").await, "5m 00s");
    element(client, "#funnel-chart").await;
    if screenshots {
        screenshot(client, "reports").await;
    }
    sign_out(client).await;

    // The operator takes the oldest from the queue, and answers from there.
    sign_in_as(client, &base, "lucia", &lucia.password).await;
    client.goto(&format!("{base}/console/queue")).await.unwrap();
    let rows = client
        .find_all(Locator::Css("#waiting tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let first = rows[0].text().await.unwrap();
    assert!(
        first.contains("34600300001") && first.contains(words.past_sla),
        "oldest first, marked: {first}"
    );
    if screenshots {
        screenshot(client, "queue").await;
    }
    element(client, "#waiting tbody tr button.take")
        .await
        .click()
        .await
        .unwrap();
    wait_text(client, ".notice", words.taken).await;
    let taken = text_of(client, "#taken").await;
    assert!(
        taken.contains("34600300001") && taken.contains(words.mine),
        "{taken}"
    );
    let handoff = stores
        .store
        .conversation(&WaId::parse("34600300001").unwrap())
        .await
        .unwrap()
        .unwrap()
        .handoff
        .unwrap();
    assert_eq!(handoff.operator, "lucia");
    let reply = client
        .form(Locator::Css("#taken form.inline-reply"))
        .await
        .unwrap();
    reply
        .set_by_name("text", "Hola Carmen, soy Lucía: hablamos del precio ahora.")
        .await
        .unwrap();
    reply.submit().await.unwrap();
    wait_text(client, ".notice", words.queued).await;
    let history = stores
        .store
        .recent_messages(&WaId::parse("34600300001").unwrap(), 5)
        .await
        .unwrap();
    assert!(
        history
            .iter()
            .any(|m| m.message.content.contains("hablamos del precio")),
        "{history:?}"
    );
    sign_out(client).await;

    // The admin: the team, and a new operator whose password is shown once.
    sign_in_as(client, &base, "marta", &marta.password).await;
    client
        .goto(&format!("{base}/console/operators"))
        .await
        .unwrap();
    let listed = text_of(client, "#operators").await;
    assert!(
        listed.contains("pablo") && listed.contains(words.viewer),
        "{listed}"
    );
    let form = client.form(Locator::Css("#add-operator")).await.unwrap();
    form.set_by_name("name", "jorge").await.unwrap();
    form.submit().await.unwrap();
    let password = text_of(client, "#issued-password").await;
    assert_eq!(password.len(), 24, "{password}");
    assert!(
        stores
            .team
            .operator("jorge")
            .await
            .unwrap()
            .is_some_and(
                |o| o.role == OperatorRole::Operator && !o.password_hash.contains(&password)
            )
    );
    if screenshots {
        screenshot(client, "operators").await;
    }

    // The admin loads a staff member; a bad number is refused with the field named.
    client.goto(&format!("{base}/console/staff")).await.unwrap();
    let form = client.form(Locator::Css("#add-staff")).await.unwrap();
    form.set_by_name("name", "Lucía Ferrer").await.unwrap();
    form.set_by_name("wa_id", "12").await.unwrap();
    form.submit().await.unwrap();
    wait_text(client, "body", "wa_id: `12` is not a valid phone number").await;
    client.goto(&format!("{base}/console/staff")).await.unwrap();
    let form = client.form(Locator::Css("#add-staff")).await.unwrap();
    form.set_by_name("name", "Lucía Ferrer").await.unwrap();
    form.set_by_name("wa_id", "699 00 02 22").await.unwrap();
    form.set_by_name("zones", "Valencia; Ruzafa").await.unwrap();
    form.set_by_name("calendar_url", "https://calendar.example.es/lucia.ics")
        .await
        .unwrap();
    form.submit().await.unwrap();
    wait_text(client, "#notice", "Lucía Ferrer").await;
    let member = stores
        .realestate
        .staff()
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.name == "Lucía Ferrer")
        .unwrap();
    assert_eq!(member.wa_id.as_ref().unwrap().as_str(), "34699000222");
    assert_eq!(member.zones, ["Valencia", "Ruzafa"]);
    // Her calendar cannot be read: the page says since when and why.
    let since = Utc::now() - chrono::Duration::hours(3);
    stores
        .realestate
        .save_calendar(&zaguan::realestate::CalendarCopy {
            staff_id: member.id.clone(),
            url: "https://calendar.example.es/lucia.ics".into(),
            busy: Vec::new(),
            read_at: None,
            failing_since: Some(since),
            error: Some("answered 404 Not Found".into()),
        })
        .await
        .unwrap();
    client.goto(&format!("{base}/console/staff")).await.unwrap();
    let listed = text_of(client, "#staff").await;
    assert!(
        listed.contains("…0222")
            && listed.contains(&format!(
                "{} {}: answered 404 Not Found",
                words.not_read_since,
                since
                    .with_timezone(&chrono_tz::Europe::Madrid)
                    .format("%d/%m/%Y %H:%M")
            )),
        "{listed}"
    );
    assert!(!listed.contains("34699000222"), "numbers masked");
    // An owner is added with a listing and her agent, then given another listing.
    let set = zaguan::realestate::demo::demo_set(today, chrono_tz::Europe::Madrid);
    let listings: Vec<_> = set.properties[..2]
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, mut p)| {
            p.id = format!("P-80{i:02}");
            p.owner_id = String::new();
            p
        })
        .collect();
    stores
        .realestate
        .upsert_properties(&listings)
        .await
        .unwrap();
    let form = client.form(Locator::Css("#add-owner")).await.unwrap();
    form.set_by_name("name", "Rosa Martín").await.unwrap();
    form.set_by_name("wa_id", "611 22 33 44").await.unwrap();
    form.set_by_name("agent_id", &member.id).await.unwrap();
    form.set_by_name("listings", "P-8000").await.unwrap();
    form.submit().await.unwrap();
    wait_text(client, "#notice", words.added).await;
    let rosa = stores
        .realestate
        .owners()
        .await
        .unwrap()
        .into_iter()
        .find(|o| o.name == "Rosa Martín")
        .expect("the owner is on record");
    assert_eq!(rosa.wa_id.as_ref().unwrap().as_str(), "34611223344");
    assert_eq!(rosa.agent_id.as_deref(), Some(member.id.as_str()));
    let owned = |id: &'static str| {
        let realestate = stores.realestate.clone();
        async move { realestate.property(id).await.unwrap().unwrap().owner_id }
    };
    assert_eq!(owned("P-8000").await, rosa.id);
    element(
        client,
        &format!("tr[data-id=\"{}\"] details.edit summary", rosa.id),
    )
    .await
    .click()
    .await
    .unwrap();
    let form = client
        .form(Locator::Css(&format!("#edit-{}", rosa.id)))
        .await
        .unwrap();
    form.set_by_name("listings", "P-8000; P-8001")
        .await
        .unwrap();
    form.submit().await.unwrap();
    wait_text(client, "#notice", words.saved).await;
    assert_eq!(
        owned("P-8001").await,
        rosa.id,
        "the edit gave her the second listing"
    );
    assert_eq!(
        stores
            .realestate
            .owners()
            .await
            .unwrap()
            .into_iter()
            .find(|o| o.id == rosa.id)
            .and_then(|o| o.wa_id)
            .map(|w| w.as_str().to_owned())
            .as_deref(),
        Some("34611223344"),
        "an empty number field keeps the number on record"
    );
    let owners = text_of(client, "#owners").await;
    assert!(
        owners.contains("Rosa Martín") && owners.contains("P-8000, P-8001"),
        "{owners}"
    );
    if screenshots {
        screenshot(client, "staff").await;
    }
    if words.lang == "es" {
        // The operator's choice beats the browser's language, on every page after it.
        element(client, "#lang-en").await.click().await.unwrap();
        wait_text(client, "header", "Sign out").await;
        wait_path(client, "/console/staff").await;
        client.goto(&format!("{base}/console/queue")).await.unwrap();
        wait_text(client, "h1", "Waiting for a person").await;
        element(client, "#lang-es").await.click().await.unwrap();
        wait_text(client, "h1", "Esperando a una persona").await;
    }
    sign_out(client).await;
    stores.close().await;
}

/// The team's pages on the memory store and on MongoDB (FerretDB), one browser for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_works_the_queue_and_reads_the_funnel_in_the_browser() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    a_team_at_work(&client, common::Backend::Memory, false, &ENGLISH).await;
    client.close().await.unwrap();
    // A Spanish operator's browser: the console answers in Spanish without being asked.
    let Some((_driver, client)) = browser_speaking(Some("es-ES,es")).await else {
        return;
    };
    a_team_at_work(&client, common::Backend::Mongo, true, &SPANISH).await;
    client.close().await.unwrap();
}

/// Without an admin token there is no console.
#[tokio::test]
async fn without_an_admin_token_there_is_no_console() {
    let app = common::TestApp::memory();
    for path in ["/console", "/console/sign-in", "/console/conversations"] {
        assert_eq!(
            app.get(path).await.0,
            axum::http::StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}
