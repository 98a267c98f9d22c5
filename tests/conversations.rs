//! `zaguan test`, through the real binary: the shipped conversation tests pass by replay with no
//! key and no network; one changed expectation fails naming its step; the recorder writes a
//! cassette against a local model, replays it without one, and shows what a prompt edit changed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::rule_model;

const SUITE: &str = "tests/conversations";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `zaguan test ARGS` with the shipped prompts (or `prompts`) and `env`, from the crate root.
async fn zaguan_test(args: &[&str], prompts: Option<&Path>, env: &[(&str, String)]) -> Output {
    let mut command = common::zaguan();
    command.current_dir(root()).arg("test").args(args).env(
        "ZAGUAN_PROMPTS_DIR",
        prompts.map_or_else(|| root().join("prompts"), Path::to_path_buf),
    );
    for (name, value) in env {
        command.env(name, value);
    }
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The variables that point `zaguan test --record` at `model`.
fn model_env(model: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_KEY", "sk-rules".to_owned()),
        ("OPENAI_BASE_URL", model.to_owned()),
        ("LLM_PRIMARY", "openai:rules".to_owned()),
        ("LLM_FALLBACK", "openai:rules".to_owned()),
    ]
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
}

/// The number before `what` in the summary line («37 passed, 0 failed…»).
fn count(output: &str, what: &str) -> usize {
    let summary = output
        .lines()
        .find(|l| l.contains(" passed, "))
        .unwrap_or_else(|| panic!("no summary in:\n{output}"));
    let summary = summary.split(" (").next().unwrap_or_default();
    summary
        .split(", ")
        .find_map(|part| part.trim().strip_suffix(what)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no «{what}» in {summary}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_conversations_pass_by_replay_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let started = std::time::Instant::now();
    let output = zaguan_test(&["--junit", junit.to_str().unwrap()], None, &[]).await;
    let took = started.elapsed();
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    let passed = count(&out, "passed");
    assert!(
        passed >= 30,
        "the shipped suite has at least 30 tests: {out}"
    );
    assert_eq!(count(&out, "failed"), 0);
    assert_eq!(count(&out, "need recording"), 0);
    eprintln!("conversation tests: {passed} passed by replay in {took:?}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), passed, "{xml}");
    assert!(!xml.contains("<failure"), "{xml}");
    // Every language and assistant the suite claims.
    for (what, needle) in [
        ("English", "lang: en"),
        ("Portuguese", "lang: pt"),
        ("a stale button", "step: 1}"),
        ("a voice note", "- voice:"),
        ("a reaction", "- react:"),
        ("a day passing", "- wait:"),
    ] {
        let shipped = std::fs::read_dir(root().join(SUITE))
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .any(|text| text.contains(needle));
        assert!(shipped, "the suite covers {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_expectation_fails_naming_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let suite = root().join(SUITE);
    copy(
        &suite.join("visits.cassette.yaml"),
        &dir.path().join("visits.cassette.yaml"),
    );
    let original = std::fs::read_to_string(suite.join("visits.yaml")).unwrap();
    let changed = original.replacen(
        "dialog_state: appointment_assistant",
        "dialog_state: searcher_assistant",
        1,
    );
    assert_ne!(original, changed);
    std::fs::write(dir.path().join("visits.yaml"), changed).unwrap();
    let output = zaguan_test(&[dir.path().to_str().unwrap()], None, &[]).await;
    let out = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(
        out.contains("FAIL a prospect books a visit and confirms it"),
        "{out}"
    );
    assert!(
        out.contains(
            "step 1 (user «Hola, ¿puedo ir a ver el piso P-1001 est…»): dialog_state: expected \
             searcher_assistant, got appointment_assistant"
        ),
        "{out}"
    );
    assert_eq!(count(&out, "failed"), 1, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorder_records_replays_and_shows_what_a_prompt_edit_changed() {
    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("tests");
    std::fs::create_dir(&tests).unwrap();
    copy(
        &root().join(SUITE).join("property.yaml"),
        &tests.join("property.yaml"),
    );
    let cassette = tests.join("property.cassette.yaml");
    let path = tests.to_str().unwrap();

    // Without a recording, a test that needs a model is not passed (the offline engine alone
    // passes the others).
    let output = zaguan_test(&[path], None, &[]).await;
    let out = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(count(&out, "need recording") >= 1, "{out}");
    assert!(
        out.contains("REC? from a search to a booked visit"),
        "{out}"
    );

    // --record: every call goes to the model, and the answers are kept.
    let model = rule_model::serve().await;
    let output = zaguan_test(&["--record", path], None, &model_env(&model)).await;
    assert!(output.status.success(), "{}", text(&output));
    let recorded = std::fs::read_to_string(&cassette).unwrap();
    assert!(recorded.contains("get_property_details"), "{recorded}");

    // Replayed with no key and no server.
    let output = zaguan_test(&[path], None, &[]).await;
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    assert_eq!(count(&out, "passed"), 4, "{out}");

    // A staff member edits the property assistant's prompt: the replay shows what changed.
    let prompts = dir.path().join("prompts");
    std::fs::create_dir(&prompts).unwrap();
    for entry in std::fs::read_dir(root().join("prompts")).unwrap() {
        let entry = entry.unwrap().path();
        copy(&entry, &prompts.join(entry.file_name().unwrap()));
    }
    let file = prompts.join("property_assistant.md");
    let edited = format!(
        "{}\nDa siempre el precio con el IBI incluido.\n",
        std::fs::read_to_string(&file).unwrap()
    );
    std::fs::write(&file, edited).unwrap();
    let output = zaguan_test(&[path], Some(&prompts), &[]).await;
    let out = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(
        out.contains("the property_assistant request differs from the recording"),
        "{out}"
    );
    assert!(
        out.contains("+ Da siempre el precio con el IBI incluido."),
        "{out}"
    );
    // Recording again with the edit passes.
    let output = zaguan_test(&["--record", path], Some(&prompts), &model_env(&model)).await;
    assert!(output.status.success(), "{}", text(&output));
    let output = zaguan_test(&[path], Some(&prompts), &[]).await;
    assert!(output.status.success(), "{}", text(&output));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_the_offline_engine_passes_needs_no_recording() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("person.yaml");
    std::fs::write(
        &file,
        "name: a person, without a model\nsteps:\n  - user: Quiero hablar con una persona\n    \
         expect:\n      handoff_requested: true\n      event: handoff.requested\n",
    )
    .unwrap();
    let output = zaguan_test(&[file.to_str().unwrap()], None, &[]).await;
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    assert!(out.contains("ok   a person, without a model (0."), "{out}");
    assert!(out.contains("0 model call(s)"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_through_the_webhook_becomes_a_test_without_personal_data() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    common::seeded_demo(&realestate).await;
    let mut service = common::service::Service::start(common::service::Options {
        rules: rule_model::completion,
        business: None,
        env: Vec::new(),
        mongo: Some(&db),
    })
    .await;
    let customer = "34655123456";
    let profile = "Rocío Quintanilla Berrocal";
    let wait = std::time::Duration::from_secs(10);
    service
        .customer_says(
            customer,
            profile,
            "Hola, me llamo Rocío Quintanilla. Mi móvil es 655 123 456 y vivo en la Calle del Pez 12",
        )
        .await;
    service.wait_for_message(customer, "asistente", wait).await;
    service
        .customer_says(customer, profile, "Quiero visitar el P-1001")
        .await;
    service.wait_for_message(customer, "confirm:", wait).await;
    let confirm = service
        .messages_to(customer)
        .into_iter()
        .find_map(|m| {
            m["interactive"]["action"]["buttons"]
                .as_array()?
                .iter()
                .find_map(|b| b["reply"]["id"].as_str().map(str::to_owned))
        })
        .unwrap();
    service
        .customer_sends(
            customer,
            profile,
            serde_json::json!({"type": "interactive", "interactive": {"type": "button_reply",
                "button_reply": {"id": confirm, "title": "Confirmar"}}}),
            chrono::Duration::zero(),
        )
        .await;
    service.wait_for_message(customer, "A-P1001", wait).await;
    drop(service);

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("exported.yaml");
    let mut command = common::zaguan();
    command
        .current_dir(root())
        .args(["conversations", "export-test", customer, "--out"])
        .arg(&out)
        .env("ZAGUAN_PROMPTS_DIR", root().join("prompts"))
        .env("MONGODB_URI", std::env::var("MONGODB_URI").unwrap())
        .env("MONGODB_DATABASE", db.store.database().name());
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("it passes by replay"), "{said}");
    let test = std::fs::read_to_string(&out).unwrap();
    let cassette = std::fs::read_to_string(dir.path().join("exported.cassette.yaml")).unwrap();
    for (what, text) in [("test", &test), ("cassette", &cassette)] {
        for personal in [
            "Rocío",
            "Quintanilla",
            "Berrocal",
            "655 123 456",
            "655123456",
            customer,
            "Pez 12",
        ] {
            assert!(
                !text.contains(personal),
                "«{personal}» in the {what}:\n{text}"
            );
        }
    }
    assert!(test.contains("tap: confirm"), "{test}");
    assert!(test.contains("appointment.booked"), "{test}");
    assert!(test.contains("pending_action: book_appointment"), "{test}");

    // The exported test passes on its own, by replay.
    let output = zaguan_test(&[out.to_str().unwrap()], None, &[]).await;
    assert!(output.status.success(), "{}\n{test}", text(&output));
    db.drop().await;
}

/// Records the shipped suite's cassettes against the rule model (`scripts/record-conversations`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes tests/conversations/*.cassette.yaml: run by scripts/record-conversations"]
async fn record_the_shipped_cassettes() {
    let model = rule_model::serve().await;
    let mut args = vec!["--record", SUITE];
    let filter = std::env::var("ZAGUAN_TEST_FILTER").ok();
    if let Some(filter) = &filter {
        args.extend(["--filter", filter.as_str()]);
    }
    let output = zaguan_test(&args, None, &model_env(&model)).await;
    println!("{}", text(&output));
    assert!(output.status.success(), "{}", text(&output));
}

mod rules {
    use crate::common::rule_model::*;

    #[test]
    fn the_rules_read_what_customers_write() {
        assert_eq!(lang_of("I'd like to book a visit please"), "en");
        assert_eq!(lang_of("Quero marcar uma visita ao apartamento"), "pt");
        assert_eq!(lang_of("Quiero ver el piso de la calle Colón"), "es");
        assert_eq!(amount("ofrezco 285.000 €"), Some(285_000));
        assert_eq!(amount("hasta 1200 al mes"), Some(1200));
        assert_eq!(bedrooms("busco 3 habitaciones en Valencia"), Some(3));
        assert_eq!(weekday("sí, pero el jueves"), Some("jueves"));
        assert_eq!(
            id_with("- S-P1001-202603051000 · jueves 05/03 a las 10:00", "S-"),
            Some("S-P1001-202603051000".to_owned())
        );
    }
}
