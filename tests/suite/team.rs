//! The agency's team through the real router and the real binary: named operators sign in to the
//! console and call the API with their own tokens; sign-out and disabling end a session on the
//! server; viewers read with masked numbers and cannot act. On memory and on MongoDB.

use crate::common::{self, Backend, Stores, TestApp};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Utc;
use zaguan::admin::team::OperatorRole;
use zaguan::domain::WaId;
use zaguan::store::{ContactSeen, HandoffReason};

fn instance(stores: &Stores) -> TestApp {
    let team = stores.team.clone();
    TestApp::with_store(stores.store.clone())
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_team(team))
}

async fn get(app: &TestApp, uri: &str, cookie: &str) -> (StatusCode, String) {
    app.request(
        Request::get(uri)
            .header("cookie", cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await
}

async fn post(app: &TestApp, uri: &str, cookie: &str, form: &str) -> (StatusCode, String) {
    app.request(
        Request::post(uri)
            .header("cookie", cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(form.to_owned()))
            .unwrap(),
    )
    .await
}

/// The CSRF token a page's forms carry.
fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    html[at..].split('"').next().unwrap().to_owned()
}

async fn a_session_ends_at_sign_out_and_when_the_operator_is_disabled(backend: Backend) {
    let Some(stores) = Stores::open(backend).await else {
        return;
    };
    let app = instance(&stores);
    let (marta, token) = app.operator("marta", OperatorRole::Operator).await;
    assert_eq!(
        common::console_sign_in(&app, "marta", "not-her-password").await,
        Err(StatusCode::UNAUTHORIZED)
    );
    let cookie = common::console_sign_in(&app, "Marta", &marta.password)
        .await
        .unwrap();
    let (status, page) = get(&app, "/console", &cookie).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("marta"), "signed in as herself");
    // The stored session is keyed by a digest: the cookie's value is nowhere in the database.
    let value = cookie.split_once('=').unwrap().1;
    assert!(stores.team.session(value).await.unwrap().is_none());

    let (status, _) = post(&app, "/console/sign-out", &cookie, "csrf=wrong").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let csrf = csrf_of(&page);
    let (status, _) = post(&app, "/console/sign-out", &cookie, &format!("csrf={csrf}")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _) = get(&app, "/console", &cookie).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "a cookie is refused after sign-out"
    );

    // Disabled: her open session and her token stop at once, on every instance.
    let cookie = common::console_sign_in(&app, "marta", &marta.password)
        .await
        .unwrap();
    let other_instance = instance(&stores);
    assert_eq!(
        get(&other_instance, "/console", &cookie).await.0,
        StatusCode::OK
    );
    let (status, _) = app
        .admin("GET", "/admin/conversations", Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    app.state
        .team()
        .disable("marta", "test", Utc::now())
        .await
        .unwrap();
    assert_eq!(
        get(&other_instance, "/console", &cookie).await.0,
        StatusCode::SEE_OTHER
    );
    let (status, _) = app
        .admin("GET", "/admin/conversations", Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        common::console_sign_in(&app, "marta", &marta.password).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    stores.close().await;
}

#[tokio::test]
async fn memory_a_session_ends_at_sign_out_and_when_the_operator_is_disabled() {
    a_session_ends_at_sign_out_and_when_the_operator_is_disabled(Backend::Memory).await;
}

#[tokio::test]
async fn mongo_a_session_ends_at_sign_out_and_when_the_operator_is_disabled() {
    a_session_ends_at_sign_out_and_when_the_operator_is_disabled(Backend::Mongo).await;
}

async fn a_viewer_reads_masked_numbers_and_an_operator_acts_as_herself(backend: Backend) {
    let Some(stores) = Stores::open(backend).await else {
        return;
    };
    let app = instance(&stores);
    let wa_id = WaId::parse("34600111222").unwrap();
    let now = Utc::now();
    stores
        .store
        .record_contact(&ContactSeen {
            wa_id: wa_id.clone(),
            phone: Some("34600111222".into()),
            user_id: None,
            name: Some("Lucía".into()),
            username: None,
            seen_at: now,
        })
        .await
        .unwrap();
    stores
        .store
        .request_handoff(
            &wa_id,
            &HandoffReason {
                at: now,
                reason: "Quiere hablar con una persona".into(),
                key: "test".into(),
            },
            None,
        )
        .await
        .unwrap();

    // The customer wrote another number; an agent's tool call named theirs.
    stores
        .store
        .append_messages(
            vec![
                zaguan::store::NewMessage {
                    wa_id: wa_id.clone(),
                    role: zaguan::domain::MessageRole::Human,
                    content: "Mejor llamad a mi marido al +34 699 123 456".into(),
                    agent: None,
                    tool_calls: Vec::new(),
                    tool_call_id: None,
                    wamids: Vec::new(),
                    attachments: Vec::new(),
                    at: now,
                },
                zaguan::store::NewMessage::ai(
                    &wa_id,
                    "",
                    "appointment_assistant",
                    vec![zaguan::domain::ToolCall {
                        id: "call_1".into(),
                        name: "list_my_appointments".into(),
                        args: serde_json::json!({"customer": "34600111222"}).into(),
                    }],
                    now,
                ),
            ],
            0,
        )
        .await
        .unwrap();

    let (pablo, _) = app.operator("pablo", OperatorRole::Viewer).await;
    let viewer = common::console_sign_in(&app, "pablo", &pablo.password)
        .await
        .unwrap();
    let (status, list) = get(&app, "/console/conversations", &viewer).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!list.contains("34600111222"), "no full number for a viewer");
    assert!(list.contains("…1222"), "{list}");
    // A viewer searches by name or by the last four digits, never by a part of the number.
    let found = |page: &str| page.contains("…1222");
    for (q, shown) in [
        ("1222", true),
        ("luc", true),
        ("3460011", false),
        ("600111222", false),
        ("112", false),
    ] {
        let (_, page) = get(&app, &format!("/console/conversations?q={q}"), &viewer).await;
        assert_eq!(found(&page), shown, "q={q}");
    }
    let link = list
        .split("href=\"/console/conversations/v")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a sealed link to the conversation");
    let (status, page) = get(&app, &format!("/console/conversations/v{link}"), &viewer).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!page.contains("34600111222"));
    assert!(
        !page.contains("699 123 456"),
        "numbers in the text are masked"
    );
    assert!(page.contains("llamad a mi marido al …3456"), "{page}");
    let (_, transcript) = get(
        &app,
        &format!("/console/conversations/v{link}/transcript"),
        &viewer,
    )
    .await;
    assert!(!transcript.contains("34600111222"), "nor in tool arguments");
    assert!(transcript.contains("…1222"), "{transcript}");
    assert!(page.contains("id=\"read-only\""));
    assert!(
        !page.contains("id=\"take\""),
        "no action offered to a viewer"
    );
    let csrf = csrf_of(&page);
    let (status, _) = post(
        &app,
        "/console/conversations/34600111222/take",
        &viewer,
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a viewer cannot act");
    let conversation = stores.store.conversation(&wa_id).await.unwrap().unwrap();
    assert!(conversation.handoff.is_none());

    let (lucia, _) = app.operator("lucia", OperatorRole::Operator).await;
    let operator = common::console_sign_in(&app, "lucia", &lucia.password)
        .await
        .unwrap();
    let (_, page) = get(&app, "/console/conversations/34600111222", &operator).await;
    assert!(page.contains("34600111222"), "operators see the number");
    assert!(
        page.contains("+34 699 123 456"),
        "and the numbers in the text"
    );
    let (_, found) = get(&app, "/console/conversations?q=3460011", &operator).await;
    assert!(
        found.contains("34600111222"),
        "and search by any part of it"
    );
    let (status, _) = post(
        &app,
        "/console/conversations/34600111222/take",
        &operator,
        &format!("csrf={}", csrf_of(&page)),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let conversation = stores.store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(
        conversation.handoff.map(|h| h.operator),
        Some("lucia".to_owned()),
        "recorded under the signed-in identity"
    );
    // Only admins manage the team.
    let (status, _) = get(&app, "/console/operators", &operator).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    stores.close().await;
}

#[tokio::test]
async fn memory_a_viewer_reads_masked_numbers_and_an_operator_acts_as_herself() {
    a_viewer_reads_masked_numbers_and_an_operator_acts_as_herself(Backend::Memory).await;
}

#[tokio::test]
async fn mongo_a_viewer_reads_masked_numbers_and_an_operator_acts_as_herself() {
    a_viewer_reads_masked_numbers_and_an_operator_acts_as_herself(Backend::Mongo).await;
}

/// `zaguan operators add|list|disable|reset` against MongoDB: the password and token are
/// printed once and stored only as hashes.
#[tokio::test]
async fn the_cli_manages_operators_on_mongodb() {
    let Some(stores) = Stores::open(Backend::Mongo).await else {
        return;
    };
    let database = stores.database_name().unwrap();
    let run = |args: &[&str]| {
        let output = common::zaguan()
            .env("MONGODB_URI", std::env::var("MONGODB_URI").unwrap())
            .env("MONGODB_DATABASE", &database)
            .env("RUST_LOG", "error")
            .args(args)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (ok, out, err) = run(&["operators", "add", "Ana", "--role", "operator"]);
    assert!(ok, "{err}");
    let field = |out: &str, name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .trim()
            .to_owned()
    };
    let password = field(&out, "password:");
    let token = field(&out, "API token:");
    let stored = stores.team.operator("ana").await.unwrap().unwrap();
    assert_eq!(stored.role, OperatorRole::Operator);
    assert!(stored.password_hash.starts_with("$argon2id$"));
    assert!(!stored.password_hash.contains(&password));
    assert_ne!(stored.token_hash, token);

    let (ok, _, err) = run(&["operators", "add", "ana", "--role", "viewer"]);
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, _, err) = run(&["operators", "add", "admin", "--role", "admin"]);
    assert!(!ok && err.contains("bootstrap"), "{err}");

    // With a team, the CLI's --operator must name an enabled member of it.
    let (ok, _, err) = run(&[
        "conversations",
        "reset",
        "34600111222",
        "--operator",
        "nobody",
    ]);
    assert!(!ok && err.contains("no operator named nobody"), "{err}");
    let (ok, _, err) = run(&["conversations", "reset", "34600111222", "--operator", "Ana"]);
    assert!(
        !ok && err.contains("no conversation"),
        "past the name check: {err}"
    );

    let app = instance(&stores);
    assert!(
        common::console_sign_in(&app, "ana", &password)
            .await
            .is_ok()
    );
    let (ok, out, _) = run(&["operators", "disable", "ana"]);
    assert!(ok && out.contains("1 session(s) ended"), "{out}");
    let (_, out, _) = run(&["operators", "list"]);
    assert!(out.contains("ana") && out.contains("disabled"), "{out}");
    assert!(
        common::console_sign_in(&app, "ana", &password)
            .await
            .is_err()
    );
    let (ok, _, err) = run(&[
        "users",
        "set-role",
        "34600111222",
        "owner",
        "--operator",
        "ana",
    ]);
    assert!(!ok && err.contains("ana is disabled"), "{err}");

    let (ok, out, _) = run(&["operators", "reset", "ana"]);
    assert!(ok);
    let again = field(&out, "password:");
    assert!(
        common::console_sign_in(&app, "ana", &password)
            .await
            .is_err(),
        "the old password"
    );
    assert!(common::console_sign_in(&app, "ana", &again).await.is_ok());
    let (_, out, _) = run(&["operators", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(listed["enabled"], true);
    assert!(listed["last_sign_in_at"].is_string());
    stores.close().await;
}

async fn the_queue_lists_the_oldest_first_marks_the_late_and_takes_from_there(backend: Backend) {
    let Some(stores) = Stores::open(backend).await else {
        return;
    };
    let app = instance(&stores);
    let now = Utc::now();
    // Three customers asked for a person 5, 40 and 20 minutes ago (the SLA is 15 minutes).
    for (number, minutes, reason) in [
        ("34600000501", 5, "Quiere negociar el precio"),
        ("34600000502", 40, "Pregunta por una reforma"),
        ("34600000503", 20, "Quiere hablar con una persona"),
    ] {
        let wa_id = WaId::parse(number).unwrap();
        stores
            .store
            .record_contact(&ContactSeen {
                wa_id: wa_id.clone(),
                phone: Some(number.into()),
                user_id: None,
                name: None,
                username: None,
                seen_at: now - chrono::Duration::minutes(minutes),
            })
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
    let (lucia, _) = app.operator("lucia", OperatorRole::Operator).await;
    let cookie = common::console_sign_in(&app, "lucia", &lucia.password)
        .await
        .unwrap();
    let (status, page) = get(&app, "/console/queue", &cookie).await;
    assert_eq!(status, StatusCode::OK);
    let order: Vec<usize> = ["34600000502", "34600000503", "34600000501"]
        .iter()
        .map(|n| page.find(&format!("data-wa=\"{n}\"")).expect(n))
        .collect();
    assert!(order[0] < order[1] && order[1] < order[2], "oldest first");
    let late_rows = page.matches("class=\"late\"").count();
    assert_eq!(late_rows, 2, "40 and 20 minutes are past a 15-minute SLA");
    assert!(page.contains("Pregunta por una reforma"));

    // Take the oldest from the queue: back to the queue, now under "With an operator".
    let (status, answer) = app
        .request(
            Request::post("/console/conversations/34600000502/take")
                .header("cookie", &cookie)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(Body::from(format!("csrf={}&back=queue", csrf_of(&page))))
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{answer}");
    let (_, rows) = get(&app, "/console/queue?rows=1", &cookie).await;
    assert!(!rows.contains("<html"), "the table alone, for the refresh");
    let taken = rows.split("id=\"taken\"").nth(1).unwrap();
    assert!(
        taken.contains("34600000502") && taken.contains("lucia (you)"),
        "{taken}"
    );
    assert!(
        !rows
            .split("id=\"taken\"")
            .next()
            .unwrap()
            .contains("34600000502"),
        "no longer waiting"
    );
    stores.close().await;
}

#[tokio::test]
async fn memory_the_queue_lists_the_oldest_first_marks_the_late_and_takes_from_there() {
    the_queue_lists_the_oldest_first_marks_the_late_and_takes_from_there(Backend::Memory).await;
}

#[tokio::test]
async fn mongo_the_queue_lists_the_oldest_first_marks_the_late_and_takes_from_there() {
    the_queue_lists_the_oldest_first_marks_the_late_and_takes_from_there(Backend::Mongo).await;
}

/// Exports are for admins; leads come from the contacts' profiles (an old lead whose event is
/// gone is still there), and older ones from their events; a cut export says where the next
/// page starts, and the pages join up without a gap or a repeat.
async fn exports_are_for_admins_from_the_records_and_page_when_cut(backend: Backend) {
    use zaguan::admin::export::{self, ExportKind};
    let Some(stores) = Stores::open(backend).await else {
        return;
    };
    let app = instance(&stores).with_state({
        let realestate = stores.realestate.clone();
        |state| state.with_realestate(realestate)
    });
    let now = Utc::now();
    // Seven leads; three of them at the same instant. The first has no event at all (its
    // event went with the retention), the last one an event too.
    let instants = [40, 30, 20, 20, 20, 10, 5];
    for (i, minutes) in instants.iter().enumerate() {
        let wa_id = WaId::parse(&format!("3460020000{i}")).unwrap();
        stores
            .store
            .record_contact(&ContactSeen {
                wa_id: wa_id.clone(),
                phone: None,
                user_id: None,
                name: Some(if i == 0 {
                    "=HYPERLINK(\"x\")".into()
                } else {
                    format!("Cliente {i}")
                }),
                username: None,
                seen_at: now,
            })
            .await
            .unwrap();
        let at = chrono::DateTime::from_timestamp_millis(
            (now - chrono::Duration::minutes(*minutes)).timestamp_millis(),
        )
        .unwrap();
        stores
            .store
            .record_lead(&wa_id, at, "property_search_assistant")
            .await
            .unwrap();
        // A replayed turn does not move a lead.
        stores
            .store
            .record_lead(&wa_id, now, "primary_assistant")
            .await
            .unwrap();
    }
    // Five leads from before profiles recorded them: only their events (newer than every
    // record but two), more than a page of them.
    for (i, minutes) in [15, 12, 9, 8, 7].iter().enumerate() {
        let wa_id = WaId::parse(&format!("3460020010{i}")).unwrap();
        let at = chrono::DateTime::from_timestamp_millis(
            (now - chrono::Duration::minutes(*minutes)).timestamp_millis(),
        )
        .unwrap();
        stores
            .store
            .insert_events(&[zaguan::store::Event::new(
                &wa_id,
                zaguan::store::BusinessEvent::LeadCreated {
                    name: Some(format!("Antiguo {i}")),
                    assistant: "property_search_assistant".into(),
                },
                at,
            )])
            .await
            .unwrap();
    }
    let since = now - chrono::Duration::hours(1);
    let all = export::rows(
        ExportKind::Leads,
        since,
        stores.store.as_ref(),
        stores.realestate.as_ref(),
    )
    .await
    .unwrap();
    assert_eq!(all.rows.len(), 12);
    assert!(all.next.is_none());
    assert!(
        all.rows
            .iter()
            .all(|r| r["assistant"] == "property_search_assistant")
    );

    // Pages of 3: the instant shared by three leads is not split.
    let first = export::page(
        ExportKind::Leads,
        since,
        stores.store.as_ref(),
        stores.realestate.as_ref(),
        3,
    )
    .await
    .unwrap();
    assert_eq!(
        first.rows.len(),
        2,
        "the third row's instant, shared by three, waits"
    );
    let mut next = first
        .next
        .expect("a cut export says where the next page starts");
    let mut rows = first.rows.clone();
    let mut pages = 1;
    loop {
        let page = export::page(
            ExportKind::Leads,
            next,
            stores.store.as_ref(),
            stores.realestate.as_ref(),
            3,
        )
        .await
        .unwrap();
        pages += 1;
        rows.extend(page.rows);
        match page.next {
            Some(after) => next = after,
            None => break,
        }
        assert!(pages < 10, "the pages end");
    }
    assert_eq!(rows.len(), 12, "{rows:?}");
    let mut seen: Vec<String> = rows
        .iter()
        .map(|r| r["wa_id"].as_str().unwrap().to_owned())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 12, "no lead lost or repeated across pages");

    // Over HTTP: an operator's token is refused, an admin's gets the CSV, formula made text.
    let (_, operator) = app.operator("lucia", OperatorRole::Operator).await;
    let (_, admin) = app.operator("marta", OperatorRole::Admin).await;
    let (status, _) = app
        .admin("GET", "/admin/export/leads?since=1h", Some(&operator), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, csv) = app
        .request(
            Request::get("/admin/export/leads?since=1h")
                .header("authorization", &admin)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(csv.contains("'=HYPERLINK"), "{csv}");
    assert_eq!(csv.lines().count(), 13, "{csv}");
    // The console's download, for admins only.
    let (lucia, _) = (
        app.state.team().reset("lucia", "test", now).await.unwrap(),
        (),
    );
    let cookie = common::console_sign_in(&app, "lucia", &lucia.password)
        .await
        .unwrap();
    assert_eq!(
        get(&app, "/console/export/leads.csv?days=1", &cookie)
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    let marta = app.state.team().reset("marta", "test", now).await.unwrap();
    let cookie = common::console_sign_in(&app, "marta", &marta.password)
        .await
        .unwrap();
    let (status, csv) = get(&app, "/console/export/leads.csv?days=1", &cookie).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        csv.starts_with('\u{feff}') && csv.contains("Cliente 6"),
        "{csv}"
    );
    stores.close().await;
}

#[tokio::test]
async fn memory_exports_are_for_admins_from_the_records_and_page_when_cut() {
    exports_are_for_admins_from_the_records_and_page_when_cut(Backend::Memory).await;
}

#[tokio::test]
async fn mongo_exports_are_for_admins_from_the_records_and_page_when_cut() {
    exports_are_for_admins_from_the_records_and_page_when_cut(Backend::Mongo).await;
}

/// The overview counts a conversation as stuck after `ZAGUAN_STUCK_AFTER`, as the monitor and
/// `conversations list` do, not after a fixed half hour.
#[tokio::test]
async fn the_overview_counts_stuck_conversations_by_the_configured_threshold() {
    let stores = Stores::open(Backend::Memory).await.unwrap();
    let config = zaguan::config::Config::from_vars(
        [("ZAGUAN_STUCK_AFTER".to_owned(), "10m".to_owned())].into(),
    )
    .unwrap();
    let app = instance(&stores).with_state(|state| state.with_config(config));
    let wa_id = WaId::parse("34600111333").unwrap();
    stores
        .store
        .set_dialog_state(
            &wa_id,
            &zaguan::domain::DialogState::entered("appointment_assistant"),
            Utc::now() - chrono::Duration::minutes(20),
        )
        .await
        .unwrap();
    let (lucia, _) = app.operator("lucia", OperatorRole::Operator).await;
    let session = common::console_sign_in(&app, "lucia", &lucia.password)
        .await
        .unwrap();
    let (status, page) = get(&app, "/console", &session).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<b id=\"stuck\">1</b>"), "{page}");
    assert!(page.contains("idle 10m+"), "{page}");
}
