//! Load generator for `POST /webhook`: measures acknowledgements per second and latency
//! percentiles of the webhook ingress on loopback.
//!
//! Each of `--connections` tasks owns one keep-alive HTTP/1.1 connection and sends signed,
//! realistic Cloud API text notifications (~2 KB each, unique `wamid` per message, salted with a
//! run nonce). Without `--rate` it runs closed-loop (as fast as the server answers). With `--rate`
//! a pacer thread (OS sleeps, finer than tokio's 1 ms timer) releases one send slot every
//! 1/rate s and the first free connection takes it; latency is measured from the slot's intended
//! time, so a stalled server is not hidden by coordinated omission, and slots never taken by the
//! deadline are reported as `unsent`.
//!
//! ```sh
//! WHATSAPP_APP_SECRET=load-secret ZAGUAN_BIND_ADDR=127.0.0.1:8080 ./target/release/zaguan serve &
//! cargo run --release --example webhook_load -- --duration 10
//! cargo run --release --example webhook_load -- --rate 2000 --duration 10
//! ```
//!
//! Prints a summary and one JSON line starting with `{"bench":"webhook_load"`.

use std::error::Error;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::{sleep, timeout};

type BoxError = Box<dyn Error + Send + Sync>;
const TIMEOUT: Duration = Duration::from_secs(10);
const NAMES: &str = "María José|Íñigo|Begoña|Raúl|Sofía|Ángel|Lucía|Joaquín|Inés|Andrés";
const SURNAMES: &str = "Núñez|Gómez|Martínez|Peña|Jiménez|Ibáñez|Muñoz|Álvarez|Sáenz|Cortés";
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
    #[arg(long, default_value_t = 10.0, value_parser = |s: &str| number(s, 1e-3..1e6))]
    duration: f64,
    /// Requests per second, open loop; absent: closed loop, as fast as possible.
    #[arg(long, value_parser = |s: &str| number(s, 1e-3..1e9))]
    rate: Option<f64>,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    messages_per_request: u32,
    /// Simulated senders.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    users: u64,
    /// Warm-up seconds, excluded from the figures.
    #[arg(long, default_value_t = 1.0, value_parser = |s: &str| number(s, 0.0..1e6))]
    warmup: f64,
    /// Fraction of requests (0..1) that re-send an earlier body, as Meta redelivers.
    #[arg(long, default_value_t = 0.0, value_parser = |s: &str| number(s, 0.0..=1.0))]
    duplicates: f64,
}

fn number(s: &str, range: impl RangeBounds<f64> + Debug) -> Result<f64, String> {
    let value: f64 = s.parse().map_err(|e| format!("{e}"))?;
    match range.contains(&value) {
        true => Ok(value),
        false => Err(format!("{value} is not in {range:?}")),
    }
}

/// SplitMix64: a fast, good-enough generator for picking senders, texts and duplicates.
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

fn since_epoch() -> Duration {
    let now = SystemTime::now();
    now.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Everything the workers share: the options, the body ingredients, the target and the clock.
struct Run {
    args: Args,
    names: Vec<String>,
    texts: Vec<String>,
    nonce: u64,
    addr: String,
    host: HeaderValue,
    path: Uri,
    /// First intended send, start of the measured window, end of the run.
    times: [Instant; 3],
    /// Open loop: a permit per due slot (added by the pacer thread), the next slot's index.
    pacer: Option<(Semaphore, AtomicU64)>,
}

impl Run {
    /// A notification of `--messages-per-request` text messages with unique wamids.
    fn notification(&self, rng: &mut u64, worker: u64, seq: u64) -> String {
        let (ts, mut contacts, mut messages) = (since_epoch().as_secs(), vec![], vec![]);
        for m in 0..self.args.messages_per_request {
            let user = next(rng) % self.args.users;
            let phone = format!("346{user:08}");
            let name = &self.names[user as usize % self.names.len()];
            let user_id = mix(user) % 10_000_000_000_000_000_000;
            contacts.push(format!(
                r#"{{"profile":{{"name":"{name}"}},"wa_id":"{phone}","user_id":"ES.{user_id:019}"}}"#
            ));
            let id = [self.nonce, mix(worker << 32 | u64::from(m)), mix(seq)].map(u64::to_be_bytes);
            let (wamid, text) = (
                hex::encode_upper(id.concat()),
                &self.texts[next(rng) as usize % 16],
            );
            messages.push(format!(
                r#"{{"from":"{phone}","id":"wamid.HBgL{wamid}","timestamp":"{ts}","type":"text","text":{{"body":"{text}"}}}}"#
            ));
        }
        let (contacts, messages) = (contacts.join(","), messages.join(","));
        format!(
            r#"{{"object":"whatsapp_business_account","entry":[{{"id":"102290129340398","changes":[{{"field":"messages","value":{{"messaging_product":"whatsapp","metadata":{{"display_phone_number":"34910000000","phone_number_id":"109876543210"}},"contacts":[{contacts}],"messages":[{messages}]}}}}]}}]}}"#
        )
    }
}

/// Intended send time of open-loop slot `k`.
fn slot(start: Instant, rate: f64, k: u64) -> Instant {
    start + Duration::from_secs_f64(k as f64 / rate)
}

/// Latencies (µs) and counts: 2xx, 4xx, 5xx, other statuses, errors/timeouts, slots taken.
struct Stats(Histogram<u64>, [u64; 6]);

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

type Body = Full<Bytes>;
type Conn = SendRequest<Body>;

async fn connect(addr: &str) -> Result<Conn, BoxError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn send(conn: &mut Option<Conn>, addr: &str, req: Request<Body>) -> Result<u16, BoxError> {
    if conn.as_ref().is_none_or(Conn::is_closed) {
        *conn = Some(connect(addr).await?);
    }
    let sender = conn.as_mut().expect("connected above");
    sender.ready().await?;
    let response = sender.send_request(req).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok(status)
}

/// One connection's loop: build (or re-use) a body, take a slot if open loop, send it.
async fn worker(run: Arc<Run>, id: u64) -> Stats {
    let (args, [start, measure_from, end]) = (&run.args, run.times);
    let (mut stats, mut rng) = (Stats(histogram(), [0; 6]), mix(run.nonce ^ id));
    let mut conn = connect(&run.addr).await.ok();
    let mut recent: Vec<(Bytes, HeaderValue)> = Vec::with_capacity(64);
    for k in 0.. {
        let coin = (next(&mut rng) >> 11) as f64 / (1u64 << 53) as f64;
        let (body, signature) = if !recent.is_empty() && coin < args.duplicates {
            recent[next(&mut rng) as usize % recent.len()].clone()
        } else {
            let body = Bytes::from(run.notification(&mut rng, id, k));
            let signature = zaguan::webhook::signature::sign(args.secret.as_bytes(), &body);
            let fresh = (body, HeaderValue::try_from(signature).expect("hex"));
            recent.truncate(63);
            recent.insert(0, fresh.clone());
            fresh
        };
        let intended = match (&run.pacer, args.rate) {
            (Some((permits, next)), Some(rate)) => {
                let Ok(permit) = permits.acquire().await else {
                    break; // the deadline passed
                };
                permit.forget();
                stats.1[5] += 1;
                Some(slot(start, rate, next.fetch_add(1, Ordering::Relaxed)))
            }
            _ if Instant::now() >= end => break,
            _ => None,
        };
        let request = Request::post(run.path.clone())
            .header(HOST, run.host.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, "zaguan-webhook-load")
            .header("x-hub-signature-256", signature)
            .body(Full::new(body))
            .expect("valid request");
        let started = intended.unwrap_or_else(Instant::now);
        let outcome = timeout(TIMEOUT, send(&mut conn, &run.addr, request)).await;
        let done = Instant::now();
        // Latency by (intended) start, counts by completion, each within the measured window.
        if started >= measure_from && matches!(outcome, Ok(Ok(_))) {
            let micros = done.duration_since(started).as_micros();
            stats.0.saturating_record(micros as u64);
        }
        let class = match outcome {
            Ok(Ok(200..=299)) => 0,
            Ok(Ok(400..=499)) => 1,
            Ok(Ok(500..=599)) => 2,
            Ok(Ok(_)) => 3,
            Ok(Err(_)) | Err(_) => 4,
        };
        stats.1[class] += u64::from((measure_from..end).contains(&done));
        if class == 4 {
            conn = None;
            sleep(Duration::from_millis(10)).await;
        }
    }
    stats
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let authority = match (args.url.scheme_str(), args.url.authority()) {
        (Some("http"), Some(authority)) => authority.clone(),
        _ => return Err("--url must be http://host[:port]/path".into()),
    };
    let port = authority.port_u16().unwrap_or(80);
    let addr = format!("{}:{port}", authority.host());
    if let Err(e) = connect(&addr).await {
        return Err(format!("cannot connect to {addr}: {e}").into());
    }
    let nonce = mix(since_epoch().as_nanos() as u64 ^ u64::from(std::process::id()) << 32);
    let mut rng = nonce;
    let mut texts = vec![String::new(); 16];
    for text in &mut texts {
        while text.len() < 1440 {
            *text += SENTENCES[next(&mut rng) as usize % SENTENCES.len()];
            *text += " ";
        }
        *text += "¡Muchas gracias! 🏠😊";
    }
    let full_names = |n| SURNAMES.split('|').map(move |s| format!("{n} {s}"));
    let names = NAMES.split('|').flat_map(full_names).collect();
    let path = Uri::try_from(args.url.path_and_query().map_or("/", |p| p.as_str()))?;
    let host = HeaderValue::from_str(authority.as_str())?;
    let start = Instant::now() + Duration::from_millis(200);
    let measure_from = start + Duration::from_secs_f64(args.warmup);
    let end = measure_from + Duration::from_secs_f64(args.duration);
    let times = [start, measure_from, end];
    let pacer = args.rate.map(|_| (Semaphore::new(0), AtomicU64::new(0)));
    let run = Arc::new(Run {
        args,
        names,
        texts,
        nonce,
        addr,
        host,
        path,
        times,
        pacer,
    });
    // The pacer: OS sleeps are precise to tens of µs where tokio's timer has 1 ms ticks.
    let pacer = run.args.rate.map(|rate| {
        let run = run.clone();
        std::thread::spawn(move || {
            let permits = &run.pacer.as_ref().expect("open loop").0;
            let mut released = 0;
            for at in (0..)
                .map(|k| slot(start, rate, k))
                .take_while(|at| *at < end)
            {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                permits.add_permits(1);
                released += 1;
            }
            std::thread::sleep(end.saturating_duration_since(Instant::now()));
            permits.close();
            released
        })
    });
    let body_bytes = run.notification(&mut 0, 0, 0).len();

    let mut total = Stats(histogram(), [0; 6]);
    let workers: Vec<_> = (0..run.args.connections)
        .map(|id| tokio::spawn(worker(run.clone(), id)))
        .collect();
    for worker in workers {
        let Stats(hist, counts) = worker.await?;
        total.0.add(hist)?;
        total.1.iter_mut().zip(counts).for_each(|(t, c)| *t += c);
    }

    let Stats(hist, [ok, c4xx, c5xx, other, errors, taken]) = total;
    let released = pacer.map_or(0, |thread| thread.join().expect("pacer thread"));
    let unsent = released - taken;
    let a = &run.args;
    let (url, connections, duration, warmup) = (&a.url, a.connections, a.duration, a.warmup);
    let (rate, users, duplicates, per_request) =
        (a.rate, a.users, a.duplicates, a.messages_per_request);
    let (requests, acks) = (ok + c4xx + c5xx + other + errors, ok as f64 / duration);
    let messages = acks * f64::from(per_request);
    let ms = |us: u64| us as f64 / 1000.0;
    let [p50, p90, p99, p999] = [0.5, 0.9, 0.99, 0.999].map(|q| ms(hist.value_at_quantile(q)));
    let (max, mean) = (ms(hist.max()), hist.mean() / 1000.0);
    let mode = rate.map_or("closed loop".into(), |r| format!("open loop at {r} req/s"));
    println!(
        "webhook_load: POST {url}, {connections} connections, {mode}, {duration} s + {warmup} s warm-up\n\
         {per_request} msg/request, {users} users, {duplicates} duplicates, body {body_bytes} B\n\
         requests {requests}: 2xx {ok}, 4xx {c4xx}, 5xx {c5xx}, other {other}, errors {errors}, unsent {unsent}\n\
         acks/s   {acks:.1} (messages/s {messages:.1})\n\
         latency  p50 {p50:.3} ms, p90 {p90:.3} ms, p99 {p99:.3} ms, p99.9 {p999:.3} ms, max {max:.3} ms, mean {mean:.3} ms"
    );
    let (url, rate) = (json!(url.to_string()), json!(rate));
    let mode = if rate.is_null() { "closed" } else { "open" };
    println!(
        r#"{{"bench":"webhook_load","url":{url},"mode":"{mode}","rate":{rate},"connections":{connections},"duration_s":{duration},"warmup_s":{warmup},"messages_per_request":{per_request},"users":{users},"duplicates":{duplicates},"body_bytes":{body_bytes},"requests":{requests},"acks_per_s":{acks:.1},"messages_per_s":{messages:.1},"p50_ms":{p50:.3},"p90_ms":{p90:.3},"p99_ms":{p99:.3},"p999_ms":{p999:.3},"max_ms":{max:.3},"mean_ms":{mean:.3},"status_2xx":{ok},"status_4xx":{c4xx},"status_5xx":{c5xx},"status_other":{other},"errors":{errors},"unsent":{unsent}}}"#
    );
    Ok(())
}
