//! Usage accounting: one record per LLM call, kept per conversation in the store so an operator
//! can see what a conversation cost and why a turn was slow.
//!
//! [`UsageRecorder`] queues each record the policy hands it and a background task writes
//! batches to the store, so accounting never adds a store round trip to a turn. A full queue
//! drops the record and counts it rather than slowing the turn down.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::domain::LlmCall;
use crate::llm::CallLog;
use crate::store::UsageStore;

/// Records waiting to be written; beyond this, new records are dropped (and counted).
const QUEUE: usize = 4096;
/// Records written in one store call.
const BATCH: usize = 256;

enum Command {
    Record(LlmCall),
    Flush(oneshot::Sender<()>),
}

/// A [`CallLog`] writing to the store in the background.
#[derive(Clone)]
pub struct UsageRecorder {
    queue: mpsc::Sender<Command>,
}

impl UsageRecorder {
    /// Starts the writer task; it ends when the last clone is dropped.
    pub fn spawn(store: Arc<dyn UsageStore>) -> Self {
        let (queue, mut commands) = mpsc::channel(QUEUE);
        tokio::spawn(async move {
            let mut received = Vec::with_capacity(BATCH);
            while commands.recv_many(&mut received, BATCH).await > 0 {
                let mut calls = Vec::with_capacity(received.len());
                let mut flushed = Vec::new();
                for command in received.drain(..) {
                    match command {
                        Command::Record(call) => calls.push(call),
                        Command::Flush(done) => flushed.push(done),
                    }
                }
                if !calls.is_empty() {
                    write(store.as_ref(), &calls).await;
                }
                for done in flushed {
                    let _ = done.send(());
                }
            }
        });
        Self { queue }
    }

    /// Waits until every record queued before this call is written (or given up on).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.queue.send(Command::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }
}

/// One batch, tried twice: usage is worth a retry, not a stuck queue.
async fn write(store: &dyn UsageStore, calls: &[LlmCall]) {
    for attempt in 1..=2 {
        match store.insert_llm_calls(calls).await {
            Ok(()) => return,
            Err(error) if attempt == 1 => {
                tracing::warn!("LLM usage not stored, retrying: {error}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => {
                tracing::error!(calls = calls.len(), "LLM usage lost: {error}");
                metrics::counter!("zaguan_llm_usage_lost_total").increment(calls.len() as u64);
            }
        }
    }
}

impl CallLog for UsageRecorder {
    fn record(&self, call: LlmCall) {
        if self.queue.try_send(Command::Record(call)).is_err() {
            tracing::warn!("LLM usage queue full or closed: a usage record was dropped");
            metrics::counter!("zaguan_llm_usage_lost_total").increment(1);
        }
    }
}
