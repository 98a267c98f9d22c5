//! The seed's agent_invoke policy around the providers, in one place: ask the primary model
//! within a timeout, ask again once when it answers nothing, and fall back to the next model on
//! any failure — unavailable (timeout, connection, 429, 5xx, garbage), empty twice, or refused
//! (a 4xx: a revoked key, a retired model, a context too long, a content filter), as the seed's
//! `with_fallbacks` does. A circuit breaker per provider counts every failure, skips a provider
//! that keeps failing for a cool-down, then lets one probe call through; a semaphore bounds the
//! calls in flight per provider. Every call is measured and reported to the metrics and the
//! [`CallLog`]; a refusal's message is logged once per cause, not once per turn.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::call_log::CallLog;

use super::{Llm, LlmError, LlmRequest, LlmResponse};
use crate::domain::{CallOutcome, LlmCall};

/// The knobs of the policy (`ZAGUAN_LLM_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct CallPolicy {
    /// Longest one call may take, waiting for a free slot included.
    pub timeout: Duration,
    /// Calls in flight per provider; more wait (within `timeout`) for a slot.
    pub max_concurrency: usize,
    /// Consecutive failed calls that open a provider's breaker.
    pub breaker_failures: u32,
    /// How long an open breaker skips its provider before one probe call is let through.
    pub breaker_cooldown: Duration,
}

impl Default for CallPolicy {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_concurrency: 64,
            breaker_failures: 3,
            breaker_cooldown: Duration::from_secs(30),
        }
    }
}

/// Providers tried in order, each named `provider:model` (`openai:gpt-4.1-mini`).
pub struct FallbackChain {
    providers: Vec<Provider>,
    policy: CallPolicy,
    log: Option<Arc<dyn CallLog>>,
    refusals: Refusals,
}

struct Provider {
    /// `provider:model`, for logs.
    name: String,
    provider: String,
    model: String,
    llm: Arc<dyn Llm>,
    slots: Semaphore,
    breaker: Breaker,
}

impl FallbackChain {
    pub fn new(providers: Vec<(String, Arc<dyn Llm>)>, policy: CallPolicy) -> Self {
        let providers = providers
            .into_iter()
            .map(|(name, llm)| {
                let (provider, model) = name
                    .split_once(':')
                    .map_or((name.as_str(), ""), |(p, m)| (p, m));
                // Exported from the start, so a dashboard shows closed breakers as 0.
                metrics::gauge!("zaguan_llm_breaker_open",
                    "provider" => provider.to_owned(), "model" => model.to_owned())
                .set(0.0);
                Provider {
                    provider: provider.to_owned(),
                    model: model.to_owned(),
                    llm,
                    slots: Semaphore::new(policy.max_concurrency.max(1)),
                    breaker: Breaker::new(policy.breaker_failures.max(1), policy.breaker_cooldown),
                    name,
                }
            })
            .collect();
        Self {
            providers,
            policy,
            log: None,
            refusals: Refusals::default(),
        }
    }

    /// Reports every call to `log` (usage accounting per conversation).
    pub fn with_call_log(mut self, log: Arc<dyn CallLog>) -> Self {
        self.log = Some(log);
        self
    }

    /// The providers whose breaker is open (skipped) or probing, by `provider:model`.
    pub fn open_breakers(&self) -> Vec<&str> {
        self.providers
            .iter()
            .filter(|p| !p.breaker.is_closed())
            .map(|p| p.name.as_str())
            .collect()
    }

    /// One call to one provider: a slot, then the call, both within the timeout; measured and
    /// reported. The outer `Err` means no slot freed up in time (nothing was sent, nothing is
    /// reported); the inner result is the call's own.
    async fn attempt(
        &self,
        provider: &Provider,
        request: &LlmRequest,
    ) -> Result<Result<LlmResponse, LlmError>, LlmError> {
        let started = Instant::now();
        let Ok(slot) = tokio::time::timeout(self.policy.timeout, provider.slots.acquire()).await
        else {
            metrics::counter!("zaguan_llm_saturated_total",
                "provider" => provider.provider.clone(), "model" => provider.model.clone())
            .increment(1);
            return Err(LlmError::Unavailable(format!(
                "{}: {} calls in flight, no slot within {:?}",
                provider.name, self.policy.max_concurrency, self.policy.timeout
            )));
        };
        let remaining = self.policy.timeout.saturating_sub(started.elapsed());
        let outcome = tokio::time::timeout(remaining, provider.llm.complete(request)).await;
        drop(slot);
        let latency = started.elapsed();
        let (label, result) = match outcome {
            Err(_) => (
                CallOutcome::Timeout,
                Err(LlmError::Unavailable(format!(
                    "{}: no answer within {:?}",
                    provider.name, self.policy.timeout
                ))),
            ),
            Ok(Ok(response)) if is_empty_answer(&response) => (CallOutcome::Empty, Ok(response)),
            Ok(Ok(response)) => (CallOutcome::Ok, Ok(response)),
            Ok(Err(error)) => (
                match error {
                    LlmError::Unavailable(_) => CallOutcome::Unavailable,
                    LlmError::Rejected { .. } => CallOutcome::Rejected,
                    LlmError::Unexpected(_) => CallOutcome::Error,
                },
                Err(error),
            ),
        };
        self.report(provider, request, label, &result, latency);
        Ok(result)
    }

    fn report(
        &self,
        provider: &Provider,
        request: &LlmRequest,
        outcome: CallOutcome,
        result: &Result<LlmResponse, LlmError>,
        latency: Duration,
    ) {
        let usage = result.as_ref().map(|r| r.usage).unwrap_or_default();
        let (p, m) = (provider.provider.clone(), provider.model.clone());
        metrics::counter!("zaguan_llm_calls_total",
            "provider" => p.clone(), "model" => m.clone(), "outcome" => outcome.as_str())
        .increment(1);
        metrics::histogram!("zaguan_llm_call_duration_seconds",
            "provider" => p.clone(), "model" => m.clone(), "outcome" => outcome.as_str())
        .record(latency.as_secs_f64());
        if usage.input_tokens + usage.output_tokens > 0 {
            // Usage comes with answers, so the outcome is nearly always `ok`; an empty answer
            // that still cost tokens shows as `empty`.
            metrics::counter!("zaguan_llm_tokens_total",
                "provider" => p.clone(), "model" => m.clone(), "outcome" => outcome.as_str(),
                "kind" => "input")
            .increment(usage.input_tokens);
            metrics::counter!("zaguan_llm_tokens_total",
                "provider" => p, "model" => m, "outcome" => outcome.as_str(), "kind" => "output")
            .increment(usage.output_tokens);
        }
        tracing::debug!(
            llm.provider = %provider.name,
            llm.agent = %request.agent,
            llm.outcome = outcome.as_str(),
            llm.latency_ms = latency.as_millis() as u64,
            llm.input_tokens = usage.input_tokens,
            llm.output_tokens = usage.output_tokens,
            "LLM call"
        );
        if let Some(log) = &self.log {
            log.record(LlmCall {
                conversation: request.conversation.clone(),
                agent: request.agent.clone(),
                provider: provider.provider.clone(),
                model: provider.model.clone(),
                outcome,
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                latency,
                error: result.as_ref().err().map(ToString::to_string),
                at: Utc::now(),
            });
        }
    }
}

impl FallbackChain {
    /// This conversation's history, not the provider, was too long: once more with the older
    /// half left out. `None` when there is no shorter history or it did not answer.
    async fn with_shorter_history(
        &self,
        provider: &Provider,
        request: &LlmRequest,
    ) -> Option<LlmResponse> {
        let shorter = shortened(request)?;
        tracing::info!(llm.provider = %provider.name, "context too long: asking again with a shorter history");
        match self.attempt(provider, &shorter).await {
            Ok(Ok(response)) if !is_empty_answer(&response) => Some(response),
            _ => None,
        }
    }
}

fn is_empty_answer(response: &LlmResponse) -> bool {
    response.content.trim().is_empty() && response.tool_calls.is_empty()
}

#[async_trait]
impl Llm for FallbackChain {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let mut last_error = LlmError::Unavailable("no LLM provider configured".to_owned());
        let mut previous: Option<&str> = None;
        for provider in &self.providers {
            if !provider.breaker.admit(self.policy.timeout) {
                metrics::counter!("zaguan_llm_breaker_skips_total",
                    "provider" => provider.provider.clone(), "model" => provider.model.clone())
                .increment(1);
                tracing::debug!(llm.provider = %provider.name, "breaker open: provider skipped");
                last_error = LlmError::Unavailable(format!(
                    "{}: breaker open after repeated failures",
                    provider.name
                ));
                previous = Some(&provider.name);
                continue;
            }
            if let Some(from) = previous {
                if matches!(last_error, LlmError::Rejected { .. }) {
                    // Its message was logged once, by cause, when first seen.
                    tracing::debug!(llm.provider = %provider.name, "falling back from {from}: {last_error}");
                } else {
                    tracing::warn!(llm.provider = %provider.name, "falling back from {from}: {last_error}");
                }
                metrics::counter!("zaguan_llm_fallbacks_total",
                    "from" => from.to_owned(), "to" => provider.name.clone())
                .increment(1);
            }
            previous = Some(&provider.name);
            // An empty answer is asked once more before the next provider is tried.
            for attempt in 1..=2 {
                let outcome = match self.attempt(provider, request).await {
                    Ok(outcome) => outcome,
                    Err(saturated) => {
                        // Our own load, not the provider's health: no breaker failure.
                        last_error = saturated;
                        break;
                    }
                };
                match outcome {
                    Ok(response) if !is_empty_answer(&response) => {
                        provider.breaker.record(true, &provider.name);
                        return Ok(response);
                    }
                    Ok(_) => {
                        last_error =
                            LlmError::Unavailable(format!("{} answered nothing", provider.name));
                        if attempt == 1 {
                            tracing::info!(llm.provider = %provider.name, "empty answer, asking once more");
                        } else {
                            provider.breaker.record(false, &provider.name);
                        }
                    }
                    Err(LlmError::Rejected { status, message }) => {
                        let refusal = Refusal::of(status, &message);
                        metrics::counter!("zaguan_llm_refusals_total",
                            "provider" => provider.provider.clone(),
                            "model" => provider.model.clone(),
                            "status" => status.to_string(),
                            "kind" => refusal.as_str())
                        .increment(1);
                        self.refusals.note(&provider.name, status, &message);
                        if refusal == Refusal::Provider {
                            // The provider's own state (a revoked key, a retired model).
                            provider.breaker.record(false, &provider.name);
                        } else if refusal == Refusal::ContextLength
                            // Boxed: rare, and a waiting call's future would otherwise keep
                            // room for a second request and its call.
                            && let Some(response) =
                                Box::pin(self.with_shorter_history(provider, request)).await
                        {
                            return Ok(response);
                        }
                        last_error = LlmError::Rejected { status, message };
                        break;
                    }
                    Err(error) => {
                        provider.breaker.record(false, &provider.name);
                        last_error = error;
                        break;
                    }
                }
            }
        }
        Err(last_error)
    }
}

/// What a refusal is about: this one conversation (its content tripped a filter, its history
/// is too long) or the provider's state. Only the latter counts against the provider, so one
/// customer cannot open the breaker for everyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    ContentFilter,
    ContextLength,
    Provider,
}

impl Refusal {
    /// From the status and the provider's message (OpenAI, Azure, Anthropic and compatible
    /// servers word them alike); 401, 403 and 404 are always the provider's.
    pub fn of(status: u16, message: &str) -> Self {
        if matches!(status, 401 | 403 | 404) {
            return Refusal::Provider;
        }
        let message = message.to_ascii_lowercase();
        let any = |needles: &[&str]| needles.iter().any(|n| message.contains(n));
        if any(&[
            "context_length_exceeded",
            "maximum context length",
            "context length",
            "context window",
            "prompt is too long",
            "too many tokens",
            "input is too long",
            "reduce the length",
        ]) {
            Refusal::ContextLength
        } else if any(&[
            "content_filter",
            "content filter",
            "content management policy",
            "content_policy",
            "responsible ai",
            "refusal",
            "safety",
            "flagged",
        ]) {
            Refusal::ContentFilter
        } else {
            Refusal::Provider
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::ContentFilter => "content_filter",
            Refusal::ContextLength => "context_length",
            Refusal::Provider => "provider",
        }
    }
}

/// `request` with the older half of its history left out, starting at a user message (so no
/// tool result is left without its call); `None` when there is nothing to leave out.
fn shortened(request: &LlmRequest) -> Option<LlmRequest> {
    let messages = &request.messages;
    let start = (messages.len() / 2..messages.len())
        .find(|&i| matches!(messages[i], super::ChatMessage::Human { .. }))?;
    (start > 0).then(|| LlmRequest {
        messages: messages[start..].to_vec(),
        ..request.clone()
    })
}

/// The causes of refusals already logged: a revoked key refuses every turn, and one error line
/// says so as well as a thousand. A cause is the provider, the status and the message with its
/// numbers blanked (a context-length message names each request's token count).
#[derive(Default)]
struct Refusals {
    seen: Mutex<HashSet<String>>,
}

/// Causes remembered before the set starts over (and logs each cause once more).
const REFUSAL_CAUSES: usize = 256;

impl Refusals {
    fn note(&self, provider: &str, status: u16, message: &str) {
        let cause: String = format!("{provider} {status} {message}")
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        let first = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.len() >= REFUSAL_CAUSES {
                seen.clear();
            }
            seen.insert(cause)
        };
        if first {
            tracing::error!(
                llm.provider = %provider,
                http.status = status,
                "provider refused the request, falling back (logged once per cause): {message}"
            );
        } else {
            tracing::debug!(llm.provider = %provider, http.status = status, "refused again: {message}");
        }
    }
}

/// A per-provider circuit breaker: closed (calls go through) → open after `failures_to_open`
/// consecutive failures (calls skipped) → after the cool-down one probe call goes through: its
/// success closes the breaker, its failure opens it for another cool-down.
struct Breaker {
    state: Mutex<BreakerState>,
    failures_to_open: u32,
    cooldown: Duration,
}

#[derive(Debug, Clone, Copy)]
enum BreakerState {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// One probe call in flight since then; others are skipped until it reports (or it is
    /// overdue, e.g. its turn was cancelled, and another probe may go).
    Probing {
        since: Instant,
    },
}

impl Breaker {
    fn new(failures_to_open: u32, cooldown: Duration) -> Self {
        Self {
            state: Mutex::new(BreakerState::Closed { failures: 0 }),
            failures_to_open,
            cooldown,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BreakerState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn is_closed(&self) -> bool {
        matches!(*self.lock(), BreakerState::Closed { .. })
    }

    /// Whether a call may go to the provider now; `call_timeout` bounds how long a probe is
    /// waited for.
    fn admit(&self, call_timeout: Duration) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        match *state {
            BreakerState::Closed { .. } => true,
            BreakerState::Open { until } if now >= until => {
                *state = BreakerState::Probing { since: now };
                true
            }
            BreakerState::Probing { since } if now >= since + call_timeout * 2 => {
                *state = BreakerState::Probing { since: now };
                true
            }
            BreakerState::Open { .. } | BreakerState::Probing { .. } => false,
        }
    }

    fn record(&self, healthy: bool, name: &str) {
        let mut state = self.lock();
        let next = match (*state, healthy) {
            (BreakerState::Closed { .. }, true) => BreakerState::Closed { failures: 0 },
            (BreakerState::Closed { failures }, false) if failures + 1 < self.failures_to_open => {
                BreakerState::Closed {
                    failures: failures + 1,
                }
            }
            (_, false) => BreakerState::Open {
                until: Instant::now() + self.cooldown,
            },
            (_, true) => BreakerState::Closed { failures: 0 },
        };
        let was_open = !matches!(*state, BreakerState::Closed { .. });
        let is_open = !matches!(next, BreakerState::Closed { .. });
        *state = next;
        drop(state);
        let (provider, model) = name.split_once(':').unwrap_or((name, ""));
        if is_open && !was_open {
            tracing::warn!(llm.provider = %name, cooldown = ?self.cooldown, "breaker opened: provider skipped until a probe succeeds");
        } else if was_open && !is_open {
            tracing::info!(llm.provider = %name, "breaker closed: provider answers again");
        } else if is_open {
            tracing::warn!(llm.provider = %name, "probe failed: breaker open again");
        }
        if is_open != was_open {
            metrics::gauge!("zaguan_llm_breaker_open",
                "provider" => provider.to_owned(), "model" => model.to_owned())
            .set(if is_open { 1.0 } else { 0.0 });
        }
    }
}

#[cfg(test)]
mod tests;
