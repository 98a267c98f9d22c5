//! Observability of the whole service, as an operator sees it.
//!
//! Metrics: a scripted conversation through the real pieces — signed webhooks into the router,
//! the workers, the engine `zaguan serve` builds with its real LLM clients (the primary, an
//! OpenAI-format server, fails every call; the fallback, an Anthropic-format server, answers),
//! the guard, the outbound channel against a fake Graph API with tight pair limits, and the
//! health monitor — then `GET /metrics`, parsed strictly as the Prometheus text format, has every
//! family an operator needs, with the labels and values the scenario implies.
//!
//! Logs: the JSON log output of a webhook and one turn carries the turn's span with the
//! conversation masked, and at info level neither the phone number nor what the customer wrote.
//!
//! The metrics recorder is process-wide: the scenario is one test, and the values it checks are
//! either lower bounds or series only it records.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use chrono::Utc;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use zaguan::config::Config;
use zaguan::domain::WaMessageId;
use zaguan::runtime::UsageRecorder;
use zaguan::runtime::monitor::Monitor;
use zaguan::runtime::{WorkerSettings, Workers};
use zaguan::store::{MemoryStore, OutboxEntry, OutboxStatus, Store};

use common::{TestApp, text_notification};

const PROMPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/prompts");
const PHONE_NUMBER_ID: &str = "109876543210";

// ---- the Prometheus text format, read strictly ---------------------------------------------

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A metric family: its `# TYPE`, its `# HELP`, its samples.
#[derive(Debug, Default)]
struct Family {
    kind: Option<String>,
    help: Option<String>,
    samples: Vec<Sample>,
}

/// Parses the text exposition format (version 0.0.4) and refuses anything malformed: a
/// comment other than `# HELP` / `# TYPE`, a HELP or TYPE given twice or after the family's
/// samples, an unknown type, a bad metric or label name, a bad escape, a duplicate label or
/// series, a value that is not a number, a sample outside its family's block or without a TYPE,
/// a family with no samples, a counter not named `_total` or negative, a histogram without
/// `le` buckets ending in `+Inf` that equals its `_count`, or with decreasing buckets.
fn parse_exposition(text: &str) -> Result<BTreeMap<String, Family>, String> {
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the exposition does not end with a newline".to_owned());
    }
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    // The family whose block we are in, and those whose block is over.
    let mut current: Option<String> = None;
    let mut closed: HashSet<String> = HashSet::new();
    let mut series: HashSet<(String, BTreeMap<String, String>)> = HashSet::new();
    let mut enter = |name: &str, current: &mut Option<String>| -> Result<(), String> {
        if current.as_deref() != Some(name) {
            if closed.contains(name) {
                return Err(format!("family {name} is not contiguous"));
            }
            if let Some(previous) = current.replace(name.to_owned()) {
                closed.insert(previous);
            }
        }
        Ok(())
    };
    for (n, line) in text.lines().enumerate() {
        let at = |why: String| format!("line {}: {why}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let (keyword, rest) = rest
                .strip_prefix(' ')
                .and_then(|r| r.split_once(' '))
                .ok_or_else(|| at("a comment that is neither HELP nor TYPE".to_owned()))?;
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            check_metric_name(name).map_err(at)?;
            enter(name, &mut current).map_err(at)?;
            let family = families.entry(name.to_owned()).or_default();
            if !family.samples.is_empty() {
                return Err(at(format!("{keyword} after the samples of {name}")));
            }
            match keyword {
                "HELP" => {
                    check_help_text(text).map_err(at)?;
                    if family.help.replace(text.to_owned()).is_some() {
                        return Err(at(format!("a second HELP for {name}")));
                    }
                }
                "TYPE" => {
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&text) {
                        return Err(at(format!("unknown type {text:?}")));
                    }
                    if family.kind.replace(text.to_owned()).is_some() {
                        return Err(at(format!("a second TYPE for {name}")));
                    }
                }
                _ => return Err(at("a comment that is neither HELP nor TYPE".to_owned())),
            }
            continue;
        }
        let sample = parse_sample(line).map_err(at)?;
        let family_name = current
            .clone()
            .ok_or_else(|| at("a sample before any TYPE".to_owned()))?;
        let family = families.get_mut(&family_name).expect("entered");
        let kind = family
            .kind
            .clone()
            .ok_or_else(|| at(format!("a sample of {family_name}, which has no TYPE")))?;
        let suffix = sample.name.strip_prefix(family_name.as_str());
        let labelled = |label: &str| sample.labels.contains_key(label);
        match (kind.as_str(), suffix) {
            ("counter", Some("")) => {
                if !family_name.ends_with("_total") {
                    return Err(at("a counter not named *_total".to_owned()));
                }
                if !(sample.value.is_finite() && sample.value >= 0.0) {
                    return Err(at("a counter that is negative or not finite".to_owned()));
                }
            }
            ("gauge" | "untyped", Some("")) => {
                if sample.value.is_nan() {
                    return Err(at("a NaN gauge".to_owned()));
                }
            }
            ("histogram", Some("_bucket")) => {
                let le = sample
                    .labels
                    .get("le")
                    .ok_or_else(|| at("a bucket without le".to_owned()))?;
                parse_value(le).map_err(at)?;
            }
            ("summary", Some("")) => {
                let quantile = sample
                    .labels
                    .get("quantile")
                    .ok_or_else(|| at("a summary sample without quantile".to_owned()))?;
                let q = parse_value(quantile).map_err(at)?;
                if !(0.0..=1.0).contains(&q) {
                    return Err(at("a quantile outside [0, 1]".to_owned()));
                }
            }
            ("histogram" | "summary", Some("_count")) => {
                if sample.value < 0.0 || sample.value.fract() != 0.0 {
                    return Err(at("a _count that is not a whole number".to_owned()));
                }
            }
            ("histogram" | "summary", Some("_sum")) => {}
            _ => {
                return Err(at(format!(
                    "{} does not belong to the {kind} {family_name}",
                    sample.name
                )));
            }
        }
        if kind == "histogram" && !sample.name.ends_with("_bucket") && labelled("le") {
            return Err(at("le on a histogram's _sum or _count".to_owned()));
        }
        if !series.insert((sample.name.clone(), sample.labels.clone())) {
            return Err(at("a duplicate series".to_owned()));
        }
        family.samples.push(sample);
    }
    for (name, family) in &families {
        if family.kind.is_none() {
            return Err(format!("family {name} has no TYPE"));
        }
        if family.samples.is_empty() {
            return Err(format!("family {name} has no samples"));
        }
        if family.kind.as_deref() == Some("histogram") {
            check_histogram(name, family)?;
        }
    }
    Ok(families)
}

/// Per label set: buckets non-decreasing in `le`, the last one `+Inf` and equal to `_count`,
/// and a `_sum`.
fn check_histogram(name: &str, family: &Family) -> Result<(), String> {
    let mut buckets: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
    let mut counts = BTreeMap::new();
    let mut sums = BTreeSet::new();
    for sample in &family.samples {
        let mut labels = sample.labels.clone();
        if sample.name.ends_with("_bucket") {
            let le = parse_value(&labels.remove("le").expect("checked"))?;
            buckets.entry(labels).or_default().push((le, sample.value));
        } else if sample.name.ends_with("_count") {
            counts.insert(labels, sample.value);
        } else {
            sums.insert(labels);
        }
    }
    for (labels, mut les) in buckets {
        les.sort_by(|a, b| a.0.total_cmp(&b.0));
        if les.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(format!("{name}{labels:?}: buckets decrease"));
        }
        let (last_le, last) = *les.last().expect("a bucket");
        if last_le != f64::INFINITY {
            return Err(format!("{name}{labels:?}: no +Inf bucket"));
        }
        if counts.get(&labels) != Some(&last) {
            return Err(format!("{name}{labels:?}: +Inf bucket is not _count"));
        }
        if !sums.contains(&labels) {
            return Err(format!("{name}{labels:?}: no _sum"));
        }
    }
    Ok(())
}

/// `name{label="value",…} value [timestamp]`.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| "a sample without a value".to_owned())?;
    let name = &line[..name_end];
    check_metric_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (label, after) = rest
                .split_once('=')
                .ok_or_else(|| "a label without =".to_owned())?;
            check_label_name(label)?;
            let after = after
                .strip_prefix('"')
                .ok_or_else(|| format!("the value of {label} is not quoted"))?;
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next() {
                    None => return Err(format!("the value of {label} is not terminated")),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next().map(|(_, c)| c) {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => return Err(format!("a bad escape \\{other:?} in {label}")),
                    },
                    Some((_, c)) => value.push(c),
                }
            };
            if labels.insert(label.to_owned(), value).is_some() {
                return Err(format!("label {label} given twice"));
            }
            rest = &after[end + 1..];
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
            } else if !rest.starts_with('}') {
                return Err(format!("expected , or }} after label {label}"));
            }
        }
    }
    let rest = rest
        .strip_prefix(' ')
        .ok_or_else(|| "no single space before the value".to_owned())?;
    let mut tokens = rest.split(' ');
    let value = parse_value(tokens.next().unwrap_or_default())?;
    if let Some(timestamp) = tokens.next() {
        timestamp
            .parse::<i64>()
            .map_err(|_| format!("a bad timestamp {timestamp:?}"))?;
    }
    if tokens.next().is_some() {
        return Err("trailing tokens after the value".to_owned());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// A float as Prometheus reads it (Go's `ParseFloat`): digits with an optional sign, point and
/// exponent, or `NaN`, `Inf`, `+Inf`, `-Inf` in any case.
fn parse_value(token: &str) -> Result<f64, String> {
    match token.to_ascii_lowercase().as_str() {
        "nan" => Ok(f64::NAN),
        "inf" | "+inf" | "infinity" | "+infinity" => Ok(f64::INFINITY),
        "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
        _ if !token.is_empty()
            && token.bytes().any(|b| b.is_ascii_digit())
            && token
                .bytes()
                .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
        {
            token
                .parse()
                .map_err(|_| format!("{token:?} is not a number"))
        }
        _ => Err(format!("{token:?} is not a number")),
    }
}

fn check_metric_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    ok.then_some(())
        .ok_or_else(|| format!("{name:?} is not a metric name"))
}

fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__");
    ok.then_some(())
        .ok_or_else(|| format!("{name:?} is not a label name"))
}

/// HELP text escapes only `\\` and `\n`.
fn check_help_text(text: &str) -> Result<(), String> {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && !matches!(chars.next(), Some('\\' | 'n')) {
            return Err("a bad escape in HELP".to_owned());
        }
    }
    Ok(())
}

/// The parsed exposition, queried by sample name and labels.
struct Metrics(BTreeMap<String, Family>);

impl Metrics {
    fn family(&self, name: &str) -> &Family {
        self.0.get(name).unwrap_or_else(|| {
            panic!(
                "family {name} missing from /metrics; present: {:?}",
                self.0.keys().collect::<Vec<_>>()
            )
        })
    }

    /// The samples named `name` whose labels include `labels`.
    fn samples<'m>(&'m self, name: &str, labels: &[(&str, &str)]) -> Vec<&'m Sample> {
        self.0
            .values()
            .flat_map(|f| &f.samples)
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The sum of those samples; panics when there is none.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let samples = self.samples(name, labels);
        assert!(
            !samples.is_empty(),
            "no {name} sample with {labels:?}; {name} has {:?}",
            self.samples(name, &[])
        );
        samples.iter().map(|s| s.value).sum()
    }

    /// The label names of every sample named `name`.
    fn label_names(&self, name: &str) -> BTreeSet<&str> {
        self.samples(name, &[])
            .into_iter()
            .flat_map(|s| s.labels.keys().map(String::as_str))
            .collect()
    }
}

#[test]
fn the_parser_refuses_malformed_expositions() {
    let good = "# HELP a_total Things.\n# TYPE a_total counter\na_total{k=\"v\\\"\"} 3\n\n\
                # TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 2.5\n\
                h_count 2\n# TYPE g gauge\ng -1.5e3 1700000000000\n";
    let families = parse_exposition(good).unwrap();
    assert_eq!(families["a_total"].samples[0].labels["k"], "v\"");
    assert_eq!(families["a_total"].help.as_deref(), Some("Things."));
    assert_eq!(families["g"].samples[0].value, -1500.0);
    let counter = "# TYPE a_total counter\n";
    let histogram = "# TYPE h histogram\n";
    for (bad, why) in [
        (format!("{counter}a_total 1"), "end with a newline"),
        ("# just a comment\n".to_owned(), "neither HELP nor TYPE"),
        ("a_total 1\n".to_owned(), "before any TYPE"),
        (
            "# TYPE a_total countr\na_total 1\n".to_owned(),
            "unknown type",
        ),
        (format!("{counter}{counter}a_total 1\n"), "a second TYPE"),
        (
            format!("{counter}a_total 1\n# HELP a_total late\n"),
            "HELP after the samples",
        ),
        (format!("{counter}a_total{{k=\"v\"}} x\n"), "not a number"),
        (format!("{counter}a_total{{k=v}} 1\n"), "not quoted"),
        (
            format!("{counter}a_total{{k=\"v\",k=\"w\"}} 1\n"),
            "given twice",
        ),
        (
            format!("{counter}a_total{{1k=\"v\"}} 1\n"),
            "not a label name",
        ),
        (format!("{counter}a_total{{k=\"\\x\"}} 1\n"), "bad escape"),
        (format!("{counter}a_total{{k=\"v\" 1\n"), "expected , or }"),
        (format!("{counter}a_total  1\n"), "not a number"),
        (format!("{counter}a_total 1 2 3\n"), "trailing tokens"),
        (
            format!("{counter}a_total 1\na_total 2\n"),
            "duplicate series",
        ),
        (format!("{counter}a_total -1\n"), "negative"),
        ("# TYPE a counter\na 1\n".to_owned(), "not named *_total"),
        (format!("{counter}b_total 1\n"), "does not belong"),
        (counter.to_owned(), "has no samples"),
        (
            "# TYPE g gauge\ng 1\n# TYPE f gauge\nf 1\n# TYPE g gauge\n".to_owned(),
            "not contiguous",
        ),
        (
            format!("{histogram}h_bucket 1\nh_sum 1\nh_count 1\n"),
            "without le",
        ),
        (format!("{histogram}h 1\n"), "does not belong"),
        (
            format!("{histogram}h_bucket{{le=\"1\"}} 1\nh_sum 1\nh_count 1\n"),
            "no +Inf bucket",
        ),
        (
            format!(
                "{histogram}h_bucket{{le=\"1\"}} 2\nh_bucket{{le=\"+Inf\"}} 1\nh_sum 1\nh_count 1\n"
            ),
            "buckets decrease",
        ),
        (
            format!("{histogram}h_bucket{{le=\"+Inf\"}} 2\nh_sum 1\nh_count 1\n"),
            "is not _count",
        ),
        (
            format!("# HELP a_total bad \\t escape\n{counter}a_total 1\n"),
            "bad escape in HELP",
        ),
    ] {
        match parse_exposition(&bad) {
            Ok(_) => panic!("accepted: {bad:?}"),
            Err(error) => assert!(error.contains(why), "{bad:?}: {error}"),
        }
    }
}

/// Every family recorded anywhere in `src` has its kind and HELP text in
/// `zaguan::telemetry::FAMILIES`, so `/metrics` never shows a family without `# HELP`.
#[test]
fn every_recorded_family_is_described() {
    use zaguan::telemetry::{FAMILIES, Kind};
    let described: HashMap<&str, Kind> = FAMILIES.iter().map(|(n, k, _)| (*n, *k)).collect();
    let mut recorded = BTreeMap::new();
    let mut dirs = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src"
    ))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            for (macro_name, kind) in [
                ("counter!(", Kind::Counter),
                ("gauge!(", Kind::Gauge),
                ("histogram!(", Kind::Histogram),
            ] {
                for (at, _) in source.match_indices(macro_name) {
                    let rest = source[at + macro_name.len()..].trim_start();
                    let Some(rest) = rest.strip_prefix('"') else {
                        continue; // describe_*!(*name, …) in telemetry.rs
                    };
                    let name = &rest[..rest.find('"').unwrap()];
                    recorded.insert(name.to_owned(), (kind, path.display().to_string()));
                }
            }
        }
    }
    assert!(recorded.len() > 30, "{recorded:?}");
    for (name, (kind, path)) in &recorded {
        assert_eq!(
            described.get(name.as_str()),
            Some(kind),
            "{name} ({path}) is not in telemetry::FAMILIES as a {kind:?}"
        );
    }
}

// ---- the fake servers ------------------------------------------------------------------------

/// The fallback model: answers by what the request is about (with its token usage), and holds
/// D's answer until released (a turn in flight while the monitor looks).
#[derive(Default)]
struct Fallback {
    entered_held: Notify,
    release_held: Notify,
}

/// Words of each customer message, by which the fallback knows what it is answering.
const A1_MARK: &str = "calle Mayor";
const A2_MARK: &str = "martes a las diez";
const B1_MARK: &str = "horario";
const D1_MARK: &str = "desde cuando";

/// A1's answer: English (the customer writes Spanish), with a sentence naming an internal tool.
const LEAKY_ENGLISH: &str = "I will call CompleteOrEscalate if this is not about visits. Which day \
would suit you best for the visit? I have free slots on Tuesday and Thursday morning.";
const TRANSLATED: &str = "¿Qué día te viene mejor para la visita? Tengo huecos libres el martes y el jueves por la mañana.";

fn anthropic_text(text: &str) -> Json<Value> {
    Json(json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 812, "output_tokens": 37}
    }))
}

async fn fallback_answers(
    State(model): State<Arc<Fallback>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let text = body.to_string();
    let translating = text.contains("revisor final")
        && body["tools"]
            .as_array()
            .is_none_or(|tools| tools.is_empty());
    let answer = if translating {
        TRANSLATED
    } else if text.contains(D1_MARK) {
        model.entered_held.notify_one();
        model.release_held.notified().await;
        "Somos Zaguan Inmobiliaria y trabajamos en Valencia desde 2009."
    } else if text.contains(A2_MARK) {
        "Perfecto, te apunto el martes a las 10:00. Te esperamos en la oficina."
    } else if text.contains(A1_MARK) {
        LEAKY_ENGLISH
    } else if text.contains(B1_MARK) {
        "Abrimos de lunes a viernes de 9:30 a 19:00 y los sábados por la mañana."
    } else {
        "Cuéntame un poco más, por favor."
    };
    anthropic_text(answer)
}

/// The primary model: down, every call a 500.
async fn primary_down(State(calls): State<Arc<Mutex<usize>>>) -> (StatusCode, Json<Value>) {
    *calls.lock().unwrap() += 1;
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(json!({"error": {"message": "upstream failure", "type": "server_error"}})),
    )
}

const CUSTOMER_A: &str = "34600200001";
const UNDELIVERABLE: &str = "34600200002";
const CUSTOMER_C: &str = "34600200003";
const CUSTOMER_D: &str = "34600200004";

/// An image without caption from `from`.
fn image_notification(wamid: &str, from: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": PHONE_NUMBER_ID},
            "contacts": [{"profile": {"name": "Carmen Ruiz"}, "wa_id": from}],
            "messages": [{"from": from, "id": wamid, "timestamp": common::now_timestamp(), "type": "image",
                "image": {"mime_type": "image/jpeg", "id": "1047218843125891",
                          "sha256": "yZLc3sTaLpZtKNL2W1nLSDRWNf/NJXI0C2ERnP6fMRY="}}]
        }}]}]
    }))
    .unwrap()
}

/// The replies to `wamid` once every part is sent or failed (up to 20 s).
async fn settled(store: &dyn Store, wamid: &str) -> Vec<OutboxEntry> {
    let id = WaMessageId::parse(wamid).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let replies = store.outbox_in_reply_to(&id).await.unwrap();
        if !replies.is_empty()
            && replies
                .iter()
                .all(|r| matches!(r.status, OutboxStatus::Sent | OutboxStatus::Failed))
        {
            return replies;
        }
        assert!(
            Instant::now() < deadline,
            "no settled reply to {wamid}: {replies:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- the scenario ----------------------------------------------------------------------------

/// The async tests of this file run one at a time. A tracing callsite caches whether anyone
/// listens when it is first hit, asking only the hitting thread's subscriber while a single
/// one is registered: a callsite first hit by the scenario's thread (no subscriber) would stay
/// silent for the log test's thread-local one.
static SERIAL: std::sync::LazyLock<tokio::sync::Mutex<()>> =
    std::sync::LazyLock::new(Default::default);

#[tokio::test]
async fn metrics_after_a_scripted_conversation() {
    let _serial = SERIAL.lock().await;
    zaguan::telemetry::metrics_handle();

    let primary_calls = Arc::new(Mutex::new(0));
    let openai = common::serve_local(
        axum::Router::new()
            .route("/v1/chat/completions", post(primary_down))
            .with_state(primary_calls.clone()),
    )
    .await;
    let fallback = Arc::new(Fallback::default());
    let anthropic = common::serve_local(
        axum::Router::new()
            .route("/v1/messages", post(fallback_answers))
            .with_state(fallback.clone()),
    )
    .await;
    let graph_api = Arc::new(common::graph::FakeGraph::default());
    *graph_api.refused.lock().unwrap() = Some(UNDELIVERABLE.to_owned());
    let graph = common::graph::serve(graph_api.clone()).await;

    let vars: HashMap<String, String> = [
        ("LLM_PRIMARY", "openai:gpt-test".to_owned()),
        ("OPENAI_BASE_URL", format!("{openai}/v1")),
        ("OPENAI_API_KEY", "sk-test-openai".to_owned()),
        ("LLM_FALLBACK", "anthropic:claude-test".to_owned()),
        ("ANTHROPIC_BASE_URL", anthropic),
        ("ANTHROPIC_API_KEY", "sk-ant-test".to_owned()),
        ("ZAGUAN_PROMPTS_DIR", PROMPTS.to_owned()),
        ("ZAGUAN_LLM_TIMEOUT", "10s".to_owned()),
        // Two failures open the primary's breaker.
        ("ZAGUAN_LLM_BREAKER_FAILURES", "2".to_owned()),
        ("WHATSAPP_ACCESS_TOKEN", "EAAG-test-token".to_owned()),
        ("WHATSAPP_API_BASE_URL", format!("{graph}/v21.0")),
        ("WHATSAPP_APP_SECRET", common::APP_SECRET.to_owned()),
        // One message per recipient a second: a quick second reply waits.
        ("WHATSAPP_PAIR_INTERVAL", "1s".to_owned()),
        ("WHATSAPP_PAIR_BURST", "1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = Config::from_vars(vars).unwrap();

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = TestApp::with_store(store.clone());
    let usage = UsageRecorder::spawn(store.clone());
    let realestate = zaguan::startup::open_realestate(&config, None)
        .await
        .unwrap();
    let engine = Arc::new(
        zaguan::startup::build_engine(&config, store.clone(), realestate, Some(usage.clone()))
            .unwrap(),
    );
    let outbound = Arc::new(zaguan::startup::outbound(&config, store.clone()).unwrap());
    let workers = Workers::spawn(
        engine,
        outbound,
        app.state.arrivals.clone(),
        WorkerSettings {
            owner: "metrics-test".to_owned(),
            poll: Duration::from_millis(20),
            // Conversations done talking are given back before the monitor looks.
            idle_release: Duration::from_millis(500),
            ..WorkerSettings::default()
        },
    );

    // B asks the primary assistant, and its reply is undeliverable; C sends a photo without
    // caption. Then A asks for a visit (keywords: the fast path into appointments), whose
    // assistant answers in English with a leak. The primary model fails B's call and A's: its
    // breaker opens, and every later call skips it.
    let body = text_notification(&[(
        "wamid.B1",
        UNDELIVERABLE,
        "Buenas tardes, ¿qué horario tiene vuestra oficina los sábados?",
    )]);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    assert_eq!(
        app.post_webhook(image_notification("wamid.C1", CUSTOMER_C))
            .await,
        StatusCode::OK
    );
    let b1 = settled(store.as_ref(), "wamid.B1").await;
    assert_eq!(b1[0].status, OutboxStatus::Failed);
    assert_eq!(b1[0].error.as_ref().unwrap().code, Some(131026));
    assert_eq!(
        settled(store.as_ref(), "wamid.C1").await[0].status,
        OutboxStatus::Sent
    );
    let body = text_notification(&[(
        "wamid.A1",
        CUSTOMER_A,
        "Hola, quiero agendar una visita al local de la calle Mayor, por favor.",
    )]);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    let a1 = settled(store.as_ref(), "wamid.A1").await;
    assert_eq!(a1.len(), 1);
    assert_eq!(a1[0].body, TRANSLATED, "the leak removed, then translated");
    assert_eq!(a1[0].status, OutboxStatus::Sent);

    // A answers at once, inside the appointment assistant: the reply waits for the pair limit.
    let body = text_notification(&[(
        "wamid.A2",
        CUSTOMER_A,
        "El martes a las diez me va bien, gracias.",
    )]);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    assert_eq!(
        settled(store.as_ref(), "wamid.A2").await[0].status,
        OutboxStatus::Sent
    );
    let to_a: Vec<Instant> = graph_api
        .received()
        .iter()
        .filter(|r| r.body.get("status").is_none() && r.body["to"] == CUSTOMER_A)
        .map(|r| r.at)
        .collect();
    assert_eq!(to_a.len(), 2);
    assert!(
        to_a[1] - to_a[0] >= Duration::from_millis(900),
        "{:?}",
        to_a[1] - to_a[0]
    );

    // D's turn is held in the model while the monitor looks: its message is open, its
    // conversation claimed.
    let body = text_notification(&[(
        "wamid.D1",
        CUSTOMER_D,
        "Hola, ¿quiénes sois y desde cuando trabajáis en Valencia?",
    )]);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(10), fallback.entered_held.notified())
        .await
        .expect("D's turn reaches the model");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let health = Monitor::new(store.clone(), Duration::from_secs(2 * 3600))
        .check(Utc::now())
        .await
        .unwrap();
    assert_eq!(health.active_leases, 1, "{health:?}");
    assert_eq!(health.inbox_open, 1, "{health:?}");
    assert!(health.oldest_pending_seconds >= 1, "{health:?}");
    fallback.release_held.notify_one();
    assert_eq!(
        settled(store.as_ref(), "wamid.D1").await[0].status,
        OutboxStatus::Sent
    );
    workers.stop().await;
    usage.flush().await;
    // Two primary calls failed and opened its breaker; the rest skipped it.
    assert_eq!(*primary_calls.lock().unwrap(), 2);

    // A part whose sender died before recording its wamid: its status finds it by the
    // callback data it was sent with.
    let unrecorded = store
        .insert_outbox(&[zaguan::store::NewOutbox::text(
            zaguan::domain::WaId::parse(CUSTOMER_C).unwrap(),
            None,
            "¿Algo más?",
            Utc::now(),
        )])
        .await
        .unwrap()
        .remove(0);
    let sending = zaguan::store::OutboxUpdate::Sending {
        at: Utc::now(),
        resend_at: Utc::now() + chrono::Duration::seconds(30),
    };
    store.update_outbox(&unrecorded, &sending).await.unwrap();
    let status = serde_json::json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
            "statuses": [{"id": "wamid.RECONCILED", "status": "sent", "timestamp": "1764100900",
                          "recipient_id": CUSTOMER_C,
                          "biz_opaque_callback_data": unrecorded.callback_data()}],
        }}]}]
    });
    assert_eq!(
        app.post_webhook(serde_json::to_vec(&status).unwrap()).await,
        StatusCode::OK
    );

    let (status, text) = app.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    let metrics = Metrics(parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}")));
    // No customer appears in any label, not even masked.
    for customer in [CUSTOMER_A, UNDELIVERABLE, CUSTOMER_C, CUSTOMER_D] {
        assert!(!text.contains(customer), "{customer} in /metrics");
        let masked = zaguan::domain::WaId::parse(customer).unwrap().masked();
        assert!(!text.contains(&masked), "{customer} masked in /metrics");
    }

    // Every family has its HELP and the TYPE it is recorded as.
    for (name, family) in &metrics.0 {
        if name.starts_with("zaguan_") {
            assert!(family.help.is_some(), "{name} has no # HELP");
        }
    }
    for (name, kind) in [
        ("zaguan_inbound_messages_total", "counter"),
        ("zaguan_turns_total", "counter"),
        ("zaguan_turn_duration_seconds", "histogram"),
        ("zaguan_turn_transitions", "histogram"),
        ("zaguan_route_total", "counter"),
        ("zaguan_fast_route_total", "counter"),
        ("zaguan_llm_calls_total", "counter"),
        ("zaguan_llm_call_duration_seconds", "histogram"),
        ("zaguan_llm_tokens_total", "counter"),
        ("zaguan_llm_fallbacks_total", "counter"),
        ("zaguan_llm_breaker_open", "gauge"),
        ("zaguan_llm_breaker_skips_total", "counter"),
        ("zaguan_translations_total", "counter"),
        ("zaguan_leak_guard_total", "counter"),
        ("zaguan_outbound_sends_total", "counter"),
        ("zaguan_outbound_read_marks_total", "counter"),
        ("zaguan_outbound_rate_limit_waits_total", "counter"),
        ("zaguan_outbound_rate_limit_wait_seconds", "histogram"),
        ("zaguan_inbox_backlog", "gauge"),
        ("zaguan_inbox_oldest_pending_seconds", "gauge"),
        ("zaguan_active_leases", "gauge"),
        ("zaguan_media_answers_total", "counter"),
    ] {
        assert_eq!(metrics.family(name).kind.as_deref(), Some(kind), "{name}");
    }

    // Durations and transitions are histograms with buckets, not summaries.
    for name in [
        "zaguan_turn_duration_seconds",
        "zaguan_turn_transitions",
        "zaguan_llm_call_duration_seconds",
        "zaguan_outbound_rate_limit_wait_seconds",
    ] {
        assert!(
            metrics.samples(&format!("{name}_bucket"), &[]).len() > 5,
            "{name} has no buckets"
        );
    }

    assert_eq!(
        metrics.value(
            "zaguan_webhook_statuses_total",
            &[("status", "sent"), ("outcome", "reconciled")]
        ),
        1.0
    );

    // Inbound, by type.
    let inbound = "zaguan_inbound_messages_total";
    assert!(metrics.value(inbound, &[("type", "text")]) >= 4.0);
    assert!(metrics.value(inbound, &[("type", "image")]) >= 1.0);

    // Turns: five answered (A twice, B, C, D); transitions 3 (primary, router, appointments)
    // + 1 + 0 (the photo, answered without an assistant) + 1 + 1.
    assert!(metrics.value("zaguan_turns_total", &[("outcome", "answered")]) >= 5.0);
    assert!(metrics.value("zaguan_turn_duration_seconds_count", &[]) >= 5.0);
    assert!(metrics.value("zaguan_turn_duration_seconds_sum", &[]) > 0.0);
    assert!(metrics.value("zaguan_turn_transitions_count", &[]) >= 5.0);
    assert!(metrics.value("zaguan_turn_transitions_sum", &[]) >= 6.0);
    assert!(
        metrics.value("zaguan_turn_transitions_bucket", &[("le", "+Inf")])
            > metrics.value("zaguan_turn_transitions_bucket", &[("le", "2")]),
        "A's first turn took 3 transitions"
    );
    assert!(metrics.value("zaguan_media_answers_total", &[]) >= 1.0);

    // Routing.
    assert!(metrics.value("zaguan_route_total", &[("agent", "primary_assistant")]) >= 3.0);
    assert!(metrics.value("zaguan_route_total", &[("agent", "appointment_assistant")]) >= 2.0);
    assert!(
        metrics.value(
            "zaguan_fast_route_total",
            &[("agent", "appointment_assistant")]
        ) >= 1.0
    );

    // LLM calls, latency and tokens, by provider, model and outcome.
    let primary = [("provider", "openai"), ("model", "gpt-test")];
    let fallback_labels = [("provider", "anthropic"), ("model", "claude-test")];
    let with = |labels: &[(&'static str, &'static str)], extra: (&'static str, &'static str)| {
        let mut all = labels.to_vec();
        all.push(extra);
        all
    };
    assert_eq!(
        metrics.value(
            "zaguan_llm_calls_total",
            &with(&primary, ("outcome", "unavailable"))
        ),
        2.0
    );
    // A's two nodes (one a translation), B, A again, D.
    assert_eq!(
        metrics.value(
            "zaguan_llm_calls_total",
            &with(&fallback_labels, ("outcome", "ok"))
        ),
        5.0
    );
    for name in [
        "zaguan_llm_calls_total",
        "zaguan_llm_call_duration_seconds_count",
        "zaguan_llm_call_duration_seconds_sum",
    ] {
        assert_eq!(
            metrics.label_names(name),
            BTreeSet::from(["model", "outcome", "provider"]),
            "{name}"
        );
    }
    assert_eq!(
        metrics.value(
            "zaguan_llm_call_duration_seconds_count",
            &with(&primary, ("outcome", "unavailable"))
        ),
        2.0
    );
    assert!(
        metrics.value(
            "zaguan_llm_call_duration_seconds_sum",
            &with(&fallback_labels, ("outcome", "ok"))
        ) > 0.0
    );
    // Tokens are counted by provider, model and outcome, input and output.
    assert_eq!(
        metrics.label_names("zaguan_llm_tokens_total"),
        BTreeSet::from(["kind", "model", "outcome", "provider"])
    );
    assert_eq!(
        metrics.value(
            "zaguan_llm_tokens_total",
            &with(&fallback_labels, ("kind", "input"))
        ),
        5.0 * 812.0
    );
    assert_eq!(
        metrics.value(
            "zaguan_llm_tokens_total",
            &with(&fallback_labels, ("kind", "output"))
        ),
        5.0 * 37.0
    );

    // Fallbacks and the breaker: every call went on to the fallback, the primary's breaker is
    // open, the fallback's closed.
    assert_eq!(
        metrics.value(
            "zaguan_llm_fallbacks_total",
            &[("from", "openai:gpt-test"), ("to", "anthropic:claude-test")]
        ),
        5.0
    );
    assert_eq!(metrics.value("zaguan_llm_breaker_open", &primary), 1.0);
    assert_eq!(
        metrics.value("zaguan_llm_breaker_open", &fallback_labels),
        0.0
    );
    assert_eq!(
        metrics.value("zaguan_llm_breaker_skips_total", &primary),
        3.0
    );

    // The guard: A's English reply translated to Spanish, its leak removed.
    assert!(
        metrics.value(
            "zaguan_translations_total",
            &[("outcome", "translated"), ("to", "es")]
        ) >= 1.0
    );
    assert!(metrics.value("zaguan_leak_guard_total", &[("kind", "internal_name")]) >= 1.0);

    // Outbound: four sent, B's refused with its Graph code; the pair limit held A's second
    // reply; the typing indicator went out for each turn.
    let sends = "zaguan_outbound_sends_total";
    assert_eq!(
        metrics.label_names(sends),
        BTreeSet::from(["code", "status"])
    );
    assert!(metrics.value(sends, &[("status", "sent"), ("code", "none")]) >= 4.0);
    assert_eq!(
        metrics.value(sends, &[("status", "failed"), ("code", "131026")]),
        1.0
    );
    assert!(metrics.value("zaguan_outbound_rate_limit_waits_total", &[]) >= 1.0);
    assert!(metrics.value("zaguan_outbound_rate_limit_wait_seconds_count", &[]) >= 1.0);
    assert!(metrics.value("zaguan_outbound_rate_limit_wait_seconds_sum", &[]) > 0.0);
    assert!(metrics.value("zaguan_outbound_read_marks_total", &[("status", "ok")]) >= 5.0);

    // Health, as the monitor saw it while D's turn ran.
    assert_eq!(
        metrics.value("zaguan_inbox_backlog", &[]),
        health.inbox_open as f64
    );
    assert_eq!(
        metrics.value("zaguan_inbox_oldest_pending_seconds", &[]),
        health.oldest_pending_seconds as f64
    );
    assert_eq!(metrics.value("zaguan_active_leases", &[]), 1.0);
}

// ---- logs ------------------------------------------------------------------------------------

/// Log output kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for Captured {
    type Writer = Captured;

    fn make_writer(&'w self) -> Self::Writer {
        self.clone()
    }
}

/// A model that echoes the customer's last message, so what they wrote is in the reply too.
async fn echo_model(Json(body): Json<Value>) -> Json<Value> {
    let said = body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1764100800, "model": "gpt-logs",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
            "message": {"role": "assistant", "content": format!("Anotado: {said}"), "refusal": null}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    }))
}

const SECRET_TEXT: &str = "Mi presupuesto secreto es 987654";

/// A webhook and its turn, logged as `zaguan serve` with `ZAGUAN_LOG_FORMAT=json` and
/// `RUST_LOG=level` would; the log lines, parsed.
async fn logged_turn(level: &str, wa_id: &str, wamid: &str) -> Vec<Value> {
    let captured = Captured::default();
    let subscriber =
        zaguan::telemetry::log_subscriber(EnvFilter::new(level), true, captured.clone());
    // This runtime is single-threaded: the workers and the servers log on this thread.
    let guard = tracing::subscriber::set_default(subscriber);

    let openai =
        common::serve_local(axum::Router::new().route("/v1/chat/completions", post(echo_model)))
            .await;
    let vars: HashMap<String, String> = [
        ("LLM_PRIMARY", "openai:gpt-logs".to_owned()),
        ("OPENAI_BASE_URL", format!("{openai}/v1")),
        ("OPENAI_API_KEY", "sk-test-openai".to_owned()),
        ("ZAGUAN_PROMPTS_DIR", PROMPTS.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = Config::from_vars(vars).unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = TestApp::with_store(store.clone());
    let realestate = zaguan::startup::open_realestate(&config, None)
        .await
        .unwrap();
    let engine =
        Arc::new(zaguan::startup::build_engine(&config, store.clone(), realestate, None).unwrap());
    // No access token: a dry run, the reply only logged.
    let outbound = Arc::new(zaguan::startup::outbound(&config, store.clone()).unwrap());
    let workers = Workers::spawn(
        engine,
        outbound,
        app.state.arrivals.clone(),
        WorkerSettings {
            poll: Duration::from_millis(20),
            ..WorkerSettings::default()
        },
    );
    let body = text_notification(&[(wamid, wa_id, SECRET_TEXT)]);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    let replies = settled(store.as_ref(), wamid).await;
    assert!(replies[0].body.contains("987654"), "{replies:?}");
    workers.stop().await;
    drop(guard);

    let output = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    output
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
        })
        .collect()
}

#[tokio::test]
async fn json_logs_carry_the_turn_masked_and_no_customer_data_at_info() {
    let _serial = SERIAL.lock().await;
    let wa_id = "34612345678";
    let lines = logged_turn("info", wa_id, "wamid.LOG1").await;
    assert!(!lines.is_empty());
    for line in &lines {
        let text = line.to_string();
        assert!(
            ["INFO", "WARN", "ERROR"].contains(&line["level"].as_str().unwrap_or_default()),
            "{text}"
        );
        assert!(
            line["timestamp"].is_string() && line["target"].is_string(),
            "{text}"
        );
        assert!(!text.contains(wa_id), "a full phone number at info: {text}");
        // Wherever the conversation is named (an event's field, a span's), it is masked.
        let spans = line["spans"].as_array().cloned().unwrap_or_default();
        for named in std::iter::once(line).chain(&spans) {
            if let Some(id) = named.get("conversation.id") {
                assert_eq!(id, "…5678", "{text}");
            }
        }
        assert!(
            !text.contains("987654") && !text.contains("presupuesto secreto"),
            "what the customer wrote, at info: {text}"
        );
    }
    // The turn's span, on the lines logged inside it, names the conversation masked.
    let in_turn: Vec<&Value> = lines
        .iter()
        .filter(|line| line["span"]["name"] == "run_turn")
        .collect();
    assert!(
        !in_turn.is_empty(),
        "no line inside the turn's span: {lines:#?}"
    );
    for line in in_turn {
        assert_eq!(line["span"]["conversation.id"], "…5678", "{line}");
        assert!(
            line["spans"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == "run_turn"),
            "{line}"
        );
    }

    // At debug the reply, which repeats what the customer wrote, is logged: the info lines
    // above had it to leak, and did not.
    let debug = logged_turn("debug", "34612345679", "wamid.LOG2").await;
    assert!(
        debug.iter().any(|line| line.to_string().contains("987654")),
        "the reply is logged at debug"
    );
    assert!(debug.iter().any(|line| line["level"] == "DEBUG"));
}

/// Offline mode counts the turns it serves, per assistant, and says the instance is offline
/// (`zaguan_offline`) until a model answers again.
#[tokio::test]
async fn offline_turns_are_counted_per_assistant() {
    let _serial = SERIAL.lock().await;
    let read = || Metrics(parse_exposition(&zaguan::telemetry::metrics_handle().render()).unwrap());
    let served = |agent: &str| -> f64 {
        read()
            .samples(
                "zaguan_offline_turns_total",
                &[("agent", agent), ("how", "engine")],
            )
            .iter()
            .map(|s| s.value)
            .sum()
    };
    let (search_before, mortgage_before) = (
        served("searcher_assistant"),
        served("mortgage_loan_assistant"),
    );
    // No key at all: the engine `serve` and `chat` build, over the demo data.
    let config =
        Config::from_vars([("ZAGUAN_PROMPTS_DIR".to_owned(), PROMPTS.to_owned())].into()).unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let realestate = zaguan::startup::open_realestate(&config, None)
        .await
        .unwrap();
    let engine = zaguan::startup::build_engine(&config, store.clone(), realestate, None).unwrap();
    let wa_id = zaguan::domain::WaId::parse("34611888001").unwrap();
    let reply = common::say(
        &engine,
        &store,
        &wa_id,
        1,
        "busco piso de 2 habitaciones en Valencia para alquilar",
    )
    .await
    .unwrap();
    assert!(reply.contains("He encontrado"), "{reply}");
    let reply = common::say(
        &engine,
        &store,
        &wa_id,
        2,
        "¿y cuánto pagaría de hipoteca por uno de 250.000 € con 60.000 de entrada?",
    )
    .await
    .unwrap();
    assert!(reply.contains("Hipoteca para"), "{reply}");
    assert_eq!(served("searcher_assistant") - search_before, 1.0);
    assert_eq!(served("mortgage_loan_assistant") - mortgage_before, 1.0);
    assert_eq!(read().value("zaguan_offline", &[]), 1.0);
    assert!(engine.model_status().offline_since().is_some());
}
