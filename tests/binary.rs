//! The real `zaguan` binary: configuration errors at start-up, serving with embedded defaults,
//! graceful shutdown on SIGTERM.

use std::io::Read;
use std::net::TcpListener;
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

/// Polls `GET path` until the server answers; returns the status line.
fn http_get(port: u16, path: &str) -> Option<String> {
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
    response.lines().next().map(str::to_owned)
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
        "shutdown signal received",
    ] {
        assert!(
            logs.contains(said),
            "start-up logs do not say {said:?}:\n{logs}"
        );
    }
}
