//! The handoff desk: a customer asks for a person, and the staff on duty are told on WhatsApp
//! at once — the first of them, the next one when nobody took the conversation within
//! `ZAGUAN_HANDOFF_SLA` of working time, then all of them. Outside working hours nobody is
//! woken up: the first notice goes when someone comes on duty, and the customer is told when
//! that is. Who is on duty comes from the business data (`staff` with `notify_handoffs`, their
//! `hours` or the agency's).
//!
//! A notice goes to a staff member's pager (`pagers`), and from there as one message: at once
//! when none went to them within `ZAGUAN_HANDOFF_DIGEST`, else gathered with the others that
//! came meanwhile into one digest listing each customer — an outage or an opening hour brings
//! one message per member, not hundreds. A member who cannot be reached (their window closed
//! with no template, or WhatsApp refused the notice, at once or by a late `failed` status) is
//! recorded on the request, which goes to the next member at once; the customer hears that a
//! person was told only when a notice is on its way to someone.
//!
//! Pages are keyed by the request, its level and the member, and each message is queued under
//! an id derived from the member and the moment its batch was claimed: a step replayed after a
//! crash, or run by two instances, tells nobody twice.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::business::{Business, Schedule, WeeklyHours};
use crate::domain::{MessageRole, OutboxId, WaId};
use crate::outbound::governor::{self, Form};
use crate::store::{
    ConversationStore, HandoffReason, HandoffRequest, HandoffStep, HistoryStore, InboxStore,
    NewOutbox, NoticeFailure, OutboxEntry, OutboxStore, Page, PageBatch, PagerStore, Store,
    StoreResult, UserStore,
};
use crate::templates::{Purpose, TemplateValue, Templates};

/// The escalation's last level: every staff member on duty has been told.
const ALL_TOLD: u8 = 3;

/// Most conversations whose notices one escalation pass sends.
const BATCH: usize = 50;

/// Most customers a digest names; the rest are counted, and the queue has them all.
const DIGEST_LINES: usize = 15;

/// A staff member who may be told of handoffs.
#[derive(Debug, Clone, PartialEq)]
pub struct StaffOnCall {
    /// `staff._id`.
    pub id: String,
    pub name: String,
    pub wa_id: WaId,
    /// Their own working hours; `None`: the agency's opening hours.
    pub hours: Option<WeeklyHours>,
    /// Whether they work the agency's holidays (`staff.works_holidays`); by default, with
    /// hours of their own too, nobody is told on a day the agency is closed.
    pub works_holidays: bool,
}

/// Where the staff to tell come from (the business data).
#[async_trait]
pub trait StaffRoster: Send + Sync + 'static {
    /// The staff with `notify_handoffs` and a WhatsApp number, in the order they are told.
    async fn handoff_staff(&self) -> StoreResult<Vec<StaffOnCall>>;
}

/// How staff are told.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffSettings {
    /// Working time a request may wait before the next staff member is told
    /// (`ZAGUAN_HANDOFF_SLA`).
    pub sla: Duration,
    /// At most one notice per staff member this often (`ZAGUAN_HANDOFF_DIGEST`); the ones
    /// in between go together.
    pub digest: Duration,
    /// The number notices go from when the customer's is not known (`WHATSAPP_PHONE_NUMBER_ID`).
    pub phone_number_id: Option<String>,
    /// Where the console is (`ZAGUAN_PUBLIC_URL`), for the link in each notice.
    pub public_url: Option<url::Url>,
    pub timezone: Tz,
}

impl Default for HandoffSettings {
    fn default() -> Self {
        Self {
            sla: DEFAULT_HANDOFF_SLA,
            digest: DEFAULT_HANDOFF_DIGEST,
            phone_number_id: None,
            public_url: None,
            timezone: chrono_tz::Europe::Madrid,
        }
    }
}

/// `ZAGUAN_HANDOFF_SLA`'s default.
pub const DEFAULT_HANDOFF_SLA: Duration = Duration::from_secs(15 * 60);

/// `ZAGUAN_HANDOFF_DIGEST`'s default.
pub const DEFAULT_HANDOFF_DIGEST: Duration = Duration::from_secs(2 * 60);

/// What one notice step came to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Noticed {
    /// A notice is on its way to someone.
    Told,
    /// Nobody is on duty now; the next one comes on duty then (`None`: not within a year).
    NobodyOnDuty(Option<DateTime<Utc>>),
    /// Everyone on duty was tried and none can be reached.
    NobodyReached,
}

/// What a request for a person came to: what the customer may truthfully be told.
#[derive(Debug, Clone, PartialEq)]
pub enum HandoffOutcome {
    /// A notice is on its way to someone on duty (now, or for an earlier request still
    /// waiting): queued or gathered into their next digest, not skipped, not refused.
    Told,
    /// Nobody is on duty: the team is told at `opens_at`.
    AfterHours { opens_at: DateTime<Utc> },
    /// No staff member can be told: none has `notify_handoffs` and a number, or none of them
    /// could be reached (the request still waits in the queue).
    Unreachable,
}

impl HandoffOutcome {
    /// What the customer reads, in their language.
    pub fn customer_text(
        &self,
        lang: Option<&str>,
        business: &Business,
        fallback_contact: Option<&str>,
        timezone: Tz,
        now: DateTime<Utc>,
    ) -> String {
        use crate::domain::phrases;
        match self {
            HandoffOutcome::Told => phrases::handoff_told(lang).to_owned(),
            HandoffOutcome::AfterHours { opens_at } => {
                let when = phrases::opening(
                    lang,
                    now.with_timezone(&timezone).naive_local(),
                    opens_at.with_timezone(&timezone).naive_local(),
                );
                phrases::handoff_after_hours(lang, &when)
            }
            HandoffOutcome::Unreachable => {
                let contact = business.contact_line();
                phrases::handoff_unreachable(lang, contact.as_deref().or(fallback_contact))
            }
        }
    }

    /// The same for the model, which words it for the customer: the facts, not a promise.
    pub fn for_the_model(&self, timezone: Tz, contact: Option<&str>) -> String {
        match self {
            HandoffOutcome::Told => "Done: a person of the team on duty has been told on WhatsApp and \
                will write to the user in this chat. Tell the user so in one short sentence and keep \
                helping with anything else meanwhile."
                .to_owned(),
            HandoffOutcome::AfterHours { opens_at } => format!(
                "Recorded: the office is closed now, so nobody is on duty; the team will be told \
                 when it opens, {} (business time). Tell the user exactly that — a person will \
                 write in this chat from then — in one short sentence; do not promise sooner.",
                opens_at.with_timezone(&timezone).format("%A %d/%m %H:%M")
            ),
            HandoffOutcome::Unreachable => format!(
                "Not possible: no one on the team can be told from this chat. Tell the user \
                 honestly{}.",
                contact.map_or_else(String::new, |c| format!(
                    " and give them the agency's contact: {c}"
                ))
            ),
        }
    }
}

/// Tells staff of handoff requests, and escalates the ones nobody takes. It reads the
/// conversation, its history, its customer and their last message, and queues the notices.
pub struct HandoffDesk<S: ?Sized = dyn Store> {
    store: Arc<S>,
    roster: Option<Arc<dyn StaffRoster>>,
    settings: HandoffSettings,
    templates: std::sync::RwLock<Arc<Templates>>,
}

impl<S> HandoffDesk<S>
where
    S: ConversationStore
        + HistoryStore
        + InboxStore
        + OutboxStore
        + UserStore
        + PagerStore
        + ?Sized,
{
    pub fn new(
        store: Arc<S>,
        roster: Option<Arc<dyn StaffRoster>>,
        settings: HandoffSettings,
    ) -> Self {
        Self {
            store,
            roster,
            settings,
            templates: std::sync::RwLock::new(Arc::new(crate::engine::default_templates(
                "visit_reminder",
                "listing_alert",
                "staff_handoff",
                "es",
            ))),
        }
    }

    pub fn settings(&self) -> &HandoffSettings {
        &self.settings
    }

    async fn staff(&self) -> StoreResult<Vec<StaffOnCall>> {
        match &self.roster {
            Some(roster) => roster.handoff_staff().await,
            None => Ok(Vec::new()),
        }
    }

    /// `wa_id` wants a person for `reason`. `key` names the step asking (a tool call, an
    /// inbound message): the same key twice records and tells once.
    pub async fn request(
        &self,
        wa_id: &WaId,
        reason: &str,
        key: &str,
        business: &Business,
        now: DateTime<Utc>,
    ) -> StoreResult<HandoffOutcome> {
        let staff = self.staff().await?;
        let hours = business.opening_hours();
        let agency = business.schedule(&hours, self.settings.timezone);
        let first_on_duty = staff
            .iter()
            .filter_map(|member| on_duty_schedule(member, &agency).next_open(now))
            .min();
        let reason = HandoffReason {
            at: now,
            reason: reason.chars().take(500).collect(),
            key: key.to_owned(),
        };
        let request = self
            .store
            .request_handoff(wa_id, &reason, first_on_duty)
            .await?;
        metrics::counter!("zaguan_handoff_requests_total").increment(1);
        if staff.is_empty() {
            tracing::warn!(
                conversation.id = %wa_id.masked(),
                "a customer asked for a person and no staff member has notify_handoffs and a \
                 WhatsApp number: nobody can be told"
            );
            metrics::counter!("zaguan_handoff_notices_total", "outcome" => "nobody").increment(1);
            return Ok(HandoffOutcome::Unreachable);
        }
        let noticed = if request.level > 0 {
            // Asked again: told only if a notice is on its way to someone for this request.
            let reached = staff.iter().any(|member| {
                request.notified.contains(&member.id) && !request.failed_for(&member.wa_id)
            });
            // A turn resumed after a crash between paging and flushing finds its pages here:
            // flushed now rather than at the loop's next pass.
            for member in staff.iter().filter(|m| request.notified.contains(&m.id)) {
                self.flush(&member.wa_id, now).await?;
            }
            if reached {
                Noticed::Told
            } else if staff.iter().all(|member| request.failed_for(&member.wa_id)) {
                Noticed::NobodyReached
            } else {
                Noticed::NobodyOnDuty(request.next_notice_at.or(first_on_duty))
            }
        } else if request.next_notice_at.is_some_and(|at| at <= now) {
            let (noticed, paged) = self.notify(wa_id, &request, business, &staff, now).await?;
            for member in &paged {
                self.flush(member, now).await?;
            }
            noticed
        } else {
            Noticed::NobodyOnDuty(request.next_notice_at.or(first_on_duty))
        };
        Ok(match noticed {
            Noticed::Told => HandoffOutcome::Told,
            Noticed::NobodyOnDuty(Some(at)) if at > now => {
                HandoffOutcome::AfterHours { opens_at: at }
            }
            // Nobody on duty within a year, or nobody reachable: as good as nobody at all.
            _ => HandoffOutcome::Unreachable,
        })
    }

    /// One escalation pass at `now`: every request with a notice due. Returns how many
    /// conversations were looked at.
    pub async fn escalate(&self, business: &Business, now: DateTime<Utc>) -> StoreResult<usize> {
        let due = self.store.due_handoffs(now, BATCH).await?;
        // Every notice of the pass is paged first, then each member's pager flushed once: the
        // requests that fell due together reach a member as one message.
        let mut paged: Vec<WaId> = Vec::new();
        if !due.is_empty() {
            let staff = self.staff().await?;
            for (wa_id, request) in &due {
                let (_, members) = self.notify(wa_id, request, business, &staff, now).await?;
                for member in members {
                    if !paged.contains(&member) {
                        paged.push(member);
                    }
                }
            }
        }
        // And the digests whose time has come.
        for member in self.store.due_pagers(now, self.digest(), BATCH).await? {
            if !paged.contains(&member) {
                paged.push(member);
            }
        }
        for member in &paged {
            self.flush(member, now).await?;
        }
        Ok(due.len())
    }

    fn digest(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.settings.digest).unwrap_or(chrono::Duration::MAX)
    }

    /// Pages the notice `request` is due: to the first staff member on duty who can be reached,
    /// then the next one, then all of them; a member who cannot be reached is recorded and the
    /// next one tried. Returns what came of it and the members paged, whose pagers the caller
    /// flushes.
    pub(super) async fn notify(
        &self,
        wa_id: &WaId,
        request: &HandoffRequest,
        business: &Business,
        staff: &[StaffOnCall],
        now: DateTime<Utc>,
    ) -> StoreResult<(Noticed, Vec<WaId>)> {
        let hours = business.opening_hours();
        let agency = business.schedule(&hours, self.settings.timezone);
        // Who failed this request is not tried again for it.
        let candidates: Vec<&StaffOnCall> = staff
            .iter()
            .filter(|member| !request.failed_for(&member.wa_id))
            .collect();
        let on_duty: Vec<&StaffOnCall> = candidates
            .iter()
            .copied()
            .filter(|member| on_duty_schedule(member, &agency).is_open(now))
            .collect();
        if on_duty.is_empty() {
            // Nobody there now: the notice waits for the first one back.
            let next = candidates
                .iter()
                .filter_map(|member| on_duty_schedule(member, &agency).next_open(now))
                .min();
            let step = HandoffStep {
                level: request.level,
                told: Vec::new(),
                failed: Vec::new(),
                next_notice_at: next,
            };
            self.store
                .advance_handoff(wa_id, request.at, request.level, &step)
                .await?;
            let noticed = if candidates.is_empty() {
                Noticed::NobodyReached
            } else {
                Noticed::NobodyOnDuty(next)
            };
            return Ok((noticed, Vec::new()));
        }
        let fresh: Vec<&StaffOnCall> = on_duty
            .iter()
            .copied()
            .filter(|member| !request.notified.contains(&member.id))
            .collect();
        // The first who can be reached of `tried`, or all of them at the last level.
        let (tried, level, one): (Vec<&StaffOnCall>, u8, bool) = match request.level {
            0 => (fresh.iter().chain(&on_duty).copied().collect(), 1, true),
            1 if !fresh.is_empty() => (fresh, 2, true),
            _ => (on_duty.clone(), ALL_TOLD, false),
        };
        let next_notice_at = (level < ALL_TOLD).then(|| {
            agency.after_open_time(
                now,
                chrono::Duration::from_std(self.settings.sla).unwrap_or(chrono::Duration::MAX),
            )
        });
        let notice = self.notice(wa_id, request, now).await?;
        let mut reached: Vec<&StaffOnCall> = Vec::new();
        let mut failed = Vec::new();
        for member in tried {
            if reached.iter().any(|m| m.id == member.id)
                || failed
                    .iter()
                    .any(|f: &NoticeFailure| f.member == member.wa_id)
            {
                continue;
            }
            match self
                .page(member, wa_id, request, level, &notice, now)
                .await?
            {
                Ok(()) => reached.push(member),
                Err(skip) => {
                    tracing::warn!(staff = %member.id, reason = skip.as_str(), "a staff member could not be told");
                    failed.push(NoticeFailure {
                        member: member.wa_id.clone(),
                        reason: skip.reason(),
                        at: now,
                    });
                }
            }
            if one && !reached.is_empty() {
                break;
            }
        }
        let step = HandoffStep {
            level,
            told: reached
                .iter()
                .map(|m| m.id.clone())
                .filter(|id| !request.notified.contains(id))
                .collect(),
            failed,
            next_notice_at,
        };
        if self
            .store
            .advance_handoff(wa_id, request.at, request.level, &step)
            .await?
        {
            let names: Vec<&str> = reached.iter().map(|m| m.name.as_str()).collect();
            tracing::info!(conversation.id = %wa_id.masked(), level, staff = ?names, "staff told of a handoff request");
            metrics::counter!("zaguan_handoff_notices_total", "outcome" => level_label(level))
                .increment(reached.len() as u64);
            if !step.failed.is_empty() {
                metrics::counter!("zaguan_handoff_notices_total", "outcome" => "unreachable")
                    .increment(step.failed.len() as u64);
            }
        }
        let noticed = if reached.is_empty() {
            Noticed::NobodyReached
        } else {
            Noticed::Told
        };
        Ok((noticed, reached.iter().map(|m| m.wa_id.clone()).collect()))
    }

    /// The notice of `wa_id`'s request as one text: who, the language, what they want, where
    /// the conversation stands, the last messages, and the console link.
    async fn notice(
        &self,
        wa_id: &WaId,
        request: &HandoffRequest,
        now: DateTime<Utc>,
    ) -> StoreResult<Notice> {
        let user = self.store.user(wa_id).await?;
        let conversation = self.store.conversation(wa_id).await?;
        let recent = self.store.recent_messages(wa_id, 8).await?;
        let name = user.as_ref().and_then(|u| u.name.clone());
        let customer = match &name {
            Some(name) => format!("{name} (+{})", wa_id.as_str()),
            None => format!("+{}", wa_id.as_str()),
        };
        let waited = (now - request.at).num_minutes().max(0);
        let mut lines = vec![if request.level == 0 {
            "🔔 Un cliente quiere hablar con una persona".to_owned()
        } else {
            format!("⏰ Sigue esperando a una persona desde hace {waited} min")
        }];
        lines.push(format!("Cliente: {customer}"));
        if let Some(lang) = conversation.as_ref().and_then(|c| c.lang.as_deref()) {
            lines.push(format!("Idioma: {lang}"));
        }
        for reason in &request.reasons {
            lines.push(format!("Motivo: {}", reason.reason));
        }
        if let Some(property) = mentioned_property(&recent) {
            lines.push(format!("Propiedad: {property}"));
        }
        if let Some(agent) = conversation.as_ref().and_then(|c| c.dialog_state.current()) {
            lines.push(format!("Con el asistente: {agent}"));
        }
        let said: Vec<String> = recent
            .iter()
            .filter(|m| {
                matches!(m.message.role, MessageRole::Human | MessageRole::Ai)
                    && !m.message.content.trim().is_empty()
            })
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(|m| {
                let who = if m.message.role == MessageRole::Human {
                    "cliente"
                } else {
                    "bot"
                };
                format!("› {who}: {}", clip(&m.message.content, 160))
            })
            .collect();
        if !said.is_empty() {
            lines.push("Últimos mensajes:".to_owned());
            lines.extend(said);
        }
        let link = self.console_link(wa_id);
        match &link {
            Some(link) => lines.push(format!("Atender: {link}")),
            None => lines.push(format!(
                "Atender: zaguan conversations take {} --operator TU_NOMBRE",
                wa_id.as_str()
            )),
        }
        Ok(Notice {
            text: lines.join("\n"),
            customer,
            reason: clip(&request.reason, 200),
            link: link.unwrap_or_else(|| format!("+{}", wa_id.as_str())),
        })
    }

    /// `/console/conversations/{wa_id}` under `ZAGUAN_PUBLIC_URL`.
    fn console_link(&self, wa_id: &WaId) -> Option<String> {
        let base = self.settings.public_url.as_ref()?;
        let mut url = base.clone();
        let path = format!(
            "{}/console/conversations/{}",
            base.path().trim_end_matches('/'),
            wa_id.as_str()
        );
        url.set_path(&path);
        Some(url.to_string())
    }

    /// Puts `notice` on `member`'s pager, when the send governor says they can be reached at
    /// all (inside their 24-hour window, or with the staff template outside it); otherwise
    /// why not.
    async fn page(
        &self,
        member: &StaffOnCall,
        wa_id: &WaId,
        request: &HandoffRequest,
        level: u8,
        notice: &Notice,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(), governor::Skip>> {
        let values = [
            ("customer", notice.customer.clone().into()),
            ("reason", notice.reason.clone().into()),
            ("link", notice.link.clone().into()),
        ];
        if let Form::Skip(skip) = self.form_to(&member.wa_id, &values, now).await? {
            return Ok(Err(skip));
        }
        let phone_number_id = match self.store.latest_inbox(wa_id).await? {
            Some(entry) => Some(entry.phone_number_id),
            None => self.settings.phone_number_id.clone(),
        };
        let page = Page {
            key: format!(
                "handoff:{}:{}:{level}:{}",
                wa_id.as_str(),
                request.at.timestamp_millis(),
                member.id
            ),
            customer: wa_id.clone(),
            label: notice.customer.clone(),
            reason: notice.reason.clone(),
            text: notice.text.clone(),
            link: notice.link.clone(),
            staff_id: member.id.clone(),
            phone_number_id,
            at: now,
        };
        self.store.page(&member.wa_id, &page).await?;
        Ok(Ok(()))
    }

    /// How a notice to `to` may go now (the governor's answer for the staff purpose).
    async fn form_to(
        &self,
        to: &WaId,
        values: &[(&str, TemplateValue)],
        now: DateTime<Utc>,
    ) -> StoreResult<Form> {
        let lang = self.store.conversation(to).await?.and_then(|c| c.lang);
        let templates = self.templates();
        governor::form(
            self.store.as_ref(),
            &templates,
            to,
            Purpose::StaffHandoff,
            lang.as_deref(),
            values,
            now,
        )
        .await
    }

    /// Sends what waits on `member`'s pager, unless a message went to them within the digest
    /// time: one notice alone as it is, several as one digest naming each customer. A notice
    /// that cannot go now goes back to each request it was for.
    pub(super) async fn flush(&self, member: &WaId, now: DateTime<Utc>) -> StoreResult<()> {
        let Some(batch) = self.store.claim_pages(member, now, self.digest()).await? else {
            return Ok(());
        };
        if batch.pages.is_empty() {
            return self.store.pages_sent(member, &batch).await;
        }
        let (text, values) = self.message_of(&batch);
        let form = self.form_to(member, &values, now).await?;
        let mut part = NewOutbox::text(member.clone(), None, text, now);
        part.phone_number_id = batch
            .pages
            .iter()
            .find_map(|p| p.phone_number_id.clone())
            .or_else(|| self.settings.phone_number_id.clone());
        part.purpose = Some(Purpose::StaffHandoff);
        part.about = batch.pages.iter().map(|p| p.customer.clone()).collect();
        // From the member and the claim only: a batch sent again after a crash, or by a
        // second instance, runs into the first copy.
        let id = OutboxId::derived(
            &format!("pager:{}:{}", member.as_str(), batch.at.timestamp_millis()),
            batch.at,
        );
        let entry = match form {
            Form::Text { fallback } => {
                part.fallback = fallback;
                OutboxEntry::queued(id, &part)
            }
            Form::Template(template) => {
                part.template = Some(template);
                OutboxEntry::queued(id, &part)
            }
            Form::Skip(skip) => {
                tracing::warn!(conversation.id = %member.masked(), reason = skip.as_str(), "a staff notice could not go");
                for page in &batch.pages {
                    let failure = NoticeFailure {
                        member: member.clone(),
                        reason: skip.reason(),
                        at: now,
                    };
                    self.store
                        .handoff_notice_failed(&page.customer, &failure)
                        .await?;
                }
                governor::skipped(part, skip, id)
            }
        };
        if batch.pages.len() > 1 {
            metrics::counter!("zaguan_handoff_digests_total").increment(1);
        }
        tracing::info!(
            conversation.id = %member.masked(),
            pages = batch.pages.len(),
            customers = ?batch.pages.iter().map(|p| p.customer.masked()).collect::<Vec<_>>(),
            "staff notice queued"
        );
        self.store.record_reply(&[entry]).await?;
        self.store.pages_sent(member, &batch).await
    }

    /// The message of a batch and what its template takes: a lone notice as it is, several as
    /// a digest.
    fn message_of(&self, batch: &PageBatch) -> (String, Vec<(&'static str, TemplateValue)>) {
        if let [page] = batch.pages.as_slice() {
            return (
                page.text.clone(),
                vec![
                    ("customer", page.label.clone().into()),
                    ("reason", page.reason.clone().into()),
                    ("link", page.link.clone().into()),
                ],
            );
        }
        let count = batch.pages.len();
        let queue = self.queue_link();
        let mut lines = vec![format!("🔔 {count} clientes esperan a una persona:")];
        for page in batch.pages.iter().take(DIGEST_LINES) {
            lines.push(format!("• {} — {}", page.label, clip(&page.reason, 80)));
        }
        if count > DIGEST_LINES {
            lines.push(format!("… y {} más", count - DIGEST_LINES));
        }
        lines.push(format!("Cola: {queue}"));
        // The template's one line names them too, as many as the text does.
        let names: Vec<&str> = batch
            .pages
            .iter()
            .take(DIGEST_LINES)
            .map(|p| p.label.as_str())
            .collect();
        let customers = if count > DIGEST_LINES {
            format!("{} y {} más", names.join(", "), count - DIGEST_LINES)
        } else {
            names.join(", ")
        };
        (
            lines.join("\n"),
            vec![
                ("customer", customers.into()),
                (
                    "reason",
                    format!("{count} clientes esperan a una persona").into(),
                ),
                ("link", queue.into()),
            ],
        )
    }

    /// `/console/queue` under `ZAGUAN_PUBLIC_URL`, or the command that lists the queue.
    fn queue_link(&self) -> String {
        match &self.settings.public_url {
            Some(base) => {
                let mut url = base.clone();
                url.set_path(&format!(
                    "{}/console/queue",
                    base.path().trim_end_matches('/')
                ));
                url.to_string()
            }
            None => "zaguan conversations list --handoff requested".to_owned(),
        }
    }

    /// The templates staff notices are sent with (the running prompt set's).
    fn templates(&self) -> Arc<Templates> {
        self.templates
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes `templates` the ones notices are sent with from now on (the engine sets them when
    /// the prompt set is loaded or reloaded).
    pub fn use_templates(&self, templates: Arc<Templates>) {
        *self.templates.write().unwrap_or_else(|e| e.into_inner()) = templates;
    }
}

/// A notice's text, and what its template takes.
struct Notice {
    text: String,
    customer: String,
    reason: String,
    link: String,
}

/// When `member` is on duty: their own hours, or the agency's; the agency's holidays either
/// way, unless they work them.
fn on_duty_schedule<'a>(member: &'a StaffOnCall, agency: &Schedule<'a>) -> Schedule<'a> {
    let holidays = if member.works_holidays {
        &[]
    } else {
        agency.holidays()
    };
    match &member.hours {
        Some(own) => Schedule::new(own, holidays, agency.timezone()),
        None if member.works_holidays => agency.without_holidays(),
        None => *agency,
    }
}

fn level_label(level: u8) -> &'static str {
    match level {
        1 => "first",
        2 => "next",
        _ => "all",
    }
}

/// The last listing reference (`P-1234`) the conversation mentions.
fn mentioned_property(recent: &[crate::store::StoredMessage]) -> Option<String> {
    recent.iter().rev().find_map(|m| {
        m.message.content.match_indices("P-").find_map(|(at, _)| {
            let digits: String = m.message.content[at + 2..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            (digits.len() >= 3).then(|| format!("P-{digits}"))
        })
    })
}

fn clip(text: &str, max: usize) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

/// The escalation loop of one process.
pub struct HandoffEscalation {
    desk: Arc<HandoffDesk>,
    /// The running business file (it changes with the prompts).
    business: Arc<dyn Fn() -> Arc<Business> + Send + Sync>,
    every: Duration,
}

impl HandoffEscalation {
    pub fn new(
        desk: Arc<HandoffDesk>,
        business: Arc<dyn Fn() -> Arc<Business> + Send + Sync>,
    ) -> Self {
        // Often enough that a short SLA (or digest) is kept to within a quarter of it, and that
        // a refused notice reaches the next member within a second.
        let every = (desk.settings.sla.min(desk.settings.digest) / 4)
            .clamp(Duration::from_millis(200), Duration::from_secs(1));
        Self {
            desk,
            business,
            every,
        }
    }

    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let business = (self.business)();
                match self.desk.escalate(&business, Utc::now()).await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(conversations = n, "handoff notices sent"),
                    Err(error) => tracing::warn!("handoff requests not escalated: {error}"),
                }
                tokio::time::sleep(self.every).await;
            }
        })
    }
}
