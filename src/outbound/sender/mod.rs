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

mod part;

mod record;

use part::PartSender;

use crate::outbound::sender::record::{
    count_template, local_error, record_with_patience, send_entry, status_label,
};
pub use record::outbound_message;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::failures;
use super::graph::{GraphClient, SendError};
use super::limits::Limiters;
use crate::domain::OutboxId;
use crate::domain::{WaId, WaMessageId};
use crate::store::{
    ConversationStore, OutboxEntry, OutboxStatus, OutboxStore, OutboxUpdate, Store, StoreError,
    UserStore,
};

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

/// At most this many shared pauses are taken up per poll (the latest ending first): a burst of
/// 131056 over many recipients does not make every poll read them all.
const MAX_SHARED_PAUSES: usize = 500;

/// How long a delivered part's `sent` keeps being retried while the store is unavailable.
const RECORD_PATIENCE: Duration = Duration::from_secs(600);

/// The outbound channel of one process. It keeps the outbox, and flags a conversation for a
/// person when a reply cannot be delivered.
pub struct Outbound<S: ?Sized = dyn Store> {
    store: Arc<S>,
    graph: Arc<GraphClient>,
    limiters: Arc<Limiters>,
    settings: OutboundSettings,
    /// Parts whose call (and the record of its answer) is running in this process, possibly
    /// past the work that started it (its lease lost, or the store failing right after the
    /// call): this process does not send them again meanwhile.
    in_flight: InFlight,
}

impl<S: OutboxStore + ConversationStore + UserStore + ?Sized> Outbound<S> {
    pub fn new(
        store: Arc<S>,
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
    pub fn dry_run(store: Arc<S>) -> Self {
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

    /// Takes up the pauses Meta asked of another instance (130429, 131056), kept in the store.
    pub async fn keep_shared_pauses(&self) {
        let now = Utc::now();
        match self.store.send_pauses(now, MAX_SHARED_PAUSES).await {
            Ok(pauses) => {
                for (key, until) in pauses {
                    self.limiters
                        .keep_pause(&key, (until - now).to_std().unwrap_or_default());
                }
            }
            Err(error) => tracing::warn!("cannot read the other instances' send pauses: {error}"),
        }
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
            match self.part_sender().send(entry).await? {
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
            let (now, sent) = loop {
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
                // Refused for good, with a fallback (the image's link as text, the template
                // of a closed window): that goes at once, in the same place.
                if let Err(SendError::Permanent { error }) = &sent
                    && let Some(fallback) = failures::fallback_for(entry, error)
                {
                    tracing::warn!(conversation.id = %masked, part = entry.part, code = error.code, "refused; sent again as its fallback");
                    metrics::counter!("zaguan_outbound_fallbacks_total", "to" => failures::fallback_label(&fallback))
                        .increment(1);
                    entry.fall_back(&fallback);
                    continue;
                }
                break (now, sent);
            };
            match sent {
                Ok(wamid) => {
                    count_template(entry);
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
                            let delay = part::backoff(&self.settings, 1)
                                .max(retry_after.unwrap_or_default());
                            part::back_off(
                                &self.limiters,
                                self.store.as_ref(),
                                &phone_number_id,
                                entry,
                                &error,
                                delay,
                            )
                            .await;
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
                            if let Err(store) =
                                failures::undelivered(self.store.as_ref(), entry, &error, now).await
                            {
                                tracing::warn!(
                                    "an undelivered reply could not be flagged: {store}"
                                );
                            }
                            entry.status = OutboxStatus::Failed;
                            entry.error = Some(error);
                            None
                        }
                        SendError::Permanent { error } => {
                            tracing::error!(conversation.id = %masked, part = entry.part, "reply refused, not retried: {error}");
                            if let Err(store) =
                                failures::undelivered(self.store.as_ref(), entry, &error, now).await
                            {
                                tracing::warn!(
                                    "an undelivered reply could not be flagged: {store}"
                                );
                            }
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
            .unwrap_or_else(|| entry.sending_at.unwrap_or_default() + part::grace(&self.settings));
        let waiting = due > Utc::now();
        if waiting {
            tracing::debug!(conversation.id = %entry.wa_id.masked(), part = entry.part, %due, "waiting for the status of a part's unconfirmed attempt");
        }
        waiting
    }

    /// A stored part's way to the Graph API, through this channel.
    fn part_sender(&self) -> PartSender<'_, S> {
        PartSender {
            store: &self.store,
            graph: &self.graph,
            limiters: &self.limiters,
            settings: &self.settings,
            in_flight: &self.in_flight,
        }
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
                // Boxed: the task sleeps between marks for as long as the turn waits on the
                // model, holding only its sleep, not the room for a Graph call.
                Box::pin(limiters.until_call_allowed(&phone_number_id)).await;
                match Box::pin(graph.mark_read(&phone_number_id, &wamid, true)).await {
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
    /// Sent, failed for good, skipped by the governor, or already confirmed: the next part may
    /// go.
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
