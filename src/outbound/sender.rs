//! The sender: takes a conversation's unsent outbox parts, oldest first, and hands each to the
//! Graph API once. It runs under the conversation's lease (the worker calls it after each turn
//! and for conversations with retries due), so two processes never send the same part and a
//! conversation's parts go out in order: a part waiting for a retry holds back the ones after it.
//!
//! Each part is marked `sending` before the call (a turn's reply is stored so, when it is sent
//! at once) and `sent` with its wamid after, and carries
//! its outbox id in `biz_opaque_callback_data`. A crash in between leaves it `sending`; Meta's
//! status webhook for it names the part by that id and records it sent. A part still
//! `sending` when another worker finds it waits `unconfirmed_grace` from its attempt for that
//! status, and only then is sent again (the Graph API has no idempotency key: a duplicate is
//! preferred to a lost reply). A part already `sent` is never sent again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng as _;

use super::graph::{GraphClient, OutboundMessage, SendError};
use super::limits::Limiters;
use crate::domain::OutboxId;
use crate::domain::{GraphError, WaId, WaMessageId};
use crate::store::{Media, OutboxEntry, OutboxStatus, OutboxUpdate, Store, StoreError};

/// How the sender retries.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboundSettings {
    /// The first retry's delay; doubled on each attempt (with jitter) up to `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// Attempts after which a part is marked `failed`.
    pub max_attempts: u32,
    /// A retry due within this is waited for in place; a later one is scheduled, and the
    /// worker moves on.
    pub wait_in_place: Duration,
    /// How long parts wait after the access token was refused (190) before trying again.
    pub token_retry: Duration,
    /// The typing indicator shows for 25 s; it is renewed this often while a turn runs.
    pub typing_renewal: Duration,
    /// How long a part left `sending` (its process died or lost the lease during the call)
    /// waits, from its attempt, for a status webhook to confirm it before it is sent again.
    /// Longer than the Graph API timeout, so a call still running elsewhere ends first.
    pub unconfirmed_grace: Duration,
}

impl Default for OutboundSettings {
    fn default() -> Self {
        Self {
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            max_attempts: 8,
            wait_in_place: Duration::from_secs(10),
            token_retry: Duration::from_secs(300),
            typing_renewal: Duration::from_secs(20),
            unconfirmed_grace: Duration::from_secs(30),
        }
    }
}

/// How long a delivered part's `sent` keeps being retried while the store is unavailable.
const RECORD_PATIENCE: Duration = Duration::from_secs(600);

/// The outbound channel of one process.
pub struct Outbound {
    store: Arc<dyn Store>,
    graph: Arc<GraphClient>,
    limiters: Arc<Limiters>,
    settings: OutboundSettings,
    /// Parts whose call (and the record of its answer) is running in this process, possibly
    /// past the work that started it (its lease lost, or the store failing right after the
    /// call): this process does not send them again meanwhile.
    in_flight: InFlight,
}

impl Outbound {
    pub fn new(
        store: Arc<dyn Store>,
        graph: GraphClient,
        limiters: Limiters,
        settings: OutboundSettings,
    ) -> Self {
        Self {
            store,
            graph: Arc::new(graph),
            limiters: Arc::new(limiters),
            settings,
            in_flight: InFlight::default(),
        }
    }

    pub fn is_dry_run(&self) -> bool {
        self.graph.is_dry_run()
    }

    /// A dry-run channel over `store`: replies are marked sent and only logged.
    pub fn dry_run(store: Arc<dyn Store>) -> Self {
        let graph = GraphClient::new(
            "http://127.0.0.1/".parse().expect("a valid URL"),
            None,
            Duration::from_secs(1),
        )
        .expect("a dry-run client always builds");
        Self::new(
            store,
            graph,
            Limiters::new(&super::SendLimits::default()),
            OutboundSettings::default(),
        )
    }

    /// Forgets rate-limit state of recipients idle long enough to have their allowance back.
    pub fn forget_idle(&self) {
        self.limiters.forget_idle();
    }

    /// How long a part whose answer was lost waits for its status before it is sent again.
    pub fn unconfirmed_grace(&self) -> Duration {
        self.settings.unconfirmed_grace
    }

    /// Sends the conversation's unsent parts in order. Returns when all are sent or failed, or
    /// when one must wait for a retry (scheduled in the outbox; the worker comes back for it).
    pub async fn flush(&self, wa_id: &WaId) -> Result<Flushed, StoreError> {
        let mut unsent = self.store.unsent_outbox(wa_id).await?.into_iter();
        while let Some(entry) = unsent.next() {
            if self.in_flight.contains(&entry.id) || self.awaits_confirmation(&entry) {
                // Its call or record is still running, or its status may still confirm it.
                // The parts behind it wait for it; the worker looks again at its next poll.
                return Ok(Flushed::Waiting);
            }
            match self.send_part(entry).await? {
                PartOutcome::Settled => continue,
                // Its status may still confirm it: as above.
                PartOutcome::Unconfirmed => return Ok(Flushed::Waiting),
                PartOutcome::WaitUntil(due) => {
                    // The parts behind wait as long, so the conversation is not picked up
                    // again before then only to find its first part still waiting.
                    for later in unsent.by_ref() {
                        if later.next_attempt_at.is_none_or(|at| at < due) {
                            let update = OutboxUpdate::Retry {
                                at: due,
                                error: later.error.clone(),
                            };
                            self.store.update_outbox(&later.id, &update).await?;
                        }
                    }
                    return Ok(Flushed::Waiting);
                }
            }
        }
        Ok(Flushed::All)
    }

    /// Sends a turn's new reply (nothing of it stored yet), part after part, then records
    /// each part as it ended — sent with its wamid, waiting for a retry, failed — in one write.
    /// The calls and the record run to their end in a task of their own, even when the work
    /// that asked is dropped; meanwhile this process sends none of the parts again. If the
    /// process dies first, the turn resumes, finds the reply unrecorded and records it as
    /// unconfirmed: its status webhook (which names each part) or its grace settles it.
    pub async fn send_reply(&self, parts: Vec<OutboxEntry>) -> Result<Flushed, StoreError> {
        let guards: Vec<InFlightGuard> = parts
            .iter()
            .map(|part| self.in_flight.enter(&part.id))
            .collect();
        let sender = self.clone_for_task();
        let task = tokio::spawn(async move {
            let (parts, flushed) = sender.call_in_order(parts).await;
            let recorded = record_with_patience(sender.store.as_ref(), &parts).await;
            drop(guards);
            recorded.map(|()| flushed)
        });
        task.await
            .map_err(|e| StoreError::Unexpected(anyhow::anyhow!("send task failed: {e}")))?
    }

    /// What a send task needs of this channel.
    fn clone_for_task(&self) -> Self {
        Self {
            store: self.store.clone(),
            graph: self.graph.clone(),
            limiters: self.limiters.clone(),
            settings: self.settings.clone(),
            in_flight: self.in_flight.clone(),
        }
    }

    /// Calls the Graph API for each part in order, noting on each how it ended; stops at a
    /// part that must wait (the ones behind it wait as long).
    async fn call_in_order(&self, mut parts: Vec<OutboxEntry>) -> (Vec<OutboxEntry>, Flushed) {
        let mut flushed = Flushed::All;
        let mut waiting_until: Option<DateTime<Utc>> = None;
        for entry in &mut parts {
            if let Some(due) = waiting_until {
                // Behind a part that waits: queued as long.
                entry.next_attempt_at = Some(due);
                continue;
            }
            let masked = entry.wa_id.masked();
            let Some(phone_number_id) = entry.phone_number_id.clone() else {
                entry.status = OutboxStatus::Failed;
                entry.error = Some(local_error("no phone_number_id to send from"));
                continue;
            };
            self.limiters
                .until_send_allowed(&phone_number_id, entry.wa_id.as_str())
                .await;
            let now = Utc::now();
            entry.attempts = 1;
            entry.sending_at = Some(now);
            let sent = send_entry(
                &self.graph,
                &phone_number_id,
                entry,
                &entry.id.callback_data(),
            )
            .await;
            match sent {
                Ok(wamid) => {
                    let status = if wamid.is_some() { "sent" } else { "dry_run" };
                    if wamid.is_none() {
                        tracing::info!(conversation.id = %masked, part = entry.part, "dry run: reply not sent (no WHATSAPP_ACCESS_TOKEN)");
                        tracing::debug!(body = %entry.body, "dry-run reply");
                    }
                    metrics::counter!("zaguan_outbound_sends_total", "status" => status, "code" => "none")
                        .increment(1);
                    entry.status = OutboxStatus::Sent;
                    entry.wamid = wamid;
                }
                Err(error) => {
                    metrics::counter!("zaguan_outbound_sends_total",
                        "status" => status_label(&error), "code" => error.code_label())
                    .increment(1);
                    let wait = match error {
                        SendError::Retry { error, retry_after } => {
                            let delay = self.backoff(1).max(retry_after.unwrap_or_default());
                            tracing::warn!(conversation.id = %masked, ?delay, "send failed, retrying: {error}");
                            entry.error = Some(error);
                            Some(delay)
                        }
                        SendError::Unconfirmed { error } => {
                            // Left `sending`: its status webhook may confirm it within the
                            // grace; if none does, the part is sent again then.
                            tracing::warn!(conversation.id = %masked, part = entry.part, "the Graph API's answer was lost; waiting for the part's status before sending it again: {error}");
                            entry.status = OutboxStatus::Sending;
                            Some(self.settings.unconfirmed_grace)
                        }
                        SendError::Token { error } => {
                            tracing::error!(conversation.id = %masked, "the Graph API refused the access token; replies wait until WHATSAPP_ACCESS_TOKEN is replaced: {error}");
                            metrics::counter!("zaguan_outbound_alerts_total", "reason" => "token")
                                .increment(1);
                            entry.error = Some(error);
                            Some(self.settings.token_retry)
                        }
                        SendError::Policy { error } => {
                            tracing::error!(conversation.id = %masked, "WhatsApp quality or policy limit, reply dropped; check the account's quality rating: {error}");
                            metrics::counter!("zaguan_outbound_alerts_total", "reason" => "policy")
                                .increment(1);
                            entry.status = OutboxStatus::Failed;
                            entry.error = Some(error);
                            None
                        }
                        SendError::Permanent { error } => {
                            tracing::error!(conversation.id = %masked, part = entry.part, "reply refused, not retried: {error}");
                            entry.status = OutboxStatus::Failed;
                            entry.error = Some(error);
                            None
                        }
                    };
                    if let Some(wait) = wait {
                        let due = now + chrono::Duration::from_std(wait).unwrap_or_default();
                        entry.next_attempt_at = Some(due);
                        waiting_until = Some(due);
                        flushed = Flushed::Waiting;
                    }
                }
            }
        }
        (parts, flushed)
    }

    /// Whether a part left `sending` by an earlier attempt (its process died, or lost the lease,
    /// before recording the answer) is still within the grace in which its status webhook may
    /// confirm it.
    fn awaits_confirmation(&self, entry: &OutboxEntry) -> bool {
        if entry.status != OutboxStatus::Sending {
            return false;
        }
        // Each attempt records its grace's end as `next_attempt_at`. MongoDB records `sent` in
        // two writes, the first clearing it: read between them, the grace from `sending_at`.
        let due = entry
            .next_attempt_at
            .unwrap_or_else(|| entry.sending_at.unwrap_or_default() + self.grace());
        let waiting = due > Utc::now();
        if waiting {
            tracing::debug!(conversation.id = %entry.wa_id.masked(), part = entry.part, %due, "waiting for the status of a part's unconfirmed attempt");
        }
        waiting
    }

    fn grace(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.settings.unconfirmed_grace).unwrap_or(chrono::Duration::MAX)
    }

    /// The limits this process sends within (shared with the other instances).
    pub fn limiters(&self) -> &Arc<Limiters> {
        &self.limiters
    }

    /// Shows the user their message was read and a reply is being written, renewed every
    /// `typing_renewal` until the returned guard is dropped. Failures are logged, never fatal.
    pub fn typing(&self, phone_number_id: &str, wamid: &WaMessageId) -> Typing {
        if self.graph.is_dry_run() {
            return Typing(None);
        }
        let (graph, limiters) = (self.graph.clone(), self.limiters.clone());
        let (phone_number_id, wamid) = (phone_number_id.to_owned(), wamid.clone());
        let renewal = self.settings.typing_renewal;
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            // The first mark always goes out, however short the turn: the user sees their
            // message read. Renewals stop with the turn.
            loop {
                limiters.until_call_allowed(&phone_number_id).await;
                match graph.mark_read(&phone_number_id, &wamid, true).await {
                    Ok(()) => {
                        metrics::counter!("zaguan_outbound_read_marks_total", "status" => "ok")
                            .increment(1)
                    }
                    Err(error) => {
                        tracing::warn!("cannot mark the message read: {error}");
                        metrics::counter!("zaguan_outbound_read_marks_total", "status" => "error")
                            .increment(1);
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(renewal) => {}
                    _ = &mut stopped => break,
                }
            }
        });
        Typing(Some(stop))
    }

    /// Sends one part, retrying in place while the wait is short. `fresh`: stored `sending`
    /// for this very attempt, so its first call needs no `sending` write.
    async fn send_part(&self, mut entry: OutboxEntry) -> Result<PartOutcome, StoreError> {
        let masked = entry.wa_id.masked();
        if entry.status == OutboxStatus::Sending {
            metrics::counter!("zaguan_outbound_unconfirmed_resent_total").increment(1);
            tracing::warn!(conversation.id = %masked, part = entry.part, "no status confirmed a part's last attempt; sending it again");
        }
        loop {
            if let Some(due) = entry.next_attempt_at {
                let wait = (due - Utc::now()).to_std().unwrap_or_default();
                if wait > self.settings.wait_in_place {
                    return Ok(PartOutcome::WaitUntil(due));
                }
                tokio::time::sleep(wait).await;
            }
            let Some(phone_number_id) = entry.phone_number_id.clone() else {
                // Nothing to send it from: a reply written without an inbound message.
                self.fail(&entry, local_error("no phone_number_id to send from"))
                    .await?;
                return Ok(PartOutcome::Settled);
            };
            if entry.attempts >= self.settings.max_attempts {
                let error = entry.error.clone().unwrap_or_else(|| {
                    local_error(&format!("gave up after {} attempts", entry.attempts))
                });
                self.fail(&entry, error).await?;
                return Ok(PartOutcome::Settled);
            }
            self.limiters
                .until_send_allowed(&phone_number_id, entry.wa_id.as_str())
                .await;
            let now = Utc::now();
            let sending = OutboxUpdate::Sending {
                at: now,
                resend_at: now + self.grace(),
            };
            if !self.store.update_outbox(&entry.id, &sending).await? {
                // A status webhook confirmed an earlier attempt meanwhile.
                return Ok(PartOutcome::Settled);
            }
            entry.attempts += 1;
            // The call and the record of its success run to the end in a task of their own,
            // even when this work is dropped (its lease lost mid-send): a part delivered but
            // left `sending` would be sent again by the conversation's next owner.
            let call = {
                let (graph, store, entry) = (self.graph.clone(), self.store.clone(), entry.clone());
                let in_flight = self.in_flight.enter(&entry.id);
                tokio::spawn(async move {
                    let callback_data = entry.id.callback_data();
                    let sent = send_entry(&graph, &phone_number_id, &entry, &callback_data).await;
                    let recorded = match &sent {
                        Ok(wamid) => {
                            let update = OutboxUpdate::Sent {
                                wamid: wamid.clone(),
                            };
                            record_sent(store.as_ref(), &entry.id, &update).await
                        }
                        Err(_) => Ok(()),
                    };
                    drop(in_flight);
                    (sent, recorded)
                })
            };
            let (sent, recorded) = call
                .await
                .map_err(|e| StoreError::Unexpected(anyhow::anyhow!("send task failed: {e}")))?;
            match sent {
                Ok(wamid) => {
                    let status = if wamid.is_some() { "sent" } else { "dry_run" };
                    if wamid.is_none() {
                        tracing::info!(conversation.id = %masked, part = entry.part, "dry run: reply not sent (no WHATSAPP_ACCESS_TOKEN)");
                        tracing::debug!(body = %entry.body, "dry-run reply");
                    }
                    recorded?;
                    metrics::counter!("zaguan_outbound_sends_total", "status" => status, "code" => "none")
                        .increment(1);
                    return Ok(PartOutcome::Settled);
                }
                Err(error) => {
                    metrics::counter!("zaguan_outbound_sends_total",
                        "status" => status_label(&error), "code" => error.code_label())
                    .increment(1);
                    match error {
                        SendError::Retry { error, retry_after } => {
                            let delay = self
                                .backoff(entry.attempts)
                                .max(retry_after.unwrap_or_default());
                            tracing::warn!(conversation.id = %masked, attempt = entry.attempts, ?delay, "send failed, retrying: {error}");
                            let at = self.retry_later(&entry, delay, &error).await?;
                            entry.next_attempt_at = Some(at);
                            entry.error = Some(error);
                        }
                        SendError::Unconfirmed { error } => {
                            // Left `sending`: its status webhook may confirm it within the
                            // grace; if none does, the part is sent again then.
                            tracing::warn!(conversation.id = %masked, part = entry.part, "the Graph API's answer was lost; waiting for the part's status before sending it again: {error}");
                            return Ok(PartOutcome::Unconfirmed);
                        }
                        SendError::Token { error } => {
                            tracing::error!(conversation.id = %masked, "the Graph API refused the access token; replies wait until WHATSAPP_ACCESS_TOKEN is replaced: {error}");
                            metrics::counter!("zaguan_outbound_alerts_total", "reason" => "token")
                                .increment(1);
                            // Retried every `token_retry` until `max_attempts` (40 min by
                            // default): a reply older than that is stale anyway.
                            let at = self
                                .retry_later(&entry, self.settings.token_retry, &error)
                                .await?;
                            return Ok(PartOutcome::WaitUntil(at));
                        }
                        SendError::Policy { error } => {
                            tracing::error!(conversation.id = %masked, "WhatsApp quality or policy limit, reply dropped; check the account's quality rating: {error}");
                            metrics::counter!("zaguan_outbound_alerts_total", "reason" => "policy")
                                .increment(1);
                            self.fail(&entry, error).await?;
                            return Ok(PartOutcome::Settled);
                        }
                        SendError::Permanent { error } => {
                            tracing::error!(conversation.id = %masked, part = entry.part, "reply refused, not retried: {error}");
                            self.fail(&entry, error).await?;
                            return Ok(PartOutcome::Settled);
                        }
                    }
                }
            }
        }
    }

    /// Schedules the part's next attempt `delay` from now; returns when.
    async fn retry_later(
        &self,
        entry: &OutboxEntry,
        delay: Duration,
        error: &GraphError,
    ) -> Result<DateTime<Utc>, StoreError> {
        let at =
            Utc::now() + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::days(1));
        let update = OutboxUpdate::Retry {
            at,
            error: Some(error.clone()),
        };
        self.store.update_outbox(&entry.id, &update).await?;
        Ok(at)
    }

    async fn fail(&self, entry: &OutboxEntry, error: GraphError) -> Result<(), StoreError> {
        self.store
            .update_outbox(&entry.id, &OutboxUpdate::Failed { error })
            .await
            .map(drop)
    }

    /// `base · 2^(attempt-1)`, capped, with jitter over its upper half so retries of many
    /// conversations do not land together.
    fn backoff(&self, attempt: u32) -> Duration {
        let exponential = self
            .settings
            .base_backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(20))
            .min(self.settings.max_backoff);
        let half = exponential / 2;
        half + half.mul_f64(rand::rng().random::<f64>())
    }
}

/// Where a conversation's parts stand after a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Every part was sent or failed for good.
    All,
    /// A part waits (a retry scheduled, or its status awaited); the ones behind it too.
    Waiting,
}

/// What became of one part.
enum PartOutcome {
    /// Sent, failed for good, or already confirmed: the next part may go.
    Settled,
    /// A retry is scheduled then; the parts behind it wait as long.
    WaitUntil(DateTime<Utc>),
    /// The call's answer was lost; the part stays `sending` until its status confirms it or
    /// the grace runs out. The parts behind it wait.
    Unconfirmed,
}

/// The typing indicator while a turn runs; dropping it stops the renewals.
pub struct Typing(
    #[allow(dead_code, reason = "dropping it is the signal")]
    Option<tokio::sync::oneshot::Sender<()>>,
);

/// Parts whose call is running in this process.
#[derive(Clone, Default)]
struct InFlight(Arc<std::sync::Mutex<HashSet<OutboxId>>>);

impl InFlight {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<OutboxId>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn contains(&self, id: &OutboxId) -> bool {
        self.set().contains(id)
    }

    /// Marks `id` in flight until the returned guard drops (also when its task panics).
    fn enter(&self, id: &OutboxId) -> InFlightGuard {
        self.set().insert(id.clone());
        InFlightGuard(self.clone(), id.clone())
    }
}

struct InFlightGuard(InFlight, OutboxId);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.set().remove(&self.1);
    }
}

/// Records a delivered part as `sent`. While the store is unavailable it keeps trying, for up
/// to [`RECORD_PATIENCE`], the part still in flight so this process does not send it again:
/// left `sending`, it would wait for its status webhook or go out twice.
async fn record_sent(
    store: &dyn Store,
    id: &OutboxId,
    update: &OutboxUpdate,
) -> Result<(), StoreError> {
    let mut result = store.update_outbox(id, update).await.map(drop);
    if !matches!(result, Err(StoreError::Unavailable(_))) {
        return result;
    }
    let deadline = std::time::Instant::now() + RECORD_PATIENCE;
    let mut delay = Duration::from_millis(100);
    while matches!(result, Err(StoreError::Unavailable(_))) && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
        result = store.update_outbox(id, update).await.map(drop);
    }
    if result.is_ok() {
        metrics::counter!("zaguan_outbound_late_records_total").increment(1);
    }
    result
}

/// Records a reply's parts. While the store is unavailable it keeps trying, for up to
/// [`RECORD_PATIENCE`], the parts still in flight so this process does not send them again.
async fn record_with_patience(store: &dyn Store, parts: &[OutboxEntry]) -> Result<(), StoreError> {
    let mut result = store.record_reply(parts).await;
    if !matches!(result, Err(StoreError::Unavailable(_))) {
        return result;
    }
    let deadline = std::time::Instant::now() + RECORD_PATIENCE;
    let mut delay = Duration::from_millis(100);
    while matches!(result, Err(StoreError::Unavailable(_))) && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
        result = store.record_reply(parts).await;
    }
    if result.is_ok() {
        metrics::counter!("zaguan_outbound_late_records_total").increment(1);
    }
    result
}

/// Sends `entry`. An image or a list WhatsApp refuses for good (a link it cannot fetch, a list
/// it will not show) goes again at once as its plain-text form: the customer gets the words
/// and the link rather than nothing.
async fn send_entry(
    graph: &GraphClient,
    phone_number_id: &str,
    entry: &OutboxEntry,
    callback_data: &str,
) -> Result<Option<WaMessageId>, SendError> {
    let sent = graph
        .send(
            phone_number_id,
            &entry.wa_id,
            &outbound_message(entry),
            Some(callback_data),
        )
        .await;
    let Some(media) = &entry.media else {
        return sent;
    };
    match sent {
        Err(SendError::Permanent { error }) if entry.template.is_none() => {
            let kind = match media {
                Media::Image { .. } => "image",
                Media::List { .. } => "list",
            };
            tracing::warn!(conversation.id = %entry.wa_id.masked(), part = entry.part, kind, "media refused, sent as text instead: {error}");
            metrics::counter!("zaguan_outbound_media_fallbacks_total", "kind" => kind).increment(1);
            let body = match media {
                Media::Image { link } if !entry.body.is_empty() => {
                    format!("{}\n{link}", entry.body)
                }
                Media::Image { link } => link.clone(),
                Media::List { .. } => entry.body.clone(),
            };
            graph
                .send(
                    phone_number_id,
                    &entry.wa_id,
                    &OutboundMessage::Text { body: &body },
                    Some(callback_data),
                )
                .await
        }
        other => other,
    }
}

/// What the Graph API is asked to send for `entry`.
fn outbound_message(entry: &OutboxEntry) -> OutboundMessage<'_> {
    match (&entry.template, entry.buttons.is_empty()) {
        (Some(template), _) => OutboundMessage::Template {
            name: &template.name,
            language: &template.language,
            parameters: &template.parameters,
        },
        (None, _) if entry.media.is_some() => match &entry.media {
            Some(Media::Image { link }) => OutboundMessage::Image {
                link,
                caption: &entry.body,
            },
            Some(Media::List { text, button, rows }) => OutboundMessage::List {
                body: text,
                button,
                rows,
            },
            None => OutboundMessage::Text { body: &entry.body },
        },
        (None, true) => OutboundMessage::Text { body: &entry.body },
        (None, false) => OutboundMessage::Buttons {
            body: &entry.body,
            buttons: &entry.buttons,
        },
    }
}

fn status_label(error: &SendError) -> &'static str {
    match error {
        SendError::Retry { .. } => "retry",
        SendError::Unconfirmed { .. } => "unconfirmed",
        SendError::Permanent { .. } => "failed",
        SendError::Policy { .. } => "policy",
        SendError::Token { .. } => "token",
    }
}

fn local_error(message: &str) -> GraphError {
    GraphError {
        code: None,
        title: None,
        message: Some(message.to_owned()),
        error_data: None,
    }
}
