//! The real `zaguan` binary: configuration errors at start-up, serving with embedded defaults,
//! graceful shutdown on SIGTERM.

mod common;

use common::{free_port, zaguan};
use zaguan::store::{InboxStore, LeaseStore, OutboxStore};

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `GET path`: the status line.
fn http_get(port: u16, path: &str) -> Option<String> {
    http_response(port, path).and_then(|response| response.lines().next().map(str::to_owned))
}

/// `GET path`: the whole response, headers and body.
fn http_response(port: u16, path: &str) -> Option<String> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

fn wait_until_serving(child: &mut Child, port: u16) {
    // Generous: a debug build loading its language models, while the other tests of this file
    // start theirs on the same two cores, has taken over 20 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(status) = http_get(port, "/healthz") {
            assert!(status.contains("200"), "{status}");
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "zaguan exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("zaguan did not start listening on {port}");
}

/// `ZAGUAN_METRICS_ADDR` moves `/metrics` to a listener of its own: the public port no longer
/// serves it (404), the other does.
#[test]
fn metrics_can_move_off_the_public_port() {
    let (port, metrics_port) = (free_port(), free_port());
    let mut child = zaguan()
        .arg("serve")
        .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}"))
        .env("ZAGUAN_METRICS_ADDR", format!("127.0.0.1:{metrics_port}"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until_serving(&mut child, port);
    let public = http_get(port, "/metrics").unwrap();
    assert!(public.contains("404"), "{public}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let private = loop {
        if let Some(response) = http_response(metrics_port, "/metrics") {
            break response;
        }
        assert!(Instant::now() < deadline, "no metrics listener");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(private.starts_with("HTTP/1.1 200"), "{private}");
    assert!(private.contains("zaguan_"), "{private}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn bad_configuration_is_refused_with_one_line_per_variable() {
    let output = zaguan()
        .arg("serve")
        .env("ZAGUAN_BIND_ADDR", "localhost")
        .env("LLM_PRIMARY", "gpt-4.1-mini")
        .env("WHATSAPP_APP_SECRET", "do-not-print-me")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("ZAGUAN_BIND_ADDR: `localhost` is not an address"),
        "{stderr}"
    );
    assert!(
        stderr.contains("LLM_PRIMARY: expected `provider:model`"),
        "{stderr}"
    );
    assert!(!stderr.contains("do-not-print-me"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn serve_starts_with_embedded_defaults_and_stops_on_sigterm() {
    let port = free_port();
    let mut child = zaguan()
        .arg("serve")
        .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_serving(&mut child, port);
    assert!(http_get(port, "/readyz").unwrap().contains("200"));

    // SIGHUP reloads the prompts (the same files: nothing changes) instead of killing it.
    let status = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // A reload loads and trains the prompt set again: seconds in a debug build, more while the
    // rest of the suite shares the two cores.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let metrics = http_response(port, "/metrics").unwrap_or_default();
        if metrics.contains("zaguan_prompt_reloads_total{outcome=\"unchanged\"} 1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no reload counted after SIGHUP:\n{metrics}"
        );
        assert!(child.try_wait().unwrap().is_none(), "SIGHUP stopped zaguan");
        std::thread::sleep(Duration::from_millis(100));
    }

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "zaguan did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    for said in [
        "in-memory store",
        "WHATSAPP_APP_SECRET is unset",
        "dry run",
        "SIGHUP: reloading the prompts",
        "shutdown signal received",
    ] {
        assert!(
            logs.contains(said),
            "start-up logs do not say {said:?}:\n{logs}"
        );
    }
}

/// Three `zaguan serve` processes sharing one MongoDB, fed conversations × 5 messages through
/// `/webhook`, each message to an instance picked at random (rounds keep each conversation's
/// messages in order). After the second round one instance is SIGKILLed (its conversations
/// are taken over when their 10 s leases expire); after the third another is SIGTERMed (it
/// finishes its turns, releases its leases and exits in time). A webhook refused by a dead
/// instance goes to another, as Meta would retry it. At the end every message is `done`, each
/// turn has exactly one reply, every conversation is in order and no lease is left.
/// 100 conversations by default (CI); `ZAGUAN_SCALE_OUT_CONVERSATIONS=300` is the full run (on
/// FerretDB's SQLite backend, whose queries scan whole collections, it takes about 20 minutes
/// here). Offline
/// mode (no LLM), so each turn's reply is the primary agent's offline reply.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_survive_a_kill_and_a_drain_answering_each_turn_once_in_order() {
    use rand::{Rng, SeedableRng};

    let conversations: usize = std::env::var("ZAGUAN_SCALE_OUT_CONVERSATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    const MESSAGES: usize = 5;
    const KILLED: usize = 0;
    const DRAINED: usize = 1;
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let database = db.store.database().name().to_owned();
    let uri = std::env::var("MONGODB_URI").unwrap();
    let ports = [free_port(), free_port(), free_port()];
    let mut children: Vec<Option<Child>> = ports
        .iter()
        .map(|port| {
            Some(
                zaguan()
                    .arg("serve")
                    .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}"))
                    .env("MONGODB_URI", &uri)
                    .env("MONGODB_DATABASE", &database)
                    .env("WHATSAPP_APP_SECRET", common::APP_SECRET)
                    .env("ZAGUAN_LEASE", "10s")
                    .env("ZAGUAN_INSTANCE_ID", format!("instance-{port}"))
                    .env("ZAGUAN_DRAIN_TIMEOUT", "10s")
                    .env("RUST_LOG", "warn")
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    for (child, port) in children.iter_mut().zip(ports) {
        wait_until_serving(child.as_mut().unwrap(), port);
    }

    let mut rng = rand::rngs::StdRng::seed_from_u64(20261126);
    let mut alive = vec![true; ports.len()];
    let phone = |c: usize| format!("3463{c:07}");
    let started = Instant::now();
    let mut redirected = 0;
    let mut drain_took = Duration::ZERO;
    for m in 0..MESSAGES {
        if m == 2 {
            let mut child = children[KILLED].take().unwrap();
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            alive[KILLED] = false;
        }
        if m == 3 {
            let mut child = children[DRAINED].take().unwrap();
            let terminated = Instant::now();
            Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap();
            alive[DRAINED] = false;
            let exit = child.wait().unwrap();
            drain_took = terminated.elapsed();
            assert!(
                exit.success(),
                "the drained instance exits cleanly: {exit:?}"
            );
            assert!(
                drain_took < Duration::from_secs(15),
                "drained within its deadline: {drain_took:?}"
            );
        }
        let mut order: Vec<usize> = (0..conversations).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        for c in order {
            let id = format!("wamid.S{c}.{m}");
            let body = common::text_notification(&[(&id, &phone(c), &format!("c{c} m{m}"))]);
            let mut target = rng.random_range(0..ports.len());
            loop {
                if alive[target]
                    && let Some(status) = try_post_signed(ports[target], &body)
                {
                    assert!(status.contains("200"), "{status}");
                    break;
                }
                // Refused (dead instance): Meta retries, here on another one.
                redirected += 1;
                target = (target + 1) % ports.len();
            }
        }
    }
    let posted = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let open = db.store.conversations_with_open_inbox(1).await.unwrap();
        let unsent = db
            .store
            .conversations_with_unsent_outbox(chrono::Utc::now(), 1)
            .await
            .unwrap();
        if open.is_empty() && unsent.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "not drained in 600 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let answered = started.elapsed();
    // The survivor timed its database calls by command and collection: which round trips the
    // database spends its time on.
    let metrics = http_response(ports[2], "/metrics").unwrap_or_default();
    for series in [
        r#"zaguan_store_command_seconds_count{command="insert",collection="inbox",outcome="ok"}"#,
        r#"zaguan_store_command_seconds_count{command="find",collection="inbox",outcome="ok"}"#,
        r#"zaguan_store_command_seconds_count{command="insert",collection="outbox",outcome="ok"}"#,
    ] {
        let count: f64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix(series))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics:\n{metrics}"));
        assert!(count >= 1.0, "{series} {count}");
    }
    for mut child in children.into_iter().flatten() {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        assert!(child.wait().unwrap().success());
    }

    let mut turns = 0;
    for c in 0..conversations {
        let sent: Vec<String> = (0..MESSAGES).map(|m| format!("c{c} m{m}")).collect();
        let ids: Vec<String> = (0..MESSAGES).map(|m| format!("wamid.S{c}.{m}")).collect();
        turns += common::assert_answered_once_in_order(&db.store, &phone(c), &sent, &ids)
            .await
            .len();
    }
    assert_eq!(
        db.store
            .active_leases(chrono::Utc::now(), &[])
            .await
            .unwrap(),
        0,
        "no lease left"
    );
    eprintln!(
        "three instances: {} webhooks posted in {posted:?} ({redirected} redirected from dead \
         instances), drain took {drain_took:?}, all answered after {answered:?}: {turns} turns",
        conversations * MESSAGES,
    );
    db.drop().await;
}

/// POSTs a signed webhook body; `None` when the instance cannot be reached.
fn try_post_signed(port: u16, body: &[u8]) -> Option<String> {
    use std::io::Write;
    let signature = zaguan::webhook::signature::sign(common::APP_SECRET.as_bytes(), body);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    write!(
        stream,
        "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         X-Hub-Signature-256: {signature}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .ok()?;
    stream.write_all(body).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.lines().next().map(str::to_owned)
}

#[test]
fn serve_refuses_to_start_with_a_bad_prompt_set() {
    let dir = std::env::temp_dir().join(format!("zaguan-bad-prompts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("primary_assistant.md"), "+++\nname = \"primary_assistant\"\nkind = \"primary\"\nroles = [\"prospect\", \"sysadmin\"]\n+++\nHola\n").unwrap();
    let output = zaguan()
        .arg("serve")
        .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{}", free_port()))
        .env("ZAGUAN_PROMPTS_DIR", &dir)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("primary_assistant.md:4:"), "{stderr}");
    assert!(stderr.contains("sysadmin"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chat_answers_each_line_through_the_engine_and_shows_the_dialog_state() {
    let stdout = chat(
        &["--role", "owner"],
        "hola\n¿cómo va la venta de mi piso?\n",
    );
    // Offline mode: the owner's primary agent answers "hola" itself (its menu); the second
    // message names the owners' assistant by its keywords, which answers from the data.
    assert_eq!(stdout.matches("[dialog_state").count(), 2, "{stdout}");
    assert!(stdout.contains("Cómo va mi inmueble"), "{stdout}");
    assert_eq!(stdout.matches("[dialog_state: []]").count(), 1, "{stdout}");
    assert_eq!(
        stdout
            .matches(r#"[dialog_state: ["owner_info_assistant"]]"#)
            .count(),
        1,
        "{stdout}"
    );
}

/// No `--role`: a demo owner's number is an owner by the business data, from the first line.
#[test]
fn chat_as_an_owners_number_talks_as_an_owner_without_being_told() {
    let stdout = chat(
        &["--wa-id", "34600000005"],
        "hola\n¿cómo va la venta de mi piso?\n",
    );
    assert_eq!(
        stdout
            .matches(r#"[dialog_state: ["owner_info_assistant"]]"#)
            .count(),
        1,
        "{stdout}"
    );
    // The same words from a prospect's number never reach the owners' assistant.
    let stdout = chat(
        &["--wa-id", "34611000001"],
        "hola\n¿cómo va la venta de mi piso?\n",
    );
    assert!(!stdout.contains("owner_info_assistant"), "{stdout}");
}

/// Without `-v` the logs go to the log file, not between the lines of the dialogue; with it,
/// to stderr.
#[test]
fn chat_keeps_logs_out_of_the_dialogue_unless_asked() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("chat.log");
    let run = |extra: &[&str]| {
        let mut child = zaguan()
            .arg("chat")
            .args(extra)
            .env("RUST_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"Quiero agendar una visita\n")
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let quiet = run(&["--log-file", log.to_str().unwrap()]);
    assert!(quiet.status.success(), "{quiet:?}");
    let stdout = String::from_utf8_lossy(&quiet.stdout);
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(stdout.contains("bot> "), "{stdout}");
    for noise in ["INFO", "DEBUG", "ERROR", "WARN"] {
        assert!(
            !stdout.contains(noise) && !stderr.contains(noise),
            "{noise} in:\n{stdout}\n{stderr}"
        );
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("prompts loaded"), "{logged}");
    assert!(
        !logged.contains("ERROR"),
        "offline mode is not an error:\n{logged}"
    );
    let verbose = run(&["-v"]);
    assert!(String::from_utf8_lossy(&verbose.stderr).contains("prompts loaded"));
}

/// Runs `zaguan chat ARGS` with no LLM keys (offline mode), typing `input`; returns stdout.
fn chat(args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut child = zaguan()
        .arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The listing ids in the rows of a list `zaguan chat` printed («1) P-1031 · …»).
fn listed_ids(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().split_once(") ")?.1;
            rest.starts_with("P-")
                .then(|| rest.split(' ').next().unwrap_or_default().to_owned())
        })
        .collect()
}

/// Ordinary messages the offline reader once misread: a postal code is not the budget, and «de
/// 2 a 3 habitaciones» includes the two-bedroom listings. Each list is complete: every
/// available listing of the demo that matches.
#[test]
fn chat_without_a_model_reads_postal_codes_and_ranges_as_customers_mean_them() {
    use zaguan::realestate::{ListingStatus, Operation, PropertyType};
    let today = chrono::Utc::now()
        .with_timezone(&chrono_tz::Europe::Madrid)
        .date_naive();
    let set = zaguan::realestate::demo::demo_set(today, chrono_tz::Europe::Madrid);
    let matching = |f: &dyn Fn(&zaguan::realestate::Property) -> bool| {
        let mut ids: Vec<String> = set
            .properties
            .iter()
            .filter(|p| p.status == ListingStatus::Available && f(p))
            .map(|p| p.id.clone())
            .collect();
        ids.sort();
        ids
    };
    let sorted = |mut ids: Vec<String>| {
        ids.sort();
        ids
    };

    let stdout = chat(
        &["--wa-id", "34699000121"],
        "busco piso para comprar en Madrid en el 28010\n",
    );
    let madrid_for_sale = matching(&|p| {
        p.city == "Madrid" && p.operation == Operation::Sale && p.kind == PropertyType::Flat
    });
    assert!(!madrid_for_sale.is_empty());
    assert_eq!(sorted(listed_ids(&stdout)), madrid_for_sale, "{stdout}");

    let stdout = chat(
        &["--wa-id", "34699000122"],
        "de 2 a 3 habitaciones en Valencia para alquilar\n",
    );
    let valencia_two_plus =
        matching(&|p| p.city == "Valencia" && p.operation == Operation::Rent && p.bedrooms >= 2);
    assert!(
        set.properties
            .iter()
            .any(|p| valencia_two_plus.contains(&p.id) && p.bedrooms == 2),
        "the demo has two-bedroom flats to rent in Valencia"
    );
    let listed = sorted(listed_ids(&stdout));
    assert_eq!(listed, valencia_two_plus, "{stdout}");
    assert!(stdout.contains("🛏 2"), "{stdout}");
}

/// No key at all: the appointment assistant still answers an appointment request, from the
/// agency's data (it asks which listing), not with a refusal.
#[test]
fn chat_without_any_key_routes_by_keywords_to_the_offline_engine() {
    let stdout = chat(&[], "Quiero agendar una visita\n");
    assert!(stdout.contains("¿Qué inmueble?"), "{stdout}");
    assert!(stdout.contains("modo limitado"), "{stdout}");
    assert!(
        stdout.contains(r#"[dialog_state: ["appointment_assistant"]]"#),
        "{stdout}"
    );
}

/// What a newcomer types in the README's transcript.
const README_CHAT: [&str; 5] = [
    "busco piso de 2 habitaciones en Valencia para alquilar",
    "1",
    "1",
    "1",
    "1",
];

/// The README's first-minute transcript is what `zaguan chat` answers with no key: a search,
/// a listing with its photos, slots and a booked visit.
#[test]
fn the_readme_transcript_is_what_chat_answers_without_a_model() {
    let stdout = chat(
        &["--wa-id", "34699000113"],
        &(README_CHAT.join("\n") + "\n"),
    );
    let mut inputs = README_CHAT.iter();
    let mut transcript = String::new();
    for line in stdout.lines() {
        if line.trim_start().starts_with("[dialog_state") || line.starts_with("tú> dialog_state") {
            continue;
        }
        let line = match line.strip_prefix("tú> ") {
            // The prompt after the last line typed.
            Some("") => continue,
            Some(rest) => {
                transcript.push_str(&format!("tú> {}\n", inputs.next().unwrap()));
                rest
            }
            None => line,
        };
        if !line.is_empty() || !transcript.ends_with("\n\n") {
            transcript.push_str(line);
            transcript.push('\n');
        }
    }
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let block = readme
        .split("<!-- transcript: the_readme_transcript_is_what_chat_answers_without_a_model -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- /transcript -->").next())
        .expect("the README has the transcript block");
    let block = block
        .trim()
        .trim_start_matches("```text")
        .trim_end_matches("```")
        .trim();
    assert_eq!(
        stable(block),
        stable(transcript.trim()),
        "the README's transcript is out of date; today it reads:\n{transcript}"
    );
    assert!(transcript.contains("Visita reservada"), "{transcript}");
}

/// A transcript without what changes from day to day: the slots' days, hours and staff, the
/// appointment's id, how long ago the listing was published, and the slots after the first
/// (how many are left this week varies).
fn stable(transcript: &str) -> String {
    let rules = [
        (
            r"(lunes|martes|miércoles|jueves|viernes|sábado|domingo) \d{2}/\d{2}",
            "DAY",
        ),
        (r"\d{2}:\d{2}", "HH:MM"),
        (r"con [A-ZÁÉÍÓÚÑ][a-záéíóúñ]+", "con STAFF"),
        (r"A-P\d+-\d+-[0-9a-f]+", "A-ID"),
        // The demo's listings are dated from today, and the days since depend on the hour.
        (r"hace \d+ días", "hace N días"),
        (r"\n +[2-9]\) DAY · HH:MM — [^\n]*", ""),
    ];
    let mut text = transcript.to_owned();
    for (pattern, with) in rules {
        text = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&text, with)
            .into_owned();
    }
    text
}

/// `zaguan chat` against a local OpenAI-compatible server: the configured model answers.
#[test]
fn chat_uses_the_configured_openai_compatible_server() {
    use std::io::Write;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|body: axum::Json<serde_json::Value>| async move {
            assert_eq!(body["model"], "modelo-local");
            axum::Json(serde_json::json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "modelo-local",
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                    "message": {"role": "assistant", "content": "Hola desde el modelo", "refusal": null}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
            }))
        }),
    );
    let base = runtime.block_on(common::serve_local(app));

    let mut child = zaguan()
        .arg("chat")
        .env("LLM_PRIMARY", "openai:modelo-local")
        .env("OPENAI_BASE_URL", format!("{base}/v1"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hola\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("bot> Hola desde el modelo"), "{stdout}");
}

/// The primary model down (nothing listens at its URL): the fallback, an Anthropic-format
/// server, answers the turn.
#[test]
fn chat_falls_back_to_the_second_model_when_the_first_is_down() {
    use std::io::Write;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(|body: axum::Json<serde_json::Value>| async move {
            assert_eq!(body["model"], "claude-local");
            axum::Json(serde_json::json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-local",
                "content": [{"type": "text", "text": "Hola desde el respaldo"}],
                "stop_reason": "end_turn", "usage": {"input_tokens": 9, "output_tokens": 4}
            }))
        }),
    );
    let base = runtime.block_on(common::serve_local(app));

    let mut child = zaguan()
        .arg("chat")
        .env("LLM_PRIMARY", "openai:gpt-down")
        .env(
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{}/v1", free_port()),
        )
        .env("LLM_FALLBACK", "anthropic:claude-local")
        .env("ANTHROPIC_BASE_URL", &base)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hola\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("bot> Hola desde el respaldo"), "{stdout}");
}

/// A stand-in for a real model, by rules: enough of an LLM to drive `zaguan chat` through
/// search → visit booking (confirmed) → cancellation (confirmed) on the demo data, in the
/// OpenAI wire format. It reads the system prompt to know which assistant it is, and the ids
/// (P-…, S-…, A-…) from the tool results in the history, as a model would.
fn rule_model(body: &serde_json::Value) -> serde_json::Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    let last = messages.last().unwrap();
    let role = last["role"].as_str().unwrap_or_default();
    let content = last["content"].as_str().unwrap_or_default();
    let first_id = |prefix: &str| -> String {
        messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| m["content"].as_str())
            .flat_map(|c| c.split(|ch: char| ch.is_whitespace() || ch == '(' || ch == ')'))
            .find(|word| word.starts_with(prefix) && word.len() > prefix.len() + 2)
            .map(|w| w.trim_end_matches([':', ',', '.']).to_owned())
            .unwrap_or_default()
    };
    let call = |name: &str, args: serde_json::Value| {
        serde_json::json!({"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [{"id": format!("call_{}", messages.len()), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let say =
        |text: String| serde_json::json!({"role": "assistant", "content": text, "refusal": null});
    let message = if system.contains("especialista en búsqueda") {
        if role == "user" && content.contains("visita") {
            call(
                "CompleteOrEscalate",
                serde_json::json!({"cancel": false, "reason": "quiere visitar una propiedad"}),
            )
        } else if role == "user" || content.starts_with("The conversation is now handled") {
            call(
                "search_properties",
                serde_json::json!({"city": "Madrid", "operation": "sale", "page_size": 3}),
            )
        } else {
            say(format!(
                "Tengo varias opciones en Madrid; la más económica es {}. ¿Quieres visitarla?",
                first_id("P-")
            ))
        }
    } else if system.contains("especialista en citas") {
        if role == "user" && content.contains("ancela") {
            call("list_my_appointments", serde_json::json!({}))
        } else if role == "user" {
            call(
                "book_appointment",
                serde_json::json!({"slot_id": first_id("S-")}),
            )
        } else if content.starts_with("Waiting for the user's confirmation") {
            say("Pulsa «Confirmar» y queda hecho.".into())
        } else if content.starts_with("Visita reservada") {
            say("¡Hecho! Tu visita está reservada.".into())
        } else if content.contains("cancelada") {
            say("Listo, visita cancelada.".into())
        } else if content.starts_with("Visitas reservadas") {
            call(
                "cancel_appointment",
                serde_json::json!({"appointment_id": first_id("A-")}),
            )
        } else if content.starts_with("Huecos libres") {
            say(format!(
                "El primer hueco libre es {}. ¿Te lo reservo?",
                first_id("S-")
            ))
        } else {
            call(
                "list_available_slots",
                serde_json::json!({"property_id": first_id("P-")}),
            )
        }
    } else if role == "tool" && content.starts_with("Back with the primary") {
        call(
            "ToAppointmentAssistant",
            serde_json::json!({"query": format!("visitar {}", first_id("P-"))}),
        )
    } else {
        say("¿En qué más te puedo ayudar?".into())
    };
    serde_json::json!({
        "id": "chatcmpl-rules", "object": "chat.completion", "created": 1, "model": "rules",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null, "message": message}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    })
}

/// `zaguan chat` end to end on the demo data: search, book a visit, confirm, cancel it,
/// confirm — with the real binary, tools and confirmation buttons; only the model is a
/// stand-in (see `rule_model`).
#[test]
fn chat_searches_books_and_cancels_a_visit_on_the_demo_data() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|body: axum::Json<serde_json::Value>| async move {
            axum::Json(rule_model(&body))
        }),
    );
    let base = runtime.block_on(common::serve_local(app));
    let stdout = {
        use std::io::Write;
        let mut child = zaguan()
            .arg("chat")
            .env("LLM_PRIMARY", "openai:rules")
            .env("OPENAI_BASE_URL", format!("{base}/v1"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(
                "Busco un piso en Madrid para comprar\nQuiero agendar una visita\n\
                 Sí, resérvame ese\nConfirmar\nCancela la visita, por favor\n1\n"
                    .as_bytes(),
            )
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    eprintln!("{stdout}");
    for expected in [
        "la más económica es P-",
        "El primer hueco libre es S-",
        // The summary opens the buttons' message, after the assistant's words.
        "Visita a P-",
        "¡Hecho! Tu visita está reservada.",
        "Cancelar la visita a P-",
        // The confirmation's buttons are numbered; «1» pressed Confirm.
        "1) Confirmar",
        "Listo, visita cancelada.",
        r#"[dialog_state: ["appointment_assistant"]]"#,
    ] {
        assert!(
            stdout.contains(expected),
            "missing «{expected}» in:\n{stdout}"
        );
    }
}

/// `zaguan prompts check | head -1`: the command stops quietly when the reader goes, without a
/// panic on the closed pipe.
#[test]
fn a_command_piped_into_a_reader_that_stops_early_exits_quietly() {
    let mut child = zaguan()
        .args(["prompts", "check"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes before reading anything.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}
