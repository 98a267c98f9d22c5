//! The real `zaguan` binary: configuration errors at start-up, serving with embedded defaults,
//! graceful shutdown on SIGTERM.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn zaguan() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zaguan"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    command
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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
    let deadline = Instant::now() + Duration::from_secs(20);
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
    let deadline = Instant::now() + Duration::from_secs(10);
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

/// Two `zaguan serve` processes sharing one MongoDB, fed 200 conversations × 5 messages
/// through `/webhook` (alternating between them): every message ends `done`, each turn has
/// exactly one reply, and every conversation's messages are in the order sent. Offline mode
/// (no LLM configured), so each turn's reply is the primary agent's offline reply.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_mongodb_answer_each_turn_once_and_in_order() {
    use zaguan::store::Store;

    // 200 × 5 as the design asks; ZAGUAN_TWO_INSTANCES_CONVERSATIONS runs a smaller or larger one.
    let conversations_wanted: usize = std::env::var("ZAGUAN_TWO_INSTANCES_CONVERSATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    const MESSAGES: usize = 5;
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let database = db.store.database().name().to_owned();
    let uri = std::env::var("MONGODB_URI").unwrap();
    let ports = [free_port(), free_port()];
    let mut children: Vec<Child> = ports
        .iter()
        .map(|port| {
            zaguan()
                .arg("serve")
                .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}"))
                .env("MONGODB_URI", &uri)
                .env("MONGODB_DATABASE", &database)
                .env("WHATSAPP_APP_SECRET", common::APP_SECRET)
                .env("RUST_LOG", "warn")
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for (child, port) in children.iter_mut().zip(ports) {
        wait_until_serving(child, port);
    }

    let phone = |c: usize| format!("3462{c:07}");
    let started = Instant::now();
    for m in 0..MESSAGES {
        for c in 0..conversations_wanted {
            let id = format!("wamid.TWO{c}.{m}");
            let body = common::text_notification(&[(&id, &phone(c), &format!("c{c} m{m}"))]);
            let port = ports[(c + m) % 2];
            let status = post_signed(port, &body);
            assert!(status.contains("200"), "{status}");
        }
    }
    let posted = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(240);
    while !db
        .store
        .conversations_with_open_inbox(1)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "inbox not drained in 240 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "two instances: {} webhooks posted in {posted:?}, all turns answered after {:?}",
        conversations_wanted * MESSAGES,
        started.elapsed()
    );
    for mut child in children {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }

    let mut turns = 0;
    for c in 0..conversations_wanted {
        let sent: Vec<String> = (0..MESSAGES).map(|m| format!("c{c} m{m}")).collect();
        let ids: Vec<String> = (0..MESSAGES).map(|m| format!("wamid.TWO{c}.{m}")).collect();
        turns += common::assert_answered_once_in_order(&db.store, &phone(c), &sent, &ids)
            .await
            .len();
    }
    eprintln!(
        "two instances: {turns} turns for {} messages",
        conversations_wanted * MESSAGES
    );
    db.drop().await;
}

/// POSTs a signed webhook body over a fresh connection; returns the status line.
fn post_signed(port: u16, body: &[u8]) -> String {
    use std::io::Write;
    let signature = zaguan::webhook::signature::sign(common::APP_SECRET.as_bytes(), body);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         X-Hub-Signature-256: {signature}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
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
    // Offline mode: the owner's primary agent answers "hola" itself; the second message names
    // the owners' assistant by its keywords, which answers with its own offline reply.
    assert_eq!(stdout.matches("bot> ").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("[dialog_state: []]").count(), 1, "{stdout}");
    assert_eq!(
        stdout
            .matches(r#"[dialog_state: ["owner_info_assistant"]]"#)
            .count(),
        1,
        "{stdout}"
    );
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

/// The acceptance check of offline mode: no key at all, and the appointment assistant still
/// answers an appointment request.
#[test]
fn chat_without_any_key_routes_by_keywords_to_the_offline_reply() {
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry =
        zaguan::agents::AgentRegistry::load(&prompts, &zaguan::agents::known_tools()).unwrap();
    let offline = registry
        .get("appointment_assistant")
        .and_then(|a| a.offline_reply.clone())
        .unwrap();
    let stdout = chat(&[], "Quiero agendar una visita\n");
    assert!(stdout.contains(&format!("bot> {offline}")), "{stdout}");
    assert!(
        stdout.contains(r#"[dialog_state: ["appointment_assistant"]]"#),
        "{stdout}"
    );
}

/// `zaguan chat` against a local OpenAI-compatible server: the configured model answers.
#[test]
fn chat_uses_the_configured_openai_compatible_server() {
    use std::io::Write;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
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
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut child = zaguan()
        .arg("chat")
        .env("LLM_PRIMARY", "openai:modelo-local")
        .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
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
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
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
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut child = zaguan()
        .arg("chat")
        .env("LLM_PRIMARY", "openai:gpt-down")
        .env(
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{}/v1", free_port()),
        )
        .env("LLM_FALLBACK", "anthropic:claude-local")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
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
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|body: axum::Json<serde_json::Value>| async move {
            axum::Json(rule_model(&body))
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    let stdout = {
        use std::io::Write;
        let mut child = zaguan()
            .arg("chat")
            .env("LLM_PRIMARY", "openai:rules")
            .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
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
                 Sí, resérvame ese\nConfirmar\nCancela la visita, por favor\nConfirmar\n"
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
        "bot> Visita a P-",
        "¡Hecho! Tu visita está reservada.",
        "bot> Cancelar la visita a P-",
        "Listo, visita cancelada.",
        r#"[dialog_state: ["appointment_assistant"]]"#,
    ] {
        assert!(
            stdout.contains(expected),
            "missing «{expected}» in:\n{stdout}"
        );
    }
}
