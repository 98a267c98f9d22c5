//! How the periodic reads of `conversations` scale with the number of conversations an agency
//! keeps: the health monitor's check (every 30 s on each instance; the stuck conversations are
//! counted every few minutes), an operator's page of conversations, and the handoff
//! escalation's look for due notices (every 0.2 to 5 s), on the MongoDB (or FerretDB) at
//! `MONGODB_URI`.
//!
//! It fills a fresh `zaguan_scale_…` database with `--conversations N` conversations as the
//! service writes them (a tenth of them left in an assistant, the rest back with the primary
//! one; all idle for hours; 20 waiting for a person), runs each read `--runs` times and prints the median time, the CPU
//! this process spent per read (decoding what came back), and with FerretDB its CPU and
//! PostgreSQL's per read. The database is dropped afterwards.
//!
//! ```sh
//! scripts/with-ferretdb cargo run --release --example store_scale -- --conversations 20000
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Document, doc};
use chrono::Utc;
use clap::Parser;
use secrecy::SecretString;
use zaguan::domain::WaId;
use zaguan::runtime::monitor::Monitor;
use zaguan::store::pool::MongoConfig;
use zaguan::store::{ConversationQuery, ConversationStore, HandoffReason, MongoStore};

#[path = "common/procfs.rs"]
mod procfs;

#[derive(Parser, Debug)]
#[command(about = "Time the periodic reads of `conversations` on MONGODB_URI")]
struct Args {
    /// Conversations in the database.
    #[arg(long, default_value_t = 20_000)]
    conversations: u32,
    /// Times each read is run.
    #[arg(long, default_value_t = 10)]
    runs: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let uri = std::env::var("MONGODB_URI").map_err(|_| "MONGODB_URI is not set")?;
    let store = Arc::new(
        MongoStore::connect(&MongoConfig {
            uri: SecretString::from(uri),
            database: format!("zaguan_scale_{}", std::process::id()),
        })
        .await?,
    );
    store.ensure_indexes().await?;
    fill(&store, args.conversations).await?;
    // A few customers waiting for a person, their next notice due.
    for i in 0..args.conversations.min(20) {
        let reason = HandoffReason {
            at: Utc::now(),
            reason: "Quiere hablar con una persona".into(),
            key: String::new(),
        };
        let wa_id = WaId::parse(&format!("346{:08}", i * 7 + 1))?;
        store
            .request_handoff(&wa_id, &reason, Some(Utc::now()))
            .await?;
    }

    let monitor = Monitor::new(store.clone(), Duration::from_secs(30 * 60));
    let health = monitor.check(Utc::now()).await?;
    println!(
        "store_scale: {} conversations, {} stuck in an assistant",
        args.conversations, health.stuck
    );
    // A monitor's first check counts the stuck conversations; the next ones, until a small
    // part of the threshold has passed, do not.
    measure(
        "the health monitor's check, counting the stuck ones",
        args.runs,
        || async {
            let fresh = Monitor::new(store.clone(), Duration::from_secs(30 * 60));
            fresh.check(Utc::now()).await.map(drop)
        },
    )
    .await?;
    measure(
        "the health monitor's check between counts",
        args.runs,
        || async { monitor.check(Utc::now()).await.map(drop) },
    )
    .await?;
    let page = ConversationQuery {
        limit: 50,
        ..ConversationQuery::default()
    };
    measure(
        "an operator's page of 50 conversations",
        args.runs,
        || async { store.list_conversations(&page).await.map(drop) },
    )
    .await?;
    let due = store.due_handoffs(Utc::now(), 100).await?.len();
    measure(
        &format!("the handoff escalation's look for due notices ({due} due)"),
        args.runs,
        || async { store.due_handoffs(Utc::now(), 100).await.map(drop) },
    )
    .await?;
    store.drop_database().await?;
    Ok(())
}

/// `n` conversations as the service leaves them, idle for hours, one in ten in an assistant.
async fn fill(store: &MongoStore, n: u32) -> Result<(), Box<dyn std::error::Error>> {
    let collection = store.database().collection::<Document>("conversations");
    let hours_ago = Utc::now() - chrono::Duration::hours(3);
    let mut batch = Vec::with_capacity(1_000);
    for i in 0..n {
        let wa_id = format!("346{i:08}");
        let at = bson::DateTime::from_chrono(hours_ago - chrono::Duration::seconds(i.into()));
        let dialog_state = if i % 10 == 0 {
            vec!["appointment_assistant"]
        } else {
            vec![]
        };
        batch.push(doc! {
            "_id": &wa_id,
            "wa_id": &wa_id,
            "dialog_state": dialog_state,
            "lang": "es",
            "last_inbound_at": at,
            "updated_at": at,
            "state_entered_at": at,
        });
        if batch.len() == 1_000 || i + 1 == n {
            collection.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    Ok(())
}

async fn measure<F, Fut>(what: &str, runs: u32, read: F) -> Result<(), Box<dyn std::error::Error>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), zaguan::store::StoreError>>,
{
    let ticks = procfs::clock_ticks();
    let (own, ferretdb, postgres) = (
        cpu_of_self(ticks),
        cpu_of("ferretdb", ticks),
        cpu_of("postgres", ticks),
    );
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        read().await?;
        times.push(start.elapsed());
    }
    times.sort();
    let per_run = |after: f64, before: f64| (after - before) / f64::from(runs) * 1e3;
    println!(
        "{what}: median {:.1} ms; CPU per read: this process {:.1} ms, ferretdb {:.1} ms, postgres {:.1} ms",
        times[times.len() / 2].as_secs_f64() * 1e3,
        per_run(cpu_of_self(ticks), own),
        per_run(cpu_of("ferretdb", ticks), ferretdb),
        per_run(cpu_of("postgres", ticks), postgres),
    );
    Ok(())
}

fn cpu_of_self(ticks: f64) -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| procfs::stat_seconds(&stat, true, ticks))
        .unwrap_or(0.0)
}

/// CPU seconds of the processes whose name starts with `name`, with their reaped children.
fn cpu_of(name: &str, ticks: f64) -> f64 {
    procfs::seconds_of_named(|comm| comm.starts_with(name), ticks).unwrap_or(0.0)
}
