//! `zaguan healthcheck [--url URL]`: asks a running `zaguan serve` for `GET /healthz`, for
//! container health checks (the image has no curl). Exit 0 on 200; exit 1 with one line on
//! stderr saying why otherwise. Reads only `ZAGUAN_BIND_ADDR`: a probe must not fail because
//! another variable is bad (`serve` says so itself at start-up).

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The whole check — connect, ask, read the status line — takes at most this long.
const TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub struct HealthcheckArgs {
    /// URL to GET instead of `http://127.0.0.1:<port of ZAGUAN_BIND_ADDR>/healthz` (http only).
    #[arg(long)]
    pub url: Option<String>,
}

/// Runs without the configuration or an async runtime: one blocking request.
pub fn run(args: &HealthcheckArgs) -> ExitCode {
    match check(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => {
            eprintln!("zaguan healthcheck: {reason}");
            ExitCode::FAILURE
        }
    }
}

fn check(args: &HealthcheckArgs) -> Result<(), String> {
    let (host, addr, path) = match &args.url {
        Some(url) => target_of_url(url)?,
        None => {
            let addr = local_addr_of_bind_addr()?;
            (addr.to_string(), addr, "/healthz".to_owned())
        }
    };
    let url = format!("http://{host}{path}");
    let status = get_status(&host, addr, &path).map_err(|why| format!("GET {url}: {why}"))?;
    if status == 200 {
        Ok(())
    } else {
        Err(format!("GET {url} answered {status}"))
    }
}

/// Where the local server listens: the port of `ZAGUAN_BIND_ADDR` (default `0.0.0.0:8080`),
/// on loopback when it binds every address, else on the address it binds.
fn local_addr_of_bind_addr() -> Result<SocketAddr, String> {
    let value = std::env::var("ZAGUAN_BIND_ADDR").unwrap_or_default();
    let value = match value.trim() {
        "" => "0.0.0.0:8080",
        set => set,
    };
    let bind: SocketAddr = value.parse().map_err(|_| {
        format!("ZAGUAN_BIND_ADDR: `{value}` is not an address like `0.0.0.0:8080`")
    })?;
    let ip = match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    Ok(SocketAddr::new(ip, bind.port()))
}

/// `(Host header, address, path and query)` of an `http://` URL.
fn target_of_url(raw: &str) -> Result<(String, SocketAddr, String), String> {
    let url = url::Url::parse(raw).map_err(|e| format!("--url `{raw}`: {e}"))?;
    if url.scheme() != "http" {
        return Err(format!("--url `{raw}`: only http:// URLs are supported"));
    }
    let host = url
        .host_str()
        .ok_or_else(|| format!("--url `{raw}` has no host"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let addr = (host.trim_start_matches('[').trim_end_matches(']'), port)
        .to_socket_addrs()
        .map_err(|e| format!("--url `{raw}`: cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("--url `{raw}`: {host} has no address"))?;
    let mut path = url.path().to_owned();
    if let Some(query) = url.query() {
        path = format!("{path}?{query}");
    }
    Ok((format!("{host}:{port}"), addr, path))
}

/// One HTTP/1.1 `GET` on a fresh connection; the status code of the answer.
fn get_status(host: &str, addr: SocketAddr, path: &str) -> Result<u16, String> {
    let deadline = Instant::now() + TIMEOUT;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let timed_out = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no answer within {TIMEOUT:?}")
        }
        _ => e.to_string(),
    };
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(timed_out)?;
    stream.set_write_timeout(Some(left())).map_err(timed_out)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: zaguan-healthcheck\r\nConnection: close\r\n\r\n"
    )
    .map_err(timed_out)?;
    // The status line is all we need: read until its end, within the deadline.
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 4096 {
        stream.set_read_timeout(Some(left())).map_err(timed_out)?;
        match stream.read(&mut buf).map_err(timed_out)? {
            0 => break,
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or_default();
    line.strip_prefix("HTTP/")
        .and_then(|rest| rest.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: `{}`", line.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_gives_host_address_and_path() {
        let (host, addr, path) = target_of_url("http://127.0.0.1:9000/readyz?x=1").unwrap();
        assert_eq!(host, "127.0.0.1:9000");
        assert_eq!(addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(path, "/readyz?x=1");
        assert!(target_of_url("https://example.com/healthz").is_err());
    }
}
