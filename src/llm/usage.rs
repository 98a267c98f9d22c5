//! Usage accounting: one record per LLM call (tokens, latency, outcome), kept per conversation in
//! the store so an operator can see what a conversation cost and why a turn was slow.
//!
//! The policy hands each record to a [`CallLog`] without waiting: [`UsageRecorder`] queues it and
//! a background task writes batches to the store, so accounting never adds a store round trip to
//! a turn. A full queue drops the record and counts it rather than slowing the turn down.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};

use crate::store::Store;

/// How one call ended, as a metric label and a stored field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Ok,
    /// No text and no tool call.
    Empty,
    /// Our own per-call timeout fired.
    Timeout,
    /// Connection error, 429, 5xx, unparsable answer.
    Unavailable,
    /// 400-class: our request was refused.
    Rejected,
    Error,
}

impl CallOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Empty => "empty",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Unavailable => "unavailable",
            CallOutcome::Rejected => "rejected",
            CallOutcome::Error => "error",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            CallOutcome::Ok,
            CallOutcome::Empty,
            CallOutcome::Timeout,
            CallOutcome::Unavailable,
            CallOutcome::Rejected,
            CallOutcome::Error,
        ]
        .into_iter()
        .find(|o| o.as_str() == text)
    }
}

/// One call to one provider (a retry or a fallback is a call of its own).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCall {
    /// The conversation's contact key; `None` for calls outside a conversation.
    pub conversation: Option<String>,
    pub agent: String,
    /// `openai` or `anthropic`.
    pub provider: String,
    pub model: String,
    pub outcome: CallOutcome,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub latency: Duration,
    /// What went wrong, for failed calls (never a secret: see `http::excerpt`).
    pub error: Option<String>,
    pub at: DateTime<Utc>,
}

/// Where the policy reports calls; must not block.
pub trait CallLog: Send + Sync + 'static {
    fn record(&self, call: LlmCall);
}

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
    pub fn spawn(store: Arc<dyn Store>) -> Self {
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
async fn write(store: &dyn Store, calls: &[LlmCall]) {
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
