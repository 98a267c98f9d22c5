//! Load generator for `POST /webhook`: measures acknowledgements per second and latency
//! percentiles of the webhook ingress on loopback.
//!
//! Each of `--connections` tasks owns one keep-alive HTTP/1.1 connection and sends signed,
//! realistic Cloud API text notifications (~2 KB each, unique `wamid` per message, salted with a
//! run nonce). Without `--rate` it runs closed-loop (as fast as the server answers); with
//! `--rate` it schedules every request at a fixed time and measures latency from that intended
//! time, so a stalled server is not hidden by coordinated omission.
//!
//! ```sh
//! WHATSAPP_APP_SECRET=load-secret ZAGUAN_BIND_ADDR=127.0.0.1:8080 ./target/release/zaguan serve &
//! cargo run --release --example webhook_load -- --duration 10
//! cargo run --release --example webhook_load -- --rate 2000 --duration 10
//! ```
//!
//! Prints a summary and one JSON line starting with `{"bench":"webhook_load"`.

use std::error::Error;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::{sleep, sleep_until, timeout};

type BoxError = Box<dyn Error + Send + Sync>;
const TIMEOUT: Duration = Duration::from_secs(10);
const NAMES: [&str; 10] = [
    "María José",
    "Íñigo",
    "Begoña",
    "Raúl",
    "Sofía",
    "Ángel",
    "Lucía",
    "Joaquín",
    "Inés",
    "Andrés",
];
const SURNAMES: [&str; 8] = [
    "Núñez",
    "Gómez",
    "Martínez",
    "Peña",
    "Jiménez",
    "Ibáñez",
    "Muñoz",
    "Álvarez",
];
const SENTENCES: [&str; 10] = [
    "Hola, buenas tardes. He visto en el portal el ático de la calle Alcalá y me interesa muchísimo.",
    "¿Podríais decirme si el precio es negociable y si incluye la plaza de garaje y el trastero?",
    "Somos una familia de cuatro personas y buscamos algo cerca de un colegio público en Chamberí.",
    "Me gustaría saber cuántos metros útiles tiene, la orientación y si la cocina está reformada.",
    "¿Qué gastos de comunidad tiene al mes? ¿Y el IBI aproximado del último año?",
    "También nos encaja un piso en Málaga o en Cádiz, siempre que tenga terraza y ascensor.",
    "Podría ir a verlo el jueves por la mañana o el sábado después de las diez, según os venga mejor.",
    "Tenemos la hipoteca preaprobada con el banco, así que podríamos avanzar rápido con la señal.",
    "¿Admitís mascotas? Tenemos un perro pequeño, muy tranquilo, que no da ningún problema.",
    "Mi pareja trabaja en León y yo en Logroño, así que valoraríamos también una opción intermedia.",
];

#[derive(Parser, Debug)]
#[command(about = "Load generator for POST /webhook (acks/s and latency percentiles)")]
struct Args {
    #[arg(long, default_value = "http://127.0.0.1:8080/webhook")]
    url: Uri,
    /// HMAC secret the server has as WHATSAPP_APP_SECRET.
    #[arg(long, default_value = "load-secret")]
    secret: String,
    /// Concurrent keep-alive HTTP/1.1 connections.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    connections: u64,
    /// Measured seconds (after the warm-up).
    #[arg(long, default_value_t = 10.0, value_parser = positive)]
    duration: f64,
    /// Requests per second, open loop; absent: closed loop, as fast as possible.
    #[arg(long, value_parser = positive)]
    rate: Option<f64>,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    messages_per_request: u32,
    /// Simulated senders.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    users: u64,
    /// Warm-up seconds, excluded from the figures.
    #[arg(long, default_value_t = 1.0, value_parser = non_negative)]
    warmup: f64,
    /// Fraction of requests (0..1) that re-send an earlier body, as Meta redelivers.
    #[arg(long, default_value_t = 0.0, value_parser = fraction)]
    duplicates: f64,
}

fn non_negative(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("`{s}`: {e}"))?;
    (v.is_finite() && v >= 0.0)
        .then_some(v)
        .ok_or_else(|| format!("`{s}` is not >= 0"))
}
fn positive(s: &str) -> Result<f64, String> {
    let v = non_negative(s)?;
    (v > 0.0)
        .then_some(v)
        .ok_or_else(|| format!("`{s}` is not > 0"))
}
fn fraction(s: &str) -> Result<f64, String> {
    let v = non_negative(s)?;
    (v <= 1.0)
        .then_some(v)
        .ok_or_else(|| format!("`{s}` is not in 0..=1"))
}

/// SplitMix64: a fast, good-enough generator for picking senders and texts.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix(*state)
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sextets = |c: &[u8]| {
        let n = u32::from(c[0]) << 16 | u32::from(c[1]) << 8 | u32::from(c[2]);
        [18, 12, 6, 0].map(|s| ALPHABET[(n >> s & 63) as usize] as char)
    };
    bytes.chunks_exact(3).flat_map(sextets).collect()
}

/// Builds notifications; the texts (~1.3 KB each) are composed once at start-up.
struct Generator {
    texts: Vec<String>,
    nonce: u64,
    users: u64,
    per_request: u32,
}

impl Generator {
    fn new(args: &Args) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let nonce = mix(nanos as u64 ^ u64::from(std::process::id()) << 32);
        let mut rng = nonce;
        let texts = (0..16)
            .map(|_| {
                let mut text = String::new();
                while text.len() < 1250 {
                    text.push_str(SENTENCES[(next(&mut rng) % SENTENCES.len() as u64) as usize]);
                    text.push(' ');
                }
                text + "¡Muchas gracias! 🏠😊"
            })
            .collect();
        Self {
            texts,
            nonce,
            users: args.users,
            per_request: args.messages_per_request,
        }
    }

    fn notification(&self, rng: &mut u64, worker: u32, seq: u64) -> String {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let (mut contacts, mut messages) = (String::new(), String::new());
        for m in 0..self.per_request {
            let user = next(rng) % self.users;
            let (phone, sep) = (format!("346{user:08}"), if m == 0 { "" } else { "," });
            let name = format!(
                "{} {}",
                NAMES[(user % 10) as usize],
                SURNAMES[(user / 10 % 8) as usize]
            );
            let user_id = mix(user) % 10_000_000_000_000_000_000;
            let _ = write!(
                contacts,
                r#"{sep}{{"profile":{{"name":"{name}"}},"wa_id":"{phone}","user_id":"ES.{user_id:019}"}}"#
            );
            let mut id = [0u8; 24];
            id[..8].copy_from_slice(&self.nonce.to_be_bytes());
            id[8..12].copy_from_slice(&worker.to_be_bytes());
            id[12..20].copy_from_slice(&seq.to_be_bytes());
            id[20..].copy_from_slice(&m.to_be_bytes());
            let (wamid, text) = (base64(&id), &self.texts[(next(rng) % 16) as usize]);
            let _ = write!(
                messages,
                r#"{sep}{{"from":"{phone}","id":"wamid.HBgL{wamid}","timestamp":"{ts}","type":"text","text":{{"body":"{text}"}}}}"#
            );
        }
        format!(
            r#"{{"object":"whatsapp_business_account","entry":[{{"id":"102290129340398","changes":[{{"field":"messages","value":{{"messaging_product":"whatsapp","metadata":{{"display_phone_number":"34910000000","phone_number_id":"109876543210"}},"contacts":[{contacts}],"messages":[{messages}]}}}}]}}]}}"#
        )
    }
}

#[derive(Default)]
struct Stats {
    hist: Option<Histogram<u64>>,
    ok: u64,
    client: u64,
    server: u64,
    other: u64,
    errors: u64,
    unsent: u64,
}

struct Run {
    args: Args,
    generator: Generator,
    addr: String,
    host: HeaderValue,
    path: Uri,
    start: Instant,
    measure_from: Instant,
    end: Instant,
}

async fn connect(addr: &str) -> Result<SendRequest<Full<Bytes>>, BoxError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn send(
    conn: &mut Option<SendRequest<Full<Bytes>>>,
    run: &Run,
    request: Request<Full<Bytes>>,
) -> Result<u16, BoxError> {
    if conn.as_ref().is_none_or(SendRequest::is_closed) {
        *conn = Some(connect(&run.addr).await?);
    }
    let sender = conn.as_mut().expect("connected above");
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok(status)
}

async fn worker(run: Arc<Run>, id: u64) -> Stats {
    let args = &run.args;
    let mut stats = Stats {
        hist: Some(Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds")),
        ..Stats::default()
    };
    let hist = stats.hist.as_mut().expect("just set");
    let mut rng = mix(run.generator.nonce ^ id);
    let mut conn = connect(&run.addr).await.ok();
    let mut recent: Vec<(Bytes, HeaderValue)> = Vec::with_capacity(64);
    let slot = |k: u64| {
        args.rate
            .map(|r| run.start + Duration::from_secs_f64((k * args.connections + id) as f64 / r))
    };
    let mut k = 0;
    loop {
        let reuse = args.duplicates > 0.0
            && !recent.is_empty()
            && (next(&mut rng) >> 11) as f64 / (1u64 << 53) as f64 <= args.duplicates;
        let (body, signature) = if reuse {
            recent[(next(&mut rng) % recent.len() as u64) as usize].clone()
        } else {
            let body = Bytes::from(run.generator.notification(&mut rng, id as u32, k));
            let signature = HeaderValue::from_str(&zaguan::webhook::signature::sign(
                args.secret.as_bytes(),
                &body,
            ))
            .expect("hex");
            if recent.len() < 64 {
                recent.push((body.clone(), signature.clone()))
            } else {
                recent[(k % 64) as usize] = (body.clone(), signature.clone())
            }
            (body, signature)
        };
        let intended = slot(k);
        match intended {
            Some(at) if at >= run.end => break,
            Some(_) if Instant::now() >= run.end => {
                // Behind schedule at the deadline: count what was never sent.
                while let Some(at) = slot(k).filter(|at| *at < run.end) {
                    stats.unsent += u64::from(at >= run.measure_from);
                    k += 1;
                }
                break;
            }
            Some(at) => sleep_until(at.into()).await,
            None if Instant::now() >= run.end => break,
            None => {}
        }
        let request = Request::builder()
            .method(Method::POST)
            .uri(run.path.clone())
            .header(HOST, run.host.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, "zaguan-webhook-load")
            .header("x-hub-signature-256", signature)
            .body(Full::new(body))
            .expect("valid request");
        let started = intended.unwrap_or_else(Instant::now);
        let outcome = timeout(TIMEOUT, send(&mut conn, &run, request)).await;
        let measured = started >= run.measure_from;
        k += 1;
        match outcome {
            Ok(Ok(status)) if measured => {
                hist.saturating_record(started.elapsed().as_micros() as u64);
                match status {
                    200..=299 => stats.ok += 1,
                    400..=499 => stats.client += 1,
                    500..=599 => stats.server += 1,
                    _ => stats.other += 1,
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => {
                conn = None;
                stats.errors += u64::from(measured);
                sleep(Duration::from_millis(10)).await;
            }
        }
    }
    stats
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    if args.url.scheme_str() != Some("http") {
        return Err("only http:// URLs are supported".into());
    }
    let authority = args.url.authority().ok_or("the URL has no host")?.clone();
    let addr = format!(
        "{}:{}",
        authority.host(),
        authority.port_u16().unwrap_or(80)
    );
    connect(&addr)
        .await
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let generator = Generator::new(&args);
    let body_bytes = generator.notification(&mut 0, 0, 0).len();
    let start = Instant::now() + Duration::from_millis(200);
    let measure_from = start + Duration::from_secs_f64(args.warmup);
    let end = measure_from + Duration::from_secs_f64(args.duration);
    let path = args
        .url
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()?;
    let run = Arc::new(Run {
        host: HeaderValue::from_str(authority.as_str())?,
        path,
        addr,
        generator,
        start,
        measure_from,
        end,
        args,
    });
    let tasks: Vec<_> = (0..run.args.connections)
        .map(|id| tokio::spawn(worker(run.clone(), id)))
        .collect();
    let mut total = Stats {
        hist: Some(Histogram::new_with_bounds(1, 60_000_000, 3)?),
        ..Stats::default()
    };
    for task in tasks {
        let s = task.await?;
        total
            .hist
            .as_mut()
            .expect("set")
            .add(s.hist.expect("set"))?;
        (total.ok, total.client, total.server) = (
            total.ok + s.ok,
            total.client + s.client,
            total.server + s.server,
        );
        (total.other, total.errors, total.unsent) = (
            total.other + s.other,
            total.errors + s.errors,
            total.unsent + s.unsent,
        );
    }
    let hist = total.hist.expect("set");
    let a = &run.args;
    let requests = hist.len() + total.errors;
    let acks = total.ok as f64 / a.duration;
    let ms = |us: u64| us as f64 / 1000.0;
    let [p50, p90, p99, p999] =
        [50.0, 90.0, 99.0, 99.9].map(|q| ms(hist.value_at_quantile(q / 100.0)));
    let (max, mean) = (ms(hist.max()), hist.mean() / 1000.0);
    let mode = a.rate.map_or("closed loop".to_owned(), |r| {
        format!("open loop at {r} req/s")
    });
    println!(
        "webhook_load: POST {} | {} connections, {mode}, {} s (+{} s warm-up)",
        a.url, a.connections, a.duration, a.warmup
    );
    println!(
        "  {} msg/request, {} users, {:.0}% duplicates, body {body_bytes} B",
        a.messages_per_request,
        a.users,
        a.duplicates * 100.0
    );
    println!(
        "  requests  {requests}  (2xx {}, 4xx {}, 5xx {}, other {}, errors {}, unsent {})",
        total.ok, total.client, total.server, total.other, total.errors, total.unsent
    );
    println!(
        "  acks/s    {acks:.1}  (messages/s {:.1})",
        acks * f64::from(a.messages_per_request)
    );
    println!(
        "  latency   p50 {p50:.3} ms  p90 {p90:.3} ms  p99 {p99:.3} ms  p99.9 {p999:.3} ms  max {max:.3} ms  mean {mean:.3} ms"
    );
    println!(
        r#"{{"bench":"webhook_load","url":{},"mode":"{}","rate":{},"connections":{},"duration_s":{},"warmup_s":{},"messages_per_request":{},"users":{},"duplicates":{},"body_bytes":{body_bytes},"requests":{requests},"acks_per_s":{acks:.1},"messages_per_s":{:.1},"p50_ms":{p50:.3},"p90_ms":{p90:.3},"p99_ms":{p99:.3},"p999_ms":{p999:.3},"max_ms":{max:.3},"mean_ms":{mean:.3},"status_2xx":{},"status_4xx":{},"status_5xx":{},"status_other":{},"errors":{},"unsent":{}}}"#,
        serde_json::to_string(&a.url.to_string())?,
        if a.rate.is_some() { "open" } else { "closed" },
        serde_json::to_string(&a.rate)?,
        a.connections,
        a.duration,
        a.warmup,
        a.messages_per_request,
        a.users,
        a.duplicates,
        acks * f64::from(a.messages_per_request),
        total.ok,
        total.client,
        total.server,
        total.other,
        total.errors,
        total.unsent
    );
    Ok(())
}
