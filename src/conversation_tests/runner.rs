//! One conversation test through the real engine: the prompts, the fast path, the assistants
//! and their tools, guard_translator. The store is the embedded one on the test's own clock,
//! seeded with the demo data of the test's day; each customer action goes in as the webhook
//! would store it (the same Cloud API payload, parsed by the same code); each reply is "sent"
//! by a fake Graph API that renders the exact message body, checks it against Meta's shapes and
//! gives it a wamid. After each step the runner reads what the bot did — the reply, the
//! buttons and rows, the tools called, the events written, the conversation's state — and
//! checks the step's expectations.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::cassette::{CassetteLlm, Mismatch};
use super::expect::{self, Observed};
use super::spec::{DEFAULT_NOW, Step, TestCase};
use crate::agents::AgentRegistry;
use crate::config::Config;
use crate::domain::{Clock, ManualClock, Role, WaId, WaMessageId};
use crate::engine::EngineSettings;
use crate::llm::{ChatMessage, Llm, LlmRequest};
use crate::realestate::follow_up::{FollowUpSettings, FollowUps};
use crate::realestate::{MemoryRealEstate, demo};
use crate::store::{ConversationStore, EventStore, HistoryStore, OutboxStore};
use crate::store::{
    EventQuery, InboxEntry, InboxStatus, MemoryStore, OutboxUpdate, RoleAssignment, RoleSource,
    Store,
};
use crate::voice::{Audio, MediaSource, Transcriber, VoiceError, VoiceNotes};

/// The business number the tests' customers write to.
const PHONE_NUMBER_ID: &str = "100000000000001";

/// How a test ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    /// No recorded model answers for it, and the offline engine alone does not pass it.
    NeedsRecording,
}

/// A step's failure: which step, what it did, and what was wrong.
#[derive(Debug, Clone)]
pub struct Failure {
    /// 1-based; 0 for the test as a whole.
    pub step: usize,
    pub action: String,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.step == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "step {} ({}): {}", self.step, self.action, self.message)
        }
    }
}

#[derive(Debug, Clone)]
pub struct TestResult {
    pub name: String,
    pub outcome: Outcome,
    pub failures: Vec<Failure>,
    pub seconds: f64,
    /// Model calls made (answered from the recording, or by the provider).
    pub model_calls: usize,
    /// What the run could not check (a `judge` in a replay).
    pub notes: Vec<String>,
}

/// What every test of a run shares: the configuration and the prompt set, loaded once.
pub struct Shared {
    pub config: Config,
    pub registry: Arc<AgentRegistry>,
    /// The provider chain, for `--record` and `--live`.
    pub provider: Option<Arc<dyn Llm>>,
    /// The fallback provider, which scores `judge` criteria in `--live` runs.
    pub judge: Option<Arc<dyn Llm>>,
}

/// How one test's model calls are answered.
pub enum Model {
    Cassette(Arc<CassetteLlm>),
    /// No recording: the offline engine.
    Offline,
}

/// Transcripts of the test's voice notes, by media id.
#[derive(Default, Clone)]
struct Voices(Arc<Mutex<HashMap<String, String>>>);

#[async_trait]
impl MediaSource for Voices {
    async fn download(&self, media_id: &str) -> Result<Audio, VoiceError> {
        Ok(Audio {
            bytes: media_id.as_bytes().to_vec(),
            mime_type: "audio/ogg; codecs=opus".to_owned(),
        })
    }
}

#[async_trait]
impl Transcriber for Voices {
    async fn transcribe(
        &self,
        audio: Audio,
        _language: Option<&str>,
    ) -> Result<String, VoiceError> {
        let id = String::from_utf8_lossy(&audio.bytes).into_owned();
        let voices = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Ok(voices.get(&id).cloned().unwrap_or_default())
    }
}

/// A reply as the fake Graph API received it.
#[derive(Debug, Clone)]
pub struct Sent {
    pub body: Value,
    pub wamid: String,
}

/// The buttons and rows a step's replies offered: (id, title, kind).
type Choices = Vec<(String, String, &'static str)>;

pub async fn run(shared: &Shared, test: &TestCase, model: Model) -> TestResult {
    let started = Instant::now();
    let mut result = TestResult {
        name: test.name.clone(),
        outcome: Outcome::Passed,
        failures: Vec::new(),
        seconds: 0.0,
        model_calls: 0,
        notes: Vec::new(),
    };
    let offline = matches!(model, Model::Offline);
    let cassette = match &model {
        Model::Cassette(llm) => Some(llm.clone()),
        Model::Offline => None,
    };
    match run_steps(shared, test, model, &mut result).await {
        Ok(()) => {}
        Err(error) => result.failures.push(Failure {
            step: 0,
            action: String::new(),
            message: error,
        }),
    }
    if let Some(llm) = &cassette {
        result.model_calls = llm.calls();
    }
    if !result.failures.is_empty() {
        result.outcome = if offline {
            Outcome::NeedsRecording
        } else {
            Outcome::Failed
        };
    }
    result.seconds = started.elapsed().as_secs_f64();
    result
}

fn describe(step: &Step) -> String {
    let quote = |s: &str| {
        let short: String = s.chars().take(40).collect();
        if short.len() < s.len() {
            format!("«{short}…»")
        } else {
            format!("«{short}»")
        }
    };
    if let Some(text) = &step.user {
        format!("user {}", quote(text))
    } else if let Some(tap) = &step.tap {
        format!("tap {}", tap.button())
    } else if let Some(pick) = &step.pick {
        format!("pick {pick}")
    } else if step.location.is_some() {
        "location".to_owned()
    } else if let Some(voice) = &step.voice {
        format!("voice {}", quote(voice))
    } else if let Some(emoji) = &step.react {
        format!("react {emoji}")
    } else if let Some(wait) = &step.wait {
        format!("wait {wait}")
    } else {
        String::new()
    }
}

/// The customer's number: given, a demo owner's or staff member's for those roles, else a
/// number of the test's own.
fn customer(test: &TestCase, set: &demo::DemoSet) -> Result<WaId, String> {
    if let Some(raw) = &test.wa_id {
        return WaId::parse(raw).map_err(|e| format!("wa_id `{raw}`: {e}"));
    }
    match test.role.as_deref().unwrap_or("prospect") {
        "prospect" => {
            use sha2::{Digest as _, Sha256};
            let digest = Sha256::digest(test.name.as_bytes());
            let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % 1_000_000;
            WaId::parse(&format!("34699{n:06}")).map_err(|e| e.to_string())
        }
        "owner" => set
            .owners_on_whatsapp()
            .next()
            .and_then(|o| o.wa_id.clone())
            .ok_or_else(|| "the demo data has no owner on WhatsApp".to_owned()),
        "agent" => set
            .staff
            .iter()
            .find_map(|s| s.wa_id.clone())
            .ok_or_else(|| "the demo data has no staff member on WhatsApp".to_owned()),
        other => Err(format!(
            "role `{other}` is not prospect, owner or agent (or give wa_id)"
        )),
    }
}

async fn run_steps(
    shared: &Shared,
    test: &TestCase,
    model: Model,
    result: &mut TestResult,
) -> Result<(), String> {
    let settings = &shared.config.engine;
    let start: DateTime<Utc> = test.now.map_or_else(
        || {
            DateTime::parse_from_rfc3339(DEFAULT_NOW)
                .expect("the default start time parses")
                .to_utc()
        },
        |now| now.to_utc(),
    );
    let clock = Arc::new(ManualClock::new(start));
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let realestate = Arc::new(MemoryRealEstate::new());
    let today = start.with_timezone(&settings.timezone).date_naive();
    let set = demo::demo_set(today, settings.timezone);
    demo::seed(realestate.as_ref(), &set)
        .await
        .map_err(|e| format!("the demo data could not be seeded: {e}"))?;
    let wa_id = customer(test, &set)?;
    if test.wa_id.is_none()
        && let Some(role) = test.role.as_deref()
        && role != "prospect"
    {
        store
            .assign_role(
                &wa_id,
                &RoleAssignment {
                    role: Role::parse(role),
                    source: RoleSource::Operator,
                    by: "zaguan test".to_owned(),
                    at: start,
                },
            )
            .await
            .map_err(|e| e.to_string())?;
    }

    if let Some(lang) = &test.lang {
        store
            .set_conversation_lang(&wa_id, lang)
            .await
            .map_err(|e| e.to_string())?;
    }
    before_the_test(test, realestate.as_ref(), &set, &wa_id, start).await?;

    let (llm, cassette): (Arc<dyn Llm>, Option<Arc<CassetteLlm>>) = match model {
        Model::Cassette(llm) => (llm.clone(), Some(llm)),
        Model::Offline => (Arc::new(crate::llm::OfflineLlm), None),
    };
    let voices = Voices::default();
    let engine = Arc::new(
        crate::startup::assemble_engine(
            EngineSettings {
                clock: clock.clone(),
                ..settings.clone()
            },
            &shared.config,
            store.clone(),
            realestate.clone(),
            llm,
            shared.registry.clone(),
        )
        .with_voice_notes(Arc::new(VoiceNotes::new(voices.clone(), voices.clone()))),
    );
    // The agents' and owners' follow-ups, run after every step on the test's clock.
    let follow_ups = FollowUps::new(
        realestate,
        engine.clone(),
        FollowUpSettings {
            timezone: settings.timezone,
            phone_number_id: "109876543210".to_owned(),
            every: std::time::Duration::from_secs(2),
            outcome_delay: crate::realestate::follow_up::DEFAULT_OUTCOME_DELAY,
            agenda_at: None,
            offers_to_owners: true,
            public_url: None,
        },
    );
    let follow_up = || async {
        follow_ups
            .tick(clock.now())
            .await
            .map_err(|e| format!("the follow-ups failed: {e}"))
    };

    let profile = test
        .profile_name
        .clone()
        .unwrap_or_else(|| "Ana".to_owned());
    let mut replies: Vec<Vec<Sent>> = Vec::new();
    let mut seen_events: HashSet<String> = HashSet::new();
    let mut last_bot_wamid: Option<String> = None;
    let mut sent_count = 0usize;
    for (i, step) in test.steps.iter().enumerate() {
        let number = i + 1;
        let action = describe(step);
        let fail = |message: String| Failure {
            step: number,
            action: action.clone(),
            message,
        };
        // A customer takes a minute to answer; `wait` takes what it says.
        if let Some(wait) = &step.wait {
            let by = humantime::parse_duration(wait).map_err(|e| e.to_string())?;
            clock.advance(chrono::Duration::from_std(by).map_err(|e| e.to_string())?);
            // What the business says on its own meanwhile (a follow-up's question).
            follow_up().await?;
            let sent = deliver(&*store, &wa_id, &mut sent_count).await?;
            if let Some(last) = sent.last() {
                last_bot_wamid = Some(last.wamid.clone());
            }
            if step.expect.is_some() {
                let observed = observe(&*store, &wa_id, &sent, 0, &mut seen_events).await?;
                check(step, &observed, &fail, result, shared).await;
            }
            replies.push(sent);
            continue;
        }
        clock.advance(chrono::Duration::minutes(1));
        let message = match inbound(step, &replies, last_bot_wamid.as_deref(), &voices, number) {
            Ok(message) => message,
            Err(error) => {
                result.failures.push(fail(error));
                return Ok(());
            }
        };
        let history_before = store
            .recent_messages(&wa_id, 1)
            .await
            .map_err(|e| e.to_string())?
            .last()
            .map_or(0, |m| m.seq);
        let entry = entry(&wa_id, &profile, number, message, clock.now())?;
        store
            .insert_inbox(std::slice::from_ref(&entry))
            .await
            .map_err(|e| e.to_string())?;
        // As the webhook does: the contact wrote now, so their 24-hour window is open.
        store
            .record_contact(&crate::store::ContactSeen {
                wa_id: wa_id.clone(),
                phone: None,
                user_id: None,
                name: None,
                username: None,
                seen_at: clock.now(),
            })
            .await
            .map_err(|e| e.to_string())?;
        let open = store.open_inbox(&wa_id).await.map_err(|e| e.to_string())?;
        let turn = engine.run_turn(&wa_id, &open).await;
        if let Some(mismatch) = cassette.as_ref().and_then(|c| c.mismatch()) {
            result.failures.push(fail(mismatch_text(&mismatch)));
            return Ok(());
        }
        let outcome = turn.map_err(|e| format!("step {number}: the turn failed: {e}"))?;
        store
            .set_inbox_status(&outcome.answered, InboxStatus::Done)
            .await
            .map_err(|e| e.to_string())?;
        follow_up().await?;
        let sent = deliver(&*store, &wa_id, &mut sent_count).await?;
        if let Some(last) = sent.last() {
            last_bot_wamid = Some(last.wamid.clone());
        }
        for message in &sent {
            let problems = super::payload::problems(&message.body);
            if !problems.is_empty() {
                result.failures.push(fail(format!(
                    "Meta would refuse the message {}: {}",
                    message.body,
                    problems.join("; ")
                )));
            }
        }
        let observed = observe(&*store, &wa_id, &sent, history_before, &mut seen_events).await?;
        replies.push(sent);
        check(step, &observed, &fail, result, shared).await;
    }
    Ok(())
}

/// What the test says was there before it starts: visits booked, offers made.
async fn before_the_test(
    test: &TestCase,
    realestate: &MemoryRealEstate,
    set: &demo::DemoSet,
    contact: &WaId,
    start: DateTime<Utc>,
) -> Result<(), String> {
    use crate::realestate::{
        Appointment, AppointmentStatus, AppointmentStore as _, FollowUp, Offer, OfferAnswer,
        OfferStatus, OfferStore as _,
    };
    // The test's agent shows the visits; the listing's agent when the test is not an agent's.
    let agent = set
        .staff
        .iter()
        .find(|m| m.wa_id.as_ref() == Some(contact))
        .map(|m| m.id.clone());
    for (n, booked) in test.booked.iter().enumerate() {
        let ago = humantime::parse_duration(&booked.ago)
            .map_err(|e| format!("booked: ago `{}`: {e}", booked.ago))?;
        let starts_at = start - chrono::Duration::from_std(ago).map_err(|e| e.to_string())?;
        let customer = match &booked.customer {
            Some(raw) => WaId::parse(raw).map_err(|e| format!("booked: customer `{raw}`: {e}"))?,
            None => contact.clone(),
        };
        let id = format!("A-T{}", n + 1);
        realestate
            .save_appointment(&Appointment {
                id: id.clone(),
                property_id: booked.property.clone(),
                slot_id: format!("S-T{}", n + 1),
                wa_id: customer,
                starts_at,
                status: AppointmentStatus::Booked,
                created_at: starts_at - chrono::Duration::days(1),
                reminder_sent_at: Some(starts_at - chrono::Duration::hours(12)),
                moved_from: None,
                follow_up: FollowUp {
                    agent: agent.clone(),
                    minutes: Some(30),
                    ..FollowUp::default()
                },
            })
            .await
            .map_err(|e| e.to_string())?;
        if booked.done {
            realestate
                .settle_appointment(&id, AppointmentStatus::Done, "agent:test", start)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    for (n, made) in test.offers.iter().enumerate() {
        let customer = WaId::parse(&made.customer)
            .map_err(|e| format!("offers: customer `{}`: {e}", made.customer))?;
        realestate
            .upsert_offers(&[Offer {
                id: format!("F-T{}", n + 1),
                property_id: made.property.clone(),
                wa_id: customer,
                amount: made.amount,
                currency: "EUR".to_owned(),
                conditions: None,
                status: OfferStatus::Submitted,
                created_at: start,
                answer: OfferAnswer {
                    notice: Some("received".to_owned()),
                    ..OfferAnswer::default()
                },
            }])
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn mismatch_text(mismatch: &Mismatch) -> String {
    mismatch.to_string()
}

async fn check(
    step: &Step,
    observed: &Observed,
    fail: &(dyn Fn(String) -> Failure + Sync),
    result: &mut TestResult,
    shared: &Shared,
) {
    let Some(expect) = &step.expect else {
        return;
    };
    for problem in expect::check(expect, observed) {
        result.failures.push(fail(problem));
    }
    if let Some(criterion) = &expect.judge {
        match &shared.judge {
            Some(judge) => match score(judge.as_ref(), criterion, step, observed).await {
                Ok(None) => {}
                Ok(Some(why)) => result
                    .failures
                    .push(fail(format!("judge: «{criterion}» not met: {why}"))),
                Err(error) => result.failures.push(fail(format!(
                    "judge: the fallback model did not answer: {error}"
                ))),
            },
            None => result.notes.push(format!(
                "judge «{criterion}» not scored: only `--live` runs ask the fallback model"
            )),
        }
    }
}

/// The fallback model's verdict on `criterion`: `None` when met, else why not.
async fn score(
    judge: &dyn Llm,
    criterion: &str,
    step: &Step,
    observed: &Observed,
) -> Result<Option<String>, String> {
    let said = step
        .user
        .clone()
        .or_else(|| step.voice.clone())
        .unwrap_or_else(|| describe(step));
    let request = LlmRequest {
        agent: "judge".into(),
        conversation: None,
        system: "You check a real-estate WhatsApp bot's reply against one criterion. Answer \
                 with PASS or FAIL on the first line, then one sentence saying why."
            .into(),
        messages: vec![ChatMessage::human(format!(
            "Criterion: {criterion}\n\nThe customer: {said}\n\nThe bot's reply:\n{}",
            observed.reply
        ))],
        tools: Arc::from(Vec::new()),
    };
    let answer = judge.complete(&request).await.map_err(|e| e.to_string())?;
    let verdict = answer.content.trim();
    if verdict.to_ascii_uppercase().starts_with("PASS") {
        Ok(None)
    } else {
        Ok(Some(verdict.lines().skip(1).collect::<Vec<_>>().join(" ")))
    }
}

/// The Cloud API message object (without `from`, `id`, `timestamp`) of a customer's step.
fn inbound(
    step: &Step,
    replies: &[Vec<Sent>],
    last_bot: Option<&str>,
    voices: &Voices,
    number: usize,
) -> Result<Value, String> {
    if let Some(text) = &step.user {
        return Ok(json!({"type": "text", "text": {"body": text}}));
    }
    if let Some(tap) = &step.tap {
        let from: Vec<&Vec<Sent>> = match tap {
            super::spec::Tap::Latest(_) => replies.iter().rev().collect(),
            super::spec::Tap::From { step, .. } => {
                replies.get(step.saturating_sub(1)).into_iter().collect()
            }
        };
        let wanted = tap.button();
        for sent in from {
            let choices = choices(sent);
            if let Some((id, title, kind)) = choices.iter().find(|(id, title, kind)| {
                (*kind == "button_reply" || *kind == "quick_reply")
                    && (id.starts_with(wanted) || title.eq_ignore_ascii_case(wanted))
            }) {
                if *kind == "quick_reply" {
                    // A template's quick reply comes back as a `button` with its payload.
                    return Ok(json!({"type": "button", "button": {"payload": id, "text": title}}));
                }
                return Ok(json!({"type": "interactive", "interactive": {
                    "type": "button_reply", "button_reply": {"id": id, "title": title}}}));
            }
        }
        return Err(format!("no button «{wanted}» was shown"));
    }
    if let Some(wanted) = &step.pick {
        for sent in replies.iter().rev() {
            if let Some((id, title, _)) = choices(sent).iter().find(|(id, title, kind)| {
                *kind == "list_reply"
                    && (id.starts_with(wanted.as_str())
                        || super::expect::fold(title).contains(&super::expect::fold(wanted)))
            }) {
                return Ok(json!({"type": "interactive", "interactive": {
                    "type": "list_reply", "list_reply": {"id": id, "title": title}}}));
            }
        }
        return Err(format!("no list row «{wanted}» was shown"));
    }
    if let Some(location) = &step.location {
        let mut body = json!({"latitude": location.latitude, "longitude": location.longitude});
        if let Some(name) = &location.name {
            body["name"] = json!(name);
        }
        if let Some(address) = &location.address {
            body["address"] = json!(address);
        }
        return Ok(json!({"type": "location", "location": body}));
    }
    if let Some(transcript) = &step.voice {
        let id = format!("media-voice-{number}");
        voices
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), transcript.clone());
        return Ok(
            json!({"type": "audio", "audio": {"id": id, "mime_type": "audio/ogg; codecs=opus", "voice": true}}),
        );
    }
    if let Some(emoji) = &step.react {
        let Some(to) = last_bot else {
            return Err("nothing from the bot to react to yet".to_owned());
        };
        return Ok(json!({"type": "reaction", "reaction": {"message_id": to, "emoji": emoji}}));
    }
    Err("the step does nothing".to_owned())
}

/// The cards of a carousel message (none for any other).
fn carousel_cards(body: &Value) -> impl Iterator<Item = &Value> {
    body["interactive"]["action"]["cards"]
        .as_array()
        .into_iter()
        .flatten()
}

/// The buttons and list rows of a step's replies.
fn choices(sent: &[Sent]) -> Choices {
    let mut out = Vec::new();
    for message in sent {
        let interactive = &message.body["interactive"];
        for button in interactive["action"]["buttons"]
            .as_array()
            .into_iter()
            .flatten()
        {
            out.push((
                button["reply"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                button["reply"]["title"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                "button_reply",
            ));
        }
        // A carousel's quick replies, the same on every card: the first card's, once.
        for button in interactive["action"]["cards"][0]["action"]["buttons"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let reply = &button["quick_reply"];
            out.push((
                reply["id"].as_str().unwrap_or_default().to_owned(),
                reply["title"].as_str().unwrap_or_default().to_owned(),
                "button_reply",
            ));
        }
        // A template's quick replies: their payloads (the titles are the template's own).
        for component in message.body["template"]["components"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["sub_type"] == "quick_reply")
        {
            for parameter in component["parameters"].as_array().into_iter().flatten() {
                if let Some(payload) = parameter["payload"].as_str() {
                    out.push((payload.to_owned(), payload.to_owned(), "quick_reply"));
                }
            }
        }
        for section in interactive["action"]["sections"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for row in section["rows"].as_array().into_iter().flatten() {
                out.push((
                    row["id"].as_str().unwrap_or_default().to_owned(),
                    row["title"].as_str().unwrap_or_default().to_owned(),
                    "list_reply",
                ));
            }
        }
    }
    out
}

/// The inbox entry the webhook would store for `message` from `wa_id`.
fn entry(
    wa_id: &WaId,
    profile: &str,
    number: usize,
    mut message: Value,
    now: DateTime<Utc>,
) -> Result<InboxEntry, String> {
    message["from"] = json!(wa_id.as_str());
    message["id"] = json!(format!("wamid.TEST.{}.{number}", wa_id.as_str()));
    message["timestamp"] = json!(now.timestamp().to_string());
    let notification = json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "0", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": PHONE_NUMBER_ID},
            "contacts": [{"profile": {"name": profile}, "wa_id": wa_id.as_str()}],
            "messages": [message],
        }}]}]
    });
    let bytes = serde_json::to_vec(&notification).map_err(|e| e.to_string())?;
    let updates = crate::webhook::payload::parse(&bytes).map_err(|e| e.to_string())?;
    if let Some(rejected) = updates.rejected.first() {
        return Err(format!(
            "the step's message is not one WhatsApp sends: {}",
            rejected.reason
        ));
    }
    let message = updates
        .messages
        .first()
        .ok_or_else(|| "the step's message was not read".to_owned())?;
    Ok(InboxEntry::pending(message, now))
}

/// The fake Graph API: every part queued for `wa_id` is "sent" (its exact body rendered) and
/// given a wamid.
async fn deliver(
    store: &(impl OutboxStore + ?Sized),
    wa_id: &WaId,
    count: &mut usize,
) -> Result<Vec<Sent>, String> {
    let mut sent = Vec::new();
    let queued = store
        .unsent_outbox(wa_id)
        .await
        .map_err(|e| e.to_string())?;
    for part in queued {
        *count += 1;
        let wamid = format!("wamid.BOT.{count}");
        let message = crate::outbound::outbound_message(&part);
        let body = crate::outbound::graph::message_body(&part.wa_id, &message);
        store
            .update_outbox(
                &part.id,
                &OutboxUpdate::Sent {
                    wamid: Some(WaMessageId::parse(&wamid).map_err(|e| e.to_string())?),
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        sent.push(Sent { body, wamid });
    }
    Ok(sent)
}

/// What the bot did in the step: its messages, and what the store says now.
async fn observe(
    store: &(impl ConversationStore + HistoryStore + EventStore + ?Sized),
    wa_id: &WaId,
    sent: &[Sent],
    history_before: i64,
    seen_events: &mut HashSet<String>,
) -> Result<Observed, String> {
    let conversation = store.conversation(wa_id).await.map_err(|e| e.to_string())?;
    let messages = store
        .recent_messages(wa_id, 200)
        .await
        .map_err(|e| e.to_string())?;
    let tools = messages
        .iter()
        .filter(|m| m.seq > history_before)
        .flat_map(|m| m.message.tool_calls.iter().cloned())
        .collect();
    let events = store
        .list_events(&EventQuery {
            wa_id: Some(wa_id.clone()),
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| seen_events.insert(e.id.clone()))
        .map(|e| e.event.kind().to_owned())
        .collect();
    let bodies: Vec<Value> = sent.iter().map(|s| s.body.clone()).collect();
    let mut reply = Vec::new();
    let mut buttons = Vec::new();
    let mut rows = Vec::new();
    for body in &bodies {
        for text in [
            &body["text"]["body"],
            &body["interactive"]["body"]["text"],
            &body["image"]["caption"],
        ] {
            if let Some(text) = text.as_str() {
                reply.push(text.to_owned());
            }
        }
        if let Some(template) = body["template"]["name"].as_str() {
            reply.push(format!("[template {template}]"));
        }
        for card in carousel_cards(body) {
            if let Some(caption) = card["body"]["text"].as_str() {
                reply.push(caption.to_owned());
            }
        }
    }
    for (id, title, kind) in choices(sent) {
        match kind {
            "button_reply" | "quick_reply" => buttons.push(title),
            _ => rows.push((id, title)),
        }
    }
    let media_links = bodies
        .iter()
        .flat_map(|b| {
            b["image"]["link"]
                .as_str()
                .into_iter()
                .chain(carousel_cards(b).filter_map(|c| c["header"]["image"]["link"].as_str()))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    Ok(Observed {
        reply: reply.join("\n"),
        messages: bodies,
        buttons,
        rows,
        images: media_links,
        tools,
        events,
        dialog_state: conversation
            .as_ref()
            .and_then(|c| c.dialog_state.current().map(str::to_owned)),
        lang: conversation.as_ref().and_then(|c| c.lang.clone()),
        pending_action: conversation
            .as_ref()
            .and_then(|c| c.pending_action.as_ref().map(|a| a.tool.clone())),
        handoff_requested: conversation
            .as_ref()
            .is_some_and(|c| c.handoff_requested.is_some()),
    })
}
