//! The agency's funnel and activity over a period, for the whole deployment: read from the
//! records every instance writes (`messages`, `llm_calls`, `events`, `appointments`, `offers`,
//! `outbox`, `users`), never from one process's metrics, so any instance shows the same figures.
//! Each source is read with one bounded query over the period (its `at` index), then counted
//! here: per-day buckets need date arithmetic that not every MongoDB-compatible server runs.
//! A source that holds more than [`MAX_RECORDS`] in the period is cut, and the report says so.

pub mod svg;
pub mod whatsapp;

pub use whatsapp::{WhatsAppCost, WhatsAppPrices};

use crate::realestate::{AppointmentStore, OfferStore};
use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use crate::domain::llm_call::{FAST_PATH, OFFLINE};
use crate::domain::{LlmCall, MessageRole, WaId};
use crate::realestate::model::{Appointment, AppointmentStatus, Offer};
use crate::store::{BusinessEvent, Event, EventQuery, StoreError, StoredMessage};
use crate::store::{EventStore, HistoryStore, OutboxStore, UsageStore, UserStore};

/// Most records one source gives a report.
pub const MAX_RECORDS: usize = 200_000;
/// The longest period a report covers.
pub const MAX_DAYS: i64 = 92;

/// Tools whose call means the customer searched or asked about a listing: "qualified".
const QUALIFYING_TOOLS: &[&str] = &[
    "search_properties",
    "get_property_details",
    "send_property_photos",
    "create_search_alert",
];

/// USD per million input and output tokens, per model (`ZAGUAN_LLM_PRICES`), and what a
/// WhatsApp message costs (`ZAGUAN_WHATSAPP_PRICES`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    models: HashMap<String, (f64, f64)>,
    pub whatsapp: WhatsAppPrices,
}

impl Prices {
    /// `gpt-4o-mini=0.15/0.60,claude-3-5-haiku-latest=0.80/4.00`; empty: no prices.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut prices = HashMap::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let bad = || format!("`{item}` is not MODEL=INPUT/OUTPUT (USD per million tokens)");
            let (model, rates) = item.split_once('=').ok_or_else(bad)?;
            let (input, output) = rates.split_once('/').ok_or_else(bad)?;
            let rate = |r: &str| {
                r.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
            };
            let (Some(input), Some(output)) = (rate(input), rate(output)) else {
                return Err(bad());
            };
            if model.trim().is_empty() {
                return Err(bad());
            }
            prices.insert(model.trim().to_owned(), (input, output));
        }
        Ok(Self {
            models: prices,
            whatsapp: WhatsAppPrices::default(),
        })
    }

    /// The same, with WhatsApp's prices.
    pub fn with_whatsapp(mut self, whatsapp: WhatsAppPrices) -> Self {
        self.whatsapp = whatsapp;
        self
    }

    /// What a call cost, when its model has a price.
    pub fn cost(&self, model: &str, input: u64, output: u64) -> Option<f64> {
        let (i, o) = self.models.get(model)?;
        Some((input as f64 * i + output as f64 * o) / 1_000_000.0)
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

/// The days a report covers, in the agency's time zone, `from` to `to` inclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    pub first: NaiveDate,
    pub last: NaiveDate,
    pub tz: Tz,
}

impl Period {
    /// `first` to `last` (inclusive), refused when reversed or longer than [`MAX_DAYS`].
    pub fn new(first: NaiveDate, last: NaiveDate, tz: Tz) -> Result<Self, String> {
        if last < first {
            return Err(format!(
                "the period ends ({last}) before it starts ({first})"
            ));
        }
        if (last - first).num_days() + 1 > MAX_DAYS {
            return Err(format!("a report covers at most {MAX_DAYS} days"));
        }
        Ok(Self { first, last, tz })
    }

    /// The last `days` days up to today.
    pub fn last_days(days: i64, now: DateTime<Utc>, tz: Tz) -> Result<Self, String> {
        let today = now.with_timezone(&tz).date_naive();
        Self::new(today - chrono::Duration::days(days.max(1) - 1), today, tz)
    }

    fn start_of(&self, day: NaiveDate) -> DateTime<Utc> {
        crate::business::start_of_day(day, self.tz)
    }

    pub fn from(&self) -> DateTime<Utc> {
        self.start_of(self.first)
    }

    pub fn to(&self) -> DateTime<Utc> {
        self.start_of(self.last + chrono::Duration::days(1))
    }

    pub fn days(&self) -> Vec<NaiveDate> {
        self.first
            .iter_days()
            .take_while(|d| *d <= self.last)
            .collect()
    }

    fn day_of(&self, at: DateTime<Utc>) -> NaiveDate {
        at.with_timezone(&self.tz).date_naive()
    }
}

/// What a report is computed from: the period's records.
#[derive(Debug, Default)]
pub struct Inputs {
    pub messages: Vec<StoredMessage>,
    pub calls: Vec<LlmCall>,
    pub appointments: Vec<Appointment>,
    pub offers: Vec<Offer>,
    pub handoff_events: Vec<Event>,
    pub failed_deliveries: u64,
    pub opt_outs: u64,
    /// The portal or CRM each contact who came as a lead came from (`leads`).
    pub lead_sources: HashMap<WaId, String>,
    /// The parts Meta billed (`outbox.pricing`).
    pub billed: Vec<crate::store::OutboxEntry>,
    /// The sources that held more than [`MAX_RECORDS`].
    pub cut: Vec<&'static str>,
}

/// The offline spell the whole deployment is in, read from every instance's call records: each
/// instance knows only its own model, but they share the providers, keys and budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OfflineSpell {
    /// The first step served offline after the last answer any model gave (the first offline
    /// step read when no model answered in the records read: the spell may be older).
    pub since: DateTime<Utc>,
    /// Whether a model answered earlier in the records read, so `since` is the spell's true
    /// start.
    pub began_in_period: bool,
    /// The last step served offline, and how many were since `since`.
    pub last: DateTime<Utc>,
    pub steps: u64,
}

/// The deployment's offline spell still going on in `calls`: steps served offline after the last
/// call a model answered (steps the fast path took say nothing either way). `None` when a model
/// answered last.
pub fn offline_spell(calls: &[LlmCall]) -> Option<OfflineSpell> {
    let answered = |c: &&LlmCall| {
        c.provider != FAST_PATH
            && c.provider != OFFLINE
            && c.outcome == crate::domain::CallOutcome::Ok
    };
    let last_answer = calls.iter().filter(answered).map(|c| c.at).max();
    let mut spell: Option<OfflineSpell> = None;
    for call in calls.iter().filter(|c| c.provider == OFFLINE) {
        if last_answer.is_some_and(|answer| call.at <= answer) {
            continue;
        }
        let spell = spell.get_or_insert(OfflineSpell {
            since: call.at,
            began_in_period: last_answer.is_some(),
            last: call.at,
            steps: 0,
        });
        spell.since = spell.since.min(call.at);
        spell.last = spell.last.max(call.at);
        spell.steps += 1;
    }
    spell
}

/// Reads the period's records from the stores.
pub async fn gather(
    store: &(
         impl HistoryStore
         + UsageStore
         + EventStore
         + OutboxStore
         + UserStore
         + crate::store::LeadStore
         + ?Sized
     ),
    realestate: Option<&(impl AppointmentStore + OfferStore + ?Sized)>,
    period: &Period,
) -> Result<Inputs, StoreError> {
    let (from, to) = (period.from(), period.to());
    let mut cut = Vec::new();
    let mut messages = store.messages_between(from, to, MAX_RECORDS).await?;
    if messages.len() >= MAX_RECORDS {
        cut.push("messages");
    }
    // A portal's message in the history is the lead's words on the portal: they have not
    // written to us until they answer on WhatsApp.
    messages.retain(|m| {
        m.message.agent.as_ref().map(|a| a.as_str()) != Some(crate::domain::PORTAL_AGENT)
    });
    // Leads of the month before the period too: a lead of last week who writes today came
    // from the portal.
    let leads = store
        .leads(&crate::store::LeadFilter {
            since: Some(from - chrono::Duration::days(30)),
            limit: MAX_RECORDS,
            ..crate::store::LeadFilter::default()
        })
        .await?;
    if leads.len() >= MAX_RECORDS {
        cut.push("leads");
    }
    let mut lead_sources: HashMap<WaId, String> = leads
        .into_iter()
        .filter(|l| l.received_at < to)
        .filter_map(|l| Some((l.wa_id?, l.source)))
        .collect();
    // Those a click-to-WhatsApp ad brought.
    let contacts = store
        .leads_since(from - chrono::Duration::days(30), MAX_RECORDS)
        .await?;
    if contacts.len() >= MAX_RECORDS {
        cut.push("users");
    }
    for user in contacts.iter().filter(|u| u.referral.is_some()) {
        lead_sources
            .entry(user.wa_id.clone())
            .or_insert_with(|| user.source().to_owned());
    }
    let calls = store.llm_calls_between(from, to, MAX_RECORDS).await?;
    if calls.len() >= MAX_RECORDS {
        cut.push("llm_calls");
    }
    let mut handoff_events = Vec::new();
    for kind in ["handoff.requested", "handoff.taken"] {
        let events = store
            .list_events(&EventQuery {
                since: Some(from),
                kind: Some(kind.to_owned()),
                limit: MAX_RECORDS,
                ..EventQuery::default()
            })
            .await?;
        if events.len() >= MAX_RECORDS {
            cut.push("events");
        }
        handoff_events.extend(events.into_iter().filter(|e| e.at < to));
    }
    let undelivered = store.undelivered_since(from, MAX_RECORDS).await?;
    if undelivered.len() >= MAX_RECORDS {
        cut.push("outbox");
    }
    let failed_deliveries = undelivered.iter().filter(|o| o.at < to).count() as u64;
    let billed = store.billed_between(from, to, MAX_RECORDS).await?;
    if billed.len() >= MAX_RECORDS {
        cut.push("outbox.pricing");
    }
    let opt_outs = store.opt_outs_between(from, to).await?;
    let (appointments, offers) = match realestate {
        Some(realestate) => (
            realestate
                .appointments_created_since(from)
                .await?
                .into_iter()
                .filter(|a| a.created_at < to)
                .collect(),
            realestate
                .offers_created_since(from)
                .await?
                .into_iter()
                .filter(|o| o.created_at < to)
                .collect(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    Ok(Inputs {
        messages,
        calls,
        appointments,
        offers,
        handoff_events,
        failed_deliveries,
        opt_outs,
        lead_sources,
        billed,
        cut,
    })
}

/// One step of the funnel: customers who wrote in the period and got that far.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub key: &'static str,
    pub label: &'static str,
    pub count: u64,
    /// Of the step before (`None` for the first, or after an empty one).
    pub rate: Option<f64>,
}

/// The funnel's counts of the customers who came from one source: a portal or CRM
/// (`idealista`…), a click-to-WhatsApp ad, or `organic` (they wrote on WhatsApp first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceFunnel {
    pub source: String,
    /// As [`Report::funnel`]'s steps, in order.
    pub counts: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Day {
    pub date: String,
    pub conversations: u64,
    /// Tokens per model provider.
    pub tokens: BTreeMap<String, u64>,
    /// USD per model provider, for the models with a price.
    pub cost: BTreeMap<String, f64>,
}

/// How the assistants' steps were decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Steps {
    pub model: u64,
    pub fast_path: u64,
    pub offline: u64,
    pub fast_path_share: Option<f64>,
    pub offline_share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub first: String,
    pub last: String,
    pub funnel: Vec<Step>,
    /// The same steps, per source.
    pub funnel_by_source: Vec<SourceFunnel>,
    pub days: Vec<Day>,
    pub providers: Vec<String>,
    /// Seconds from a customer's first message in the period to the first answer.
    pub first_reply_median: Option<i64>,
    pub first_reply_samples: usize,
    /// Seconds from asking for a person to an operator taking the conversation.
    pub person_median: Option<i64>,
    pub person_samples: usize,
    pub turns_per_assistant: Vec<(String, u64)>,
    pub steps: Steps,
    pub failed_deliveries: u64,
    pub opt_outs: u64,
    /// Models used without a price in `ZAGUAN_LLM_PRICES`.
    pub unpriced: Vec<String>,
    /// What the messages cost on WhatsApp.
    pub whatsapp: WhatsAppCost,
    pub cut: Vec<&'static str>,
}

/// The median of `values` (of an even count, the mean of the middle two).
pub(crate) fn median(mut values: Vec<i64>) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2
    } else {
        values[mid]
    })
}

/// The report of `inputs` over `period`.
pub fn compute(inputs: &Inputs, period: &Period, prices: &Prices) -> Report {
    let human = |m: &&StoredMessage| m.message.role == MessageRole::Human;
    let inquired: HashSet<&WaId> = inputs
        .messages
        .iter()
        .filter(human)
        .map(|m| &m.message.wa_id)
        .collect();
    let qualified: HashSet<&WaId> = inputs
        .messages
        .iter()
        .filter(|m| {
            m.message
                .tool_calls
                .iter()
                .any(|c| QUALIFYING_TOOLS.contains(&c.name.as_str()))
        })
        .map(|m| &m.message.wa_id)
        .filter(|w| inquired.contains(w))
        .collect();
    let booked: HashSet<&WaId> = inputs
        .appointments
        .iter()
        .map(|a| &a.wa_id)
        .filter(|w| inquired.contains(w))
        .collect();
    let attended: HashSet<&WaId> = inputs
        .appointments
        .iter()
        .filter(|a| a.status == AppointmentStatus::Done)
        .map(|a| &a.wa_id)
        .filter(|w| inquired.contains(w))
        .collect();
    let offered: HashSet<&WaId> = inputs
        .offers
        .iter()
        .map(|o| &o.wa_id)
        .filter(|w| inquired.contains(w))
        .collect();
    let source_of = |w: &WaId| {
        inputs
            .lead_sources
            .get(w)
            .cloned()
            .unwrap_or_else(|| "organic".to_owned())
    };
    let mut by_source: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (step, customers) in [&inquired, &qualified, &booked, &attended, &offered]
        .into_iter()
        .enumerate()
    {
        for w in customers {
            by_source.entry(source_of(w)).or_insert_with(|| vec![0; 5])[step] += 1;
        }
    }
    let funnel_by_source = by_source
        .into_iter()
        .map(|(source, counts)| SourceFunnel { source, counts })
        .collect();
    let mut funnel = Vec::new();
    let mut before: Option<u64> = None;
    for (key, label, count) in [
        ("inquiry", "Wrote to us", inquired.len()),
        (
            "qualified",
            "Searched or asked about a listing",
            qualified.len(),
        ),
        ("visit_booked", "Booked a visit", booked.len()),
        ("visit_attended", "Visited", attended.len()),
        ("offer", "Made an offer", offered.len()),
    ] {
        let count = count as u64;
        funnel.push(Step {
            key,
            label,
            count,
            rate: before.filter(|b| *b > 0).map(|b| count as f64 / b as f64),
        });
        before = Some(count);
    }

    // Conversations per day: customers who wrote that day.
    let mut per_day: BTreeMap<NaiveDate, HashSet<&WaId>> = BTreeMap::new();
    for m in inputs.messages.iter().filter(human) {
        per_day
            .entry(period.day_of(m.message.at))
            .or_default()
            .insert(&m.message.wa_id);
    }
    // Model usage per day and provider; steps by how they were decided.
    let mut tokens: BTreeMap<(NaiveDate, String), u64> = BTreeMap::new();
    let mut cost: BTreeMap<(NaiveDate, String), f64> = BTreeMap::new();
    let mut providers: Vec<String> = Vec::new();
    let mut unpriced: Vec<String> = Vec::new();
    let mut steps = Steps::default();
    for call in &inputs.calls {
        match call.provider.as_str() {
            FAST_PATH => steps.fast_path += 1,
            OFFLINE => steps.offline += 1,
            provider => {
                if call.outcome == crate::domain::CallOutcome::Ok {
                    steps.model += 1;
                }
                let day = period.day_of(call.at);
                let used = call.input_tokens + call.output_tokens;
                *tokens.entry((day, provider.to_owned())).or_default() += used;
                match prices.cost(&call.model, call.input_tokens, call.output_tokens) {
                    Some(usd) => *cost.entry((day, provider.to_owned())).or_default() += usd,
                    None if used > 0 && !unpriced.contains(&call.model) => {
                        unpriced.push(call.model.clone())
                    }
                    None => {}
                }
                if !providers.iter().any(|p| p == provider) {
                    providers.push(provider.to_owned());
                }
            }
        }
    }
    providers.sort();
    unpriced.sort();
    let total = steps.model + steps.fast_path + steps.offline;
    if total > 0 {
        steps.fast_path_share = Some(steps.fast_path as f64 / total as f64);
        steps.offline_share = Some(steps.offline as f64 / total as f64);
    }
    let days = period
        .days()
        .into_iter()
        .map(|day| Day {
            date: day.format("%Y-%m-%d").to_string(),
            conversations: per_day.get(&day).map_or(0, |s| s.len() as u64),
            tokens: providers
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        tokens.get(&(day, p.clone())).copied().unwrap_or(0),
                    )
                })
                .collect(),
            cost: providers
                .iter()
                .filter_map(|p| cost.get(&(day, p.clone())).map(|c| (p.clone(), *c)))
                .collect(),
        })
        .collect();

    // Time to the first answer: each customer's first message in the period, to the first
    // assistant message with words after it.
    let mut first_human: HashMap<&WaId, DateTime<Utc>> = HashMap::new();
    let mut first_reply: HashMap<&WaId, DateTime<Utc>> = HashMap::new();
    for m in &inputs.messages {
        let wa_id = &m.message.wa_id;
        match m.message.role {
            MessageRole::Human => {
                first_human.entry(wa_id).or_insert(m.message.at);
            }
            MessageRole::Ai
                if !m.message.content.trim().is_empty()
                    && first_human.get(wa_id).is_some_and(|at| *at <= m.message.at) =>
            {
                first_reply.entry(wa_id).or_insert(m.message.at);
            }
            _ => {}
        }
    }
    let replies: Vec<i64> = first_reply
        .iter()
        .filter_map(|(w, at)| Some((*at - *first_human.get(w)?).num_seconds()))
        .collect();
    let first_reply_samples = replies.len();

    // Time to a person: a request, to the next take of that conversation.
    let mut requested: HashMap<&WaId, DateTime<Utc>> = HashMap::new();
    let mut waits = Vec::new();
    let mut events: Vec<&Event> = inputs.handoff_events.iter().collect();
    events.sort_by_key(|e| e.at);
    for event in events {
        match &event.event {
            BusinessEvent::HandoffRequested { .. } => {
                requested.entry(&event.wa_id).or_insert(event.at);
            }
            BusinessEvent::HandoffTaken { .. } => {
                if let Some(since) = requested.remove(&event.wa_id) {
                    waits.push((event.at - since).num_seconds());
                }
            }
            _ => {}
        }
    }
    let person_samples = waits.len();

    let mut turns: BTreeMap<String, u64> = BTreeMap::new();
    for m in &inputs.messages {
        if m.message.role == MessageRole::Ai {
            let agent = m.message.agent.as_deref().unwrap_or("—").to_owned();
            *turns.entry(agent).or_default() += 1;
        }
    }
    let mut turns_per_assistant: Vec<(String, u64)> = turns.into_iter().collect();
    turns_per_assistant.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));

    Report {
        first: period.first.format("%Y-%m-%d").to_string(),
        last: period.last.format("%Y-%m-%d").to_string(),
        funnel,
        funnel_by_source,
        days,
        providers,
        first_reply_median: median(replies),
        first_reply_samples,
        person_median: median(waits),
        person_samples,
        turns_per_assistant,
        steps,
        failed_deliveries: inputs.failed_deliveries,
        opt_outs: inputs.opt_outs,
        unpriced,
        whatsapp: whatsapp::cost(&inputs.billed, period, &prices.whatsapp),
        cut: inputs.cut.clone(),
    }
}

/// The charts a report downloads as CSV.
pub const CHARTS: &[&str] = &[
    "funnel",
    "conversations",
    "cost",
    "assistants",
    "steps",
    "outcomes",
    "whatsapp",
    "whatsapp_purposes",
    "whatsapp_conversations",
];

/// One chart's numbers as CSV (a header row, then one row per bar); `None` for an unknown chart.
pub fn csv(report: &Report, chart: &str) -> Option<String> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    match chart {
        "funnel" => {
            rows.push(vec![
                "step".into(),
                "customers".into(),
                "rate_of_previous".into(),
            ]);
            for s in &report.funnel {
                rows.push(vec![
                    s.key.into(),
                    s.count.to_string(),
                    s.rate.map_or(String::new(), |r| format!("{r:.4}")),
                ]);
            }
        }
        "conversations" => {
            rows.push(vec!["date".into(), "conversations".into()]);
            for d in &report.days {
                rows.push(vec![d.date.clone(), d.conversations.to_string()]);
            }
        }
        "cost" => {
            rows.push(vec![
                "date".into(),
                "provider".into(),
                "tokens".into(),
                "usd".into(),
            ]);
            for d in &report.days {
                for p in &report.providers {
                    rows.push(vec![
                        d.date.clone(),
                        p.clone(),
                        d.tokens.get(p).copied().unwrap_or(0).to_string(),
                        d.cost.get(p).map_or(String::new(), |c| format!("{c:.4}")),
                    ]);
                }
            }
        }
        "assistants" => {
            rows.push(vec!["assistant".into(), "steps".into()]);
            for (agent, n) in &report.turns_per_assistant {
                rows.push(vec![agent.clone(), n.to_string()]);
            }
        }
        "steps" => {
            rows.push(vec!["decided_by".into(), "steps".into()]);
            rows.push(vec!["model".into(), report.steps.model.to_string()]);
            rows.push(vec!["fast_path".into(), report.steps.fast_path.to_string()]);
            rows.push(vec!["offline".into(), report.steps.offline.to_string()]);
        }
        "outcomes" => {
            rows.push(vec!["measure".into(), "value".into()]);
            let seconds = |v: Option<i64>| v.map_or(String::new(), |s| s.to_string());
            rows.push(vec![
                "first_reply_median_seconds".into(),
                seconds(report.first_reply_median),
            ]);
            rows.push(vec![
                "time_to_person_median_seconds".into(),
                seconds(report.person_median),
            ]);
            rows.push(vec![
                "failed_deliveries".into(),
                report.failed_deliveries.to_string(),
            ]);
            rows.push(vec!["opt_outs".into(), report.opt_outs.to_string()]);
        }
        "whatsapp" => {
            rows.push(vec![
                "date".into(),
                "billed_messages".into(),
                "whatsapp_usd".into(),
                "model_usd".into(),
            ]);
            for (d, (date, cost)) in report.days.iter().zip(&report.whatsapp.by_day) {
                rows.push(vec![
                    date.clone(),
                    cost.messages.to_string(),
                    format!("{:.4}", cost.usd),
                    format!("{:.4}", d.cost.values().sum::<f64>()),
                ]);
            }
        }
        "whatsapp_purposes" | "whatsapp_conversations" => {
            let (key, breakdown) = if chart == "whatsapp_purposes" {
                ("purpose", &report.whatsapp.by_purpose)
            } else {
                ("wa_id", &report.whatsapp.by_conversation)
            };
            rows.push(vec![key.into(), "billed_messages".into(), "usd".into()]);
            for (name, cost) in breakdown {
                rows.push(vec![
                    name.clone(),
                    cost.messages.to_string(),
                    format!("{:.4}", cost.usd),
                ]);
            }
        }
        _ => return None,
    }
    let mut writer = ::csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer
            .write_record(row.iter().map(|cell| crate::admin::export::inert(cell)))
            .ok()?;
    }
    String::from_utf8(writer.into_inner().ok()?).ok()
}

#[cfg(test)]
mod tests;
