//! The agency loads its own business through the real binary on MongoDB (FerretDB in CI), with
//! no demo data and no hand-written documents: staff and owners made with `zaguan staff|owners`
//! and with the admin API are listed by both; a customer asking for a person reaches a member
//! the API created; an owner the CLI created a moment ago is an owner on their first message.

mod common;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use common::TestMongo;
use common::service::{Options, Service, say};

fn rule_model(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    if system.contains("Propietario ") {
        say("Hola, te cuento cómo van tus inmuebles.")
    } else {
        say("¿En qué te ayudo?")
    }
}

/// Open all day, every day: a handoff goes out whenever the test runs.
fn business_open_always() -> String {
    let mut text = String::from("name = \"Inmobiliaria Prueba\"\n[hours]\n");
    for day in zaguan::business::WEEKDAYS {
        text.push_str(&format!("{day} = [\"0:00-24:00\"]\n"));
    }
    text
}

/// `zaguan ARGS` against the test's database.
fn cli(db: &TestMongo, args: &[&str]) -> Output {
    common::zaguan()
        .args(args)
        .env("MONGODB_URI", std::env::var("MONGODB_URI").unwrap())
        .env("MONGODB_DATABASE", db.store.database().name())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_people_made_by_the_cli_and_the_api_are_the_same_people() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let mut service = Service::start(Options {
        rules: rule_model,
        business: Some(business_open_always()),
        env: vec![("ZAGUAN_HANDOFF_DIGEST", "1s".to_owned())],
        mongo: Some(&db),
    })
    .await;

    // A member by the CLI, one by the API; each listed by the other.
    let added = stdout(&cli(
        &db,
        &[
            "staff",
            "add",
            "--name",
            "Lucía Ferrer",
            "--wa-id",
            "699 00 01 11",
            "--zones",
            "Valencia;Ruzafa",
        ],
    ));
    assert!(
        added.starts_with("added A-01  Lucía Ferrer  …0111"),
        "{added}"
    );
    let (status, body) = service
        .admin(
            "POST",
            "/admin/staff",
            Some(json!({"name": "Marta Ruiz", "wa_id": "+34 699 000 777",
                        "notify_handoffs": true, "visit_minutes": 45})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body[0]["id"], json!("A-02"));
    assert_eq!(body[0]["wa_id"], json!("34699000777"));
    let (_, listed) = service.admin("GET", "/admin/staff", None).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Lucía Ferrer", "Marta Ruiz"]);
    let listed: Value =
        serde_json::from_str(&stdout(&cli(&db, &["staff", "list", "--json"]))).unwrap();
    assert_eq!(listed[1]["wa_id"], json!("34699000777"));
    assert_eq!(listed[1]["visit_minutes"], json!(45));

    // Refusals name the field and write nothing.
    let (status, body) = service
        .admin(
            "POST",
            "/admin/staff",
            Some(json!([{"name": "Otra", "wa_id": "699 000 777"}])),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("A-02"), "{body}");
    let (status, body) = service
        .admin(
            "PATCH",
            "/admin/staff/A-01",
            Some(json!({"visit_minutes": 3})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("visit_minutes"),
        "{body}"
    );
    let refused = cli(&db, &["staff", "add", "--name", "X", "--wa-id", "12"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("wa_id"));

    // A customer asking for a person reaches Marta, whom the API created.
    service
        .customer_says("34611400001", "Ana Torres", "Quiero hablar con una persona")
        .await;
    service
        .wait_for_message("34699000777", "+34611400001", Duration::from_secs(10))
        .await;
    assert_eq!(service.mentions("34699000111", "+34611400001"), 0);

    // An owner by the CLI, listed by the API; on their first message, an owner.
    let added = stdout(&cli(
        &db,
        &[
            "owners",
            "add",
            "--name",
            "Rosa Marín",
            "--wa-id",
            "+34 611 22 33 44",
            "--agent-id",
            "A-01",
        ],
    ));
    assert!(added.starts_with("added O-01  Rosa Marín"), "{added}");
    let (_, owners) = service.admin("GET", "/admin/owners", None).await;
    assert_eq!(owners[0]["agent_id"], json!("A-01"));
    assert_eq!(owners[0]["wa_id"], json!("34611223344"));
    let (status, body) = service
        .admin(
            "PATCH",
            "/admin/owners/O-01",
            Some(json!({"agent_id": "A-99"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    // Past the directory's miss refresh, as a real owner writes seconds after being added.
    tokio::time::sleep(zaguan::engine::roles::MISS_REFRESH).await;
    service
        .customer_says("34611223344", "Rosa", "Hola, ¿cómo va lo mío?")
        .await;
    service
        .wait_for_message("34611223344", "tus inmuebles", Duration::from_secs(10))
        .await;
    let owners_prompt = service
        .model
        .requests
        .lock()
        .unwrap()
        .iter()
        .any(|r| r.to_string().contains("Propietario O-01 (Rosa Marín)"));
    assert!(owners_prompt, "the owner's context reached the assistants");

    // Disabled: out of handoffs, the record kept.
    let disabled = stdout(&cli(&db, &["staff", "disable", "A-02"]));
    assert!(disabled.contains("disabled"), "{disabled}");
    let (_, listed) = service.admin("GET", "/admin/staff", None).await;
    assert!(listed[1]["disabled_at"].is_string(), "{listed}");
    drop(service);
    db.drop().await;
}
