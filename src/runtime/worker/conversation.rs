//! One conversation's work: its lease claimed, its turns served and its replies flushed, its lease
//! released when idle or at shutdown.

use crate::domain::{WaId, WaMessageId};
use crate::engine::abuse::{Admission, SLOW_DOWN};
use crate::engine::turn::{EngineError, TurnOptions, TurnOutcome};
use crate::outbound::Flushed;
use crate::store::{InboxEntry, InboxStatus, StoreError};
use chrono::Utc;
use std::time::{Duration, Instant};

use crate::runtime::worker::{Dispatcher, ELSEWHERE_FOR, HOLDS, Held};

impl Dispatcher {
    /// Claims the conversation unless held, then serves it for as long as the instance is
    /// valid: a lapse stops the work at once (it resumes, here or elsewhere, from what was
    /// stored) rather than run beside the instance that takes the conversation over.
    pub(super) async fn serve(&self, wa_id: &WaId) {
        let Some(epoch) = self.membership.valid() else {
            // Not confirmed alive right now: nothing is started; the work waits here.
            tokio::time::sleep(Duration::from_millis(200)).await;
            return;
        };
        let held = self
            .queue()
            .held
            .get(wa_id)
            .is_some_and(|held| held.epoch == epoch);
        if !held && !Box::pin(self.claim(wa_id, epoch)).await {
            return;
        }
        let finished = tokio::select! {
            biased;
            () = self.membership.lapsed(epoch) => false,
            () = self.serve_conversation(wa_id, !held) => true,
        };
        let mut queue = self.queue();
        queue.read.remove(wa_id);
        if finished {
            if let Some(held) = queue.held.get_mut(wa_id) {
                held.last_used = Instant::now();
            }
        } else {
            tracing::error!(
                conversation.id = %wa_id.masked(),
                "this instance's heartbeat was not confirmed in time (slow store?): work on \
                 the conversation stopped; it resumes from what was stored"
            );
            metrics::counter!("zaguan_leases_lost_total").increment(1);
            queue.held.remove(wa_id);
            self.engine.forget_window(wa_id);
            queue.retry(wa_id);
            queue.store_cut.insert(wa_id.clone());
        }
    }

    /// Takes the conversation's lease; `false` (its work dropped here) when another live
    /// instance holds it.
    pub(super) async fn claim(&self, wa_id: &WaId, epoch: u64) -> bool {
        let now = Utc::now();
        let until = now + chrono::Duration::from_std(self.settings.lease).unwrap_or_default();
        let live = self.membership.live();
        match self
            .engine
            .store()
            .claim_conversation(wa_id, &self.settings.owner, now, until, &live)
            .await
        {
            Ok(true) => {
                self.queue().held.insert(
                    wa_id.clone(),
                    Held {
                        epoch,
                        last_used: Instant::now(),
                        hold: HOLDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    },
                );
                true
            }
            Ok(false) => {
                // Its holder serves it; the poll brings it back here if that changes.
                let mut queue = self.queue();
                queue.work.remove(wa_id);
                queue.owed.remove(wa_id);
                queue
                    .elsewhere
                    .insert(wa_id.clone(), Instant::now() + ELSEWHERE_FOR);
                false
            }
            Err(error) => {
                tracing::warn!(conversation.id = %wa_id.masked(), "cannot claim: {error}");
                false
            }
        }
    }

    /// Sends what the conversation still owes, then runs turns while messages wait, sending
    /// each turn's reply before the next turn. Stops after a turn when the process drains.
    /// `claimed`: the lease was just taken, so what was stored is read first (a previous
    /// holder may have left messages open or replies unsent).
    /// The flushes and sends are boxed where they are awaited: the task would otherwise keep
    /// their room while the turn waits on the model (see `serve_turn`).
    pub(super) async fn serve_conversation(&self, wa_id: &WaId, claimed: bool) {
        let (engine, outbound, settings) = (&self.engine, &self.outbound, &self.settings);
        let store = engine.store();
        if claimed {
            self.queue().owed.insert(wa_id.clone());
            self.queue().work.insert(wa_id.clone());
        }
        let mut turns = 0;
        loop {
            // Draining: the turn just finished was the last.
            if turns > 0 && *self.draining.borrow() {
                return;
            }
            // Replies owed from before (a retry due, a crash mid-send) go out before new ones.
            if self.queue().owed.remove(wa_id) {
                match Box::pin(outbound.flush(wa_id)).await {
                    // A part still waiting: the poll brings the conversation back when it is due.
                    Ok(flushed) => self.flushed(wa_id, flushed),
                    Err(error) => {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot send: {error}");
                        self.queue().owe(wa_id.clone());
                        return;
                    }
                }
            }
            if !self.queue().work.remove(wa_id) {
                return;
            }
            // The conversation's open messages as stored, oldest first: what other instances
            // received too, in order.
            let mut open = match store.open_inbox(wa_id).await {
                Ok(open) => open,
                Err(error) => {
                    tracing::warn!(conversation.id = %wa_id.masked(), "cannot read inbox: {error}");
                    self.queue().retry(wa_id);
                    return;
                }
            };
            // A collected vector has room for four entries (1.2 KB): the turn holds this one
            // while it waits on the model.
            open.shrink_to_fit();
            self.queue().read.insert(
                wa_id.clone(),
                open.iter().map(|e| e.wamid.clone()).collect(),
            );
            if open.is_empty() {
                continue;
            }
            turns += 1;
            // In place: the turn waits on the model holding `open`, so no copy of it.
            let poisoned: Vec<_> = open
                .extract_if(.., |e| e.attempts >= settings.max_attempts)
                .collect();
            if !poisoned.is_empty() {
                tracing::error!(
                    conversation.id = %wa_id.masked(),
                    messages = poisoned.len(),
                    "inbox messages failed {} times; marked failed", settings.max_attempts
                );
                metrics::counter!("zaguan_turns_total", "outcome" => "failed")
                    .increment(poisoned.len() as u64);
                let ids: Vec<WaMessageId> = poisoned.iter().map(|e| e.wamid.clone()).collect();
                if store
                    .set_inbox_status(&ids, InboxStatus::Failed)
                    .await
                    .is_err()
                {
                    self.queue().retry(wa_id);
                    return;
                }
                if open.is_empty() {
                    continue;
                }
            }
            if let Admission::Wait { wait, notify } = self.limits.admit(wa_id) {
                // Too many turns for this user: the next one waits, and what arrives meanwhile
                // is merged into it.
                tracing::info!(conversation.id = %wa_id.masked(), ?wait, "user throttled");
                self.queue().work.insert(wa_id.clone());
                if notify {
                    let via = open.last().expect("not empty");
                    if let Err(error) = Box::pin(engine.notice(wa_id, SLOW_DOWN, via)).await {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot queue notice: {error}");
                    } else if let Err(error) = Box::pin(outbound.flush(wa_id)).await {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot send: {error}");
                    }
                }
                let mut draining = self.draining.clone();
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    _ = draining.wait_for(|stop| *stop) => return,
                }
            }
            let last = open.last().expect("not empty");
            let options = {
                let mut queue = self.queue();
                TurnOptions {
                    // Sent at once unless older parts still wait: then it queues behind them.
                    send_now: !queue.behind.contains(wa_id),
                    unconfirmed_grace: outbound.unconfirmed_grace(),
                    count_resume: !queue.store_cut.remove(wa_id),
                    hold: queue.held.get(wa_id).map(|held| held.hold),
                }
            };
            // "typing…" only once the engine knows the bot answers (not while an operator holds it).
            let turn = engine
                .serve_turn(wa_id, &open, options, || {
                    outbound.typing(&last.phone_number_id, &last.wamid)
                })
                .await;
            if !Box::pin(self.after_turn(wa_id, &open, turn)).await {
                return;
            }
        }
    }

    /// Where the conversation's replies stand after a flush: while a part waits for a retry or
    /// its status, the next reply queues behind it.
    fn flushed(&self, wa_id: &WaId, flushed: Flushed) {
        let mut queue = self.queue();
        match flushed {
            Flushed::All => {
                queue.behind.remove(wa_id);
            }
            Flushed::Waiting => {
                queue.behind.insert(wa_id.clone());
            }
        }
    }

    /// What follows a turn: its reply sent and its messages marked answered; `false` when the
    /// conversation's work stops here. Boxed where it is awaited: the task of a turn waiting
    /// on the model would otherwise keep room for the outcome and these steps.
    async fn after_turn(
        &self,
        wa_id: &WaId,
        open: &[InboxEntry],
        turn: Result<TurnOutcome, EngineError>,
    ) -> bool {
        let (outbound, store) = (&self.outbound, self.engine.store());
        let outcome = match turn {
            Ok(outcome) => outcome,
            Err(error) => {
                let transient = matches!(error, EngineError::Store(StoreError::Unavailable(_)));
                tracing::error!(conversation.id = %wa_id.masked(), "turn failed, will resume: {:#}", anyhow::Error::from(error));
                metrics::counter!("zaguan_turns_total", "outcome" => "error").increment(1);
                if transient {
                    // The store's slowness, not the message's: tried again, not counted.
                    let mut queue = self.queue();
                    queue.retry(wa_id);
                    queue.store_cut.insert(wa_id.clone());
                } else {
                    let ids: Vec<WaMessageId> = open.iter().map(|e| e.wamid.clone()).collect();
                    if let Err(error) = store.count_attempt(&ids).await {
                        tracing::warn!(conversation.id = %wa_id.masked(), "cannot count the attempt: {error}");
                    }
                    // The poll brings them back, with their attempt counted.
                    self.queue().read.remove(wa_id);
                }
                return false;
            }
        };
        if outcome.answered.len() < open.len() {
            // It resumed a cut turn first: the others are the next turn.
            self.queue().work.insert(wa_id.clone());
        }
        // The reply goes out (and is recorded) before the messages are marked answered.
        let sent = match outcome.to_send {
            Some(parts) => Box::pin(outbound.send_reply(parts)).await,
            None if outcome.reply.is_some() => Box::pin(outbound.flush(wa_id)).await,
            None => Ok(Flushed::All),
        };
        match sent {
            Ok(flushed) => self.flushed(wa_id, flushed),
            Err(error) => {
                // Not marked answered: resumed later, the reply found unrecorded is
                // recorded as unconfirmed, not sent again at once.
                tracing::warn!(conversation.id = %wa_id.masked(), "cannot send: {error}");
                let mut queue = self.queue();
                queue.retry(wa_id);
                queue.store_cut.insert(wa_id.clone());
                return false;
            }
        }
        if let Err(error) = store
            .set_inbox_status(&outcome.answered, InboxStatus::Done)
            .await
        {
            // The poll brings them back; the history shows them answered.
            tracing::warn!(conversation.id = %wa_id.masked(), "cannot close inbox: {error}");
            self.queue().read.remove(wa_id);
            return false;
        }
        let newest = open
            .iter()
            .filter(|e| outcome.answered.contains(&e.wamid))
            .map(|e| e.received_at)
            .max();
        if let Some(newest) = newest {
            self.queue().answered(wa_id, newest);
        }
        true
    }

    /// Gives back the leases of conversations idle for `idle_release`.
    pub(super) async fn release_idle(&self) {
        let idle: Vec<WaId> = {
            let queue = self.queue();
            queue
                .held
                .iter()
                .filter(|(wa_id, held)| {
                    held.last_used.elapsed() >= self.settings.idle_release
                        && !queue.in_flight.contains(*wa_id)
                        && !queue.has_work(wa_id)
                })
                .map(|(wa_id, _)| wa_id.clone())
                .collect()
        };
        for wa_id in idle {
            // Forgotten first: a turn starting meanwhile claims anew.
            {
                let mut queue = self.queue();
                queue.held.remove(&wa_id);
                queue.behind.remove(&wa_id);
                queue.store_cut.remove(&wa_id);
            }
            self.engine.forget_window(&wa_id);
            if let Err(error) = self
                .engine
                .store()
                .release_conversation(&wa_id, &self.settings.owner)
                .await
            {
                tracing::warn!(conversation.id = %wa_id.masked(), "cannot release lease: {error}");
            }
        }
    }

    /// Gives every lease back (draining), so other instances take the conversations at once.
    pub(super) async fn release_all(&self) {
        self.queue().held.clear();
        match self
            .engine
            .store()
            .release_all_leases(&self.settings.owner)
            .await
        {
            Ok(released) => tracing::debug!(released, "leases released"),
            Err(error) => tracing::warn!("cannot release the leases: {error}"),
        }
    }
}
