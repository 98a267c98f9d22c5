//! The loop back: what the bot books or takes reaches the agent and the owner, and what they
//! answer comes back to the customer and into the records.
//!
//! Every change that someone must hear of leaves a notice on its record (an appointment's
//! `notice`, an offer's `answer_notice`) in the same write. One periodic job ([`FollowUps`])
//! sends each notice through [`Engine::notify`] (the send governor, the contact's language,
//! their history) and clears it, so a crash in between sends it later and a notice is never
//! lost; the outreach's step id keeps it from being said twice. The same job asks each agent
//! how a visit went once it is over, and sends each agent the day's agenda in the morning.
//! The answers (button presses, a counter-offer's amount) are read without a model by
//! [`FollowUpPresses`], and recorded by [`record`] like the console's and the command line's.

pub mod lists;
mod presses;
pub mod record;
mod texts;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeZone, Utc};
use url::Url;

pub use presses::FollowUpPresses;
pub use record::{Outcome, Reply, answer_offer, record_outcome};

use crate::domain::WaId;
use crate::engine::{Engine, EngineError, Notified, Outreach};
use crate::realestate::calendar::{is_theirs, slots::agents_of};
use crate::realestate::tools::text::money;
use crate::realestate::{
    Appointment, AppointmentStatus, Notice, Offer, OfferStatus, Property, RealEstateStore,
    StaffMember,
};
use crate::runtime::{PeriodicJob, spawn_every};
use crate::templates::{Purpose, TemplateValue};

/// The `agent` of each kind of follow-up message in the history.
pub const AGENT_NOTICE: &str = "agent_notice";
pub const AGENDA: &str = "agenda";
pub const VISIT_OUTCOME: &str = "visit_outcome";
pub const VISIT_FEEDBACK: &str = "visit_feedback";
pub const NO_SHOW: &str = "no_show";
pub const OFFER_NOTICE: &str = "offer_notice";

/// `ZAGUAN_VISIT_OUTCOME_DELAY`'s default: how long after a visit's end its agent is asked.
pub const DEFAULT_OUTCOME_DELAY: Duration = Duration::from_secs(30 * 60);

/// A visit older than this is never asked about (see `outcome_questions`).
const ASK_WITHIN_DAYS: i64 = 3;

/// Most records each round looks at, per kind: a backlog drains over a few rounds.
const BATCH: usize = 50;

/// How follow-ups are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUpSettings {
    pub timezone: chrono_tz::Tz,
    /// The business number they go from.
    pub phone_number_id: String,
    /// How often to look (`ZAGUAN_FOLLOW_UP_EVERY`): notices go out within it.
    pub every: Duration,
    /// After a visit's end, when its agent is asked how it went.
    pub outcome_delay: Duration,
    /// The local time each agent gets the day's agenda (`ZAGUAN_AGENDA_TIME`); `None`: never.
    pub agenda_at: Option<NaiveTime>,
    /// Whether offers go to the listing's owner (`ZAGUAN_OFFERS_TO_OWNERS`), else always to
    /// its agent.
    pub offers_to_owners: bool,
    /// `ZAGUAN_PUBLIC_URL`, for the console link in an agent's notice.
    pub public_url: Option<Url>,
}

/// The follow-up loop of one process.
pub struct FollowUps {
    realestate: Arc<dyn RealEstateStore>,
    engine: Arc<Engine>,
    settings: FollowUpSettings,
    /// The last local day whose agendas all went: later rounds that day read nothing.
    agendas_sent: std::sync::Mutex<Option<chrono::NaiveDate>>,
}

impl PeriodicJob for FollowUps {
    const DONE: Option<&'static str> = Some("follow-ups queued");
    const FAILED: &'static str = "follow-ups not checked";
    type Error = EngineError;

    async fn round(&self, _now: DateTime<Utc>) -> Result<usize, EngineError> {
        // The engine's clock: the conversation tests move it.
        self.tick(self.engine.now()).await
    }
}

/// Who a follow-up goes to.
struct Contact {
    wa_id: WaId,
    name: String,
    /// `owner:O-07`, `agent:A-01`: whose answer it is, for the record.
    by: String,
}

impl FollowUps {
    pub fn new(
        realestate: Arc<dyn RealEstateStore>,
        engine: Arc<Engine>,
        settings: FollowUpSettings,
    ) -> Self {
        Self {
            realestate,
            engine,
            settings,
            agendas_sent: std::sync::Mutex::new(None),
        }
    }

    /// Looks every `settings.every` until the process stops.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        let every = self.settings.every;
        spawn_every(self, every)
    }

    /// Sends what is due at `now`; returns how many messages were queued.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let mut queued = self.visit_notices(now).await?;
        queued += self.outcome_questions(now).await?;
        queued += self.offer_notices(now).await?;
        if let Some(at) = self.settings.agenda_at {
            queued += self.agendas(at, now).await?;
        }
        Ok(queued)
    }

    async fn send(&self, outreach: Outreach<'_>, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let purpose = outreach.purpose.key();
        Ok(match self.engine.notify(outreach, now).await? {
            Notified::Queued(_) => {
                metrics::counter!("zaguan_follow_ups_total", "purpose" => purpose).increment(1);
                1
            }
            Notified::Skipped(_) | Notified::Already => 0,
        })
    }

    async fn lang_of(&self, wa_id: &WaId) -> Option<String> {
        let conversation = self.engine.store().conversation(wa_id).await.ok()??;
        conversation.lang
    }

    async fn customer_name(&self, wa_id: &WaId) -> String {
        match self.engine.store().user(wa_id).await {
            Ok(Some(user)) => user.name.unwrap_or_default(),
            _ => String::new(),
        }
    }

    async fn agent_of(
        &self,
        named: Option<&str>,
        property: Option<&Property>,
    ) -> Result<Option<StaffMember>, EngineError> {
        Ok(agent_for(self.realestate.as_ref(), named, property).await?)
    }

    fn link(&self, wa_id: &WaId) -> String {
        match &self.settings.public_url {
            Some(base) => {
                let mut url = base.clone();
                let path = format!(
                    "{}/console/conversations/{}",
                    base.path().trim_end_matches('/'),
                    wa_id.as_str()
                );
                url.set_path(&path);
                url.to_string()
            }
            None => format!("+{}", wa_id.as_str()),
        }
    }

    /// The console's list of today's visits, or where to find it.
    fn visits_link(&self) -> String {
        match &self.settings.public_url {
            Some(base) => {
                let mut url = base.clone();
                url.set_path(&format!(
                    "{}/console/visits",
                    base.path().trim_end_matches('/')
                ));
                url.set_query(Some("view=today"));
                url.to_string()
            }
            None => "zaguan appointments list --view today".to_owned(),
        }
    }

    /// The appointments' pending notices: to the agent (booked, moved, cancelled) or to the
    /// customer (how did it go, another time).
    async fn visit_notices(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let mut queued = 0;
        for appointment in self.realestate.notices_due(BATCH).await? {
            let Some(key) = appointment.follow_up.notice.clone() else {
                continue;
            };
            let property = self.realestate.property(&appointment.property_id).await?;
            queued += match Notice::of_key(&key) {
                Some(notice) if notice.to_agent() => {
                    self.agent_notice(&appointment, property.as_ref(), notice, &key, now)
                        .await?
                }
                Some(notice) => {
                    record::after_outcome(
                        self.realestate.as_ref(),
                        self.engine.store().as_ref(),
                        &appointment,
                    )
                    .await?;
                    self.customer_notice(&appointment, property.as_ref(), notice, &key, now)
                        .await?
                }
                None => {
                    tracing::warn!(appointment_id = %appointment.id, notice = %key, "unknown notice dropped");
                    0
                }
            };
            self.realestate.clear_notice(&appointment.id, &key).await?;
        }
        Ok(queued)
    }

    async fn agent_notice(
        &self,
        appointment: &Appointment,
        property: Option<&Property>,
        notice: Notice,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<usize, EngineError> {
        let Some(agent) = self
            .agent_of(appointment.follow_up.agent.as_deref(), property)
            .await?
        else {
            unreachable_agent("visit", &appointment.id);
            return Ok(0);
        };
        let Some(to) = agent.wa_id.clone() else {
            unreachable_agent("visit", &appointment.id);
            return Ok(0);
        };
        let customer = self.customer_name(&appointment.wa_id).await;
        let local = appointment.starts_at.with_timezone(&self.settings.timezone);
        let (title, address) = property
            .map(|p| (p.title.clone(), p.address.clone()))
            .unwrap_or_else(|| (appointment.property_id.clone(), String::new()));
        let change = texts::change(notice);
        let link = self.link(&appointment.wa_id);
        let text = texts::agent_notice(
            change,
            &customer,
            &appointment.wa_id,
            &appointment.property_id,
            &title,
            &address,
            &crate::domain::phrases::moment(Some("es"), local.naive_local()),
            &link,
        );
        let values = [
            ("change", change.into()),
            ("customer", customer.into()),
            ("phone", format!("+{}", appointment.wa_id.as_str()).into()),
            ("property", title.into()),
            ("address", address.into()),
            ("when", TemplateValue::Moment(local.naive_local())),
            ("link", link.into()),
        ];
        let step = format!("{}:{key}", appointment.id);
        self.send(
            Outreach {
                to: &to,
                text: &text,
                agent: AGENT_NOTICE,
                phone_number_id: &self.settings.phone_number_id,
                purpose: Purpose::StaffVisit,
                values: &values,
                step: &step,
                step_at: appointment.starts_at,
                buttons: &[],
            },
            now,
        )
        .await
    }

    async fn customer_notice(
        &self,
        appointment: &Appointment,
        property: Option<&Property>,
        notice: Notice,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<usize, EngineError> {
        let title = property
            .map(|p| p.title.clone())
            .unwrap_or_else(|| appointment.property_id.clone());
        let lang = self.lang_of(&appointment.wa_id).await;
        let business = self.engine.business_name();
        let step = format!("{}:{key}", appointment.id);
        let (text, purpose, agent, buttons, values) = match notice {
            Notice::Done => (
                texts::feedback_question(&appointment.property_id, &title),
                Purpose::VisitFeedback,
                VISIT_FEEDBACK,
                texts::feedback_buttons(&record::visit_id(&appointment.id), lang.as_deref()),
                vec![
                    ("property", TemplateValue::from(title)),
                    ("business", business.into()),
                ],
            ),
            _ => (
                texts::no_show(&appointment.property_id, &title),
                // Outside the window, only an invitation to write again can go.
                Purpose::ReEngagement,
                NO_SHOW,
                Vec::new(),
                vec![
                    (
                        "name",
                        TemplateValue::from(self.customer_name(&appointment.wa_id).await),
                    ),
                    ("business", business.into()),
                ],
            ),
        };
        self.send(
            Outreach {
                to: &appointment.wa_id,
                text: &text,
                agent,
                phone_number_id: &self.settings.phone_number_id,
                purpose,
                values: &values,
                step: &step,
                step_at: appointment.starts_at,
                buttons: &buttons,
            },
            now,
        )
        .await
    }

    /// Asks each agent how their visits went, once each is over by the delay.
    async fn outcome_questions(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let delay = chrono::Duration::from_std(self.settings.outcome_delay)
            .unwrap_or(chrono::Duration::MAX);
        let mut queued = 0;
        // Started before `now - delay`: a candidate; its own length decides.
        for appointment in self.realestate.outcomes_unasked(now - delay, BATCH).await? {
            let minutes = appointment.follow_up.minutes.unwrap_or(0);
            let ends = appointment.starts_at + chrono::Duration::minutes(i64::from(minutes));
            if ends + delay > now {
                continue;
            }
            if appointment.starts_at < now - chrono::Duration::days(ASK_WITHIN_DAYS) {
                // Booked before the follow-ups existed, or missed while the service was down
                // for long: nobody remembers; it waits in the console's list instead.
                self.realestate
                    .claim_outcome_question(&appointment.id, now)
                    .await?;
                continue;
            }
            let property = self.realestate.property(&appointment.property_id).await?;
            let agent = self
                .agent_of(appointment.follow_up.agent.as_deref(), property.as_ref())
                .await?;
            let Some((agent, to)) = agent.and_then(|a| a.wa_id.clone().map(|to| (a, to))) else {
                // Recorded from the console instead; asked never.
                if self
                    .realestate
                    .claim_outcome_question(&appointment.id, now)
                    .await?
                {
                    unreachable_agent("visit outcome", &appointment.id);
                }
                continue;
            };
            if !self
                .realestate
                .claim_outcome_question(&appointment.id, now)
                .await?
            {
                continue;
            }
            let customer = self.customer_name(&appointment.wa_id).await;
            let local = appointment.starts_at.with_timezone(&self.settings.timezone);
            let title = property
                .as_ref()
                .map(|p| p.title.clone())
                .unwrap_or_else(|| appointment.property_id.clone());
            let when = crate::domain::phrases::moment(Some("es"), local.naive_local());
            let text = texts::outcome_question(&customer, &appointment.property_id, &title, &when);
            let lang = self.lang_of(&to).await;
            let buttons = texts::outcome_buttons(&appointment.id, lang.as_deref());
            let values = [
                ("customer", customer.into()),
                ("property", title.into()),
                ("when", TemplateValue::Moment(local.naive_local())),
            ];
            let step = format!("{}:outcome", appointment.id);
            tracing::info!(appointment_id = %appointment.id, agent = %agent.id, "agent asked how the visit went");
            queued += self
                .send(
                    Outreach {
                        to: &to,
                        text: &text,
                        agent: VISIT_OUTCOME,
                        phone_number_id: &self.settings.phone_number_id,
                        purpose: Purpose::VisitOutcome,
                        values: &values,
                        step: &step,
                        step_at: appointment.starts_at,
                        buttons: &buttons,
                    },
                    now,
                )
                .await?;
        }
        Ok(queued)
    }

    /// Who answers offers on `property`: its owner when they are on WhatsApp and the agency
    /// lets them, else its agent.
    async fn answerer(&self, property: Option<&Property>) -> Result<Option<Contact>, EngineError> {
        if self.settings.offers_to_owners
            && let Some(property) = property
            && let Some(owner) = self.realestate.owner(&property.owner_id).await?
            && let Some(wa_id) = owner.wa_id.clone()
        {
            return Ok(Some(Contact {
                wa_id,
                name: owner.name,
                by: format!("owner:{}", owner.id),
            }));
        }
        self.agent_contact(property).await
    }

    async fn agent_contact(
        &self,
        property: Option<&Property>,
    ) -> Result<Option<Contact>, EngineError> {
        let agent = self.agent_of(None, property).await?;
        Ok(agent.and_then(|a| {
            a.wa_id.clone().map(|wa_id| Contact {
                wa_id,
                name: a.name.clone(),
                by: format!("agent:{}", a.id),
            })
        }))
    }

    /// The offers' pending notices: a new offer to its owner or agent, an answer to the
    /// customer, an accepted offer to the agent.
    async fn offer_notices(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let mut queued = 0;
        for offer in self.realestate.offer_notices_due(BATCH).await? {
            let Some(key) = offer.answer.notice.clone() else {
                continue;
            };
            let property = self.realestate.property(&offer.property_id).await?;
            let title = property
                .as_ref()
                .map(|p| p.title.clone())
                .unwrap_or_else(|| offer.property_id.clone());
            if key == "received" {
                queued += self
                    .offer_received(&offer, property.as_ref(), &title, now)
                    .await?;
            } else {
                queued += self
                    .offer_answered(&offer, property.as_ref(), &title, &key, now)
                    .await?;
            }
            self.realestate.offer_notice(&offer.id, &key, false).await?;
        }
        Ok(queued)
    }

    async fn offer_received(
        &self,
        offer: &Offer,
        property: Option<&Property>,
        title: &str,
        now: DateTime<Utc>,
    ) -> Result<usize, EngineError> {
        let Some(to) = self.answerer(property).await? else {
            unreachable_agent("offer", &offer.id);
            return Ok(0);
        };
        let amount = money(offer.amount, &offer.currency);
        let conditions = offer.conditions.clone().unwrap_or_default();
        let text = texts::offer_received(&to.name, &offer.property_id, title, &amount, &conditions);
        let lang = self.lang_of(&to.wa_id).await;
        let buttons = texts::offer_buttons(&offer.id, lang.as_deref());
        let values = [
            ("property", TemplateValue::from(title.to_owned())),
            ("amount", amount.into()),
            ("conditions", conditions.into()),
        ];
        let step = format!("{}:received", offer.id);
        tracing::info!(offer_id = %offer.id, to = %to.by, "offer sent for an answer");
        self.send(
            Outreach {
                to: &to.wa_id,
                text: &text,
                agent: OFFER_NOTICE,
                phone_number_id: &self.settings.phone_number_id,
                purpose: Purpose::OfferReceived,
                values: &values,
                step: &step,
                step_at: offer.created_at,
                buttons: &buttons,
            },
            now,
        )
        .await
    }

    async fn offer_answered(
        &self,
        offer: &Offer,
        property: Option<&Property>,
        title: &str,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<usize, EngineError> {
        let step_at = offer.answer.answered_at.unwrap_or(offer.created_at);
        let by_customer = offer.answer.answered_by.as_deref() == Some("customer");
        let mut queued = 0;
        let counter = offer.answer.counter_amount;
        let amount = money(counter.unwrap_or(offer.amount), &offer.currency);
        let agent = if offer.status == OfferStatus::Accepted {
            self.agent_contact(property).await?
        } else {
            None
        };
        if !by_customer {
            let lang = self.lang_of(&offer.wa_id).await;
            let (text, answer, buttons) = match offer.status {
                OfferStatus::Countered => (
                    texts::countered(
                        &offer.property_id,
                        title,
                        &money(offer.amount, &offer.currency),
                        &amount,
                    ),
                    "contraoferta",
                    texts::counter_buttons(&offer.id, lang.as_deref()),
                ),
                OfferStatus::Rejected => (
                    texts::rejected(&offer.property_id, title, &amount),
                    "rechazada",
                    Vec::new(),
                ),
                _ => (
                    texts::accepted(
                        &offer.property_id,
                        title,
                        &amount,
                        agent.as_ref().map(|a| a.name.as_str()),
                    ),
                    "aceptada",
                    Vec::new(),
                ),
            };
            let values = [
                ("property", TemplateValue::from(title.to_owned())),
                ("answer", answer.into()),
                ("amount", amount.clone().into()),
            ];
            let step = format!("{}:{key}", offer.id);
            queued += self
                .send(
                    Outreach {
                        to: &offer.wa_id,
                        text: &text,
                        agent: OFFER_NOTICE,
                        phone_number_id: &self.settings.phone_number_id,
                        purpose: Purpose::OfferAnswer,
                        values: &values,
                        step: &step,
                        step_at,
                        buttons: &buttons,
                    },
                    now,
                )
                .await?;
        }
        if offer.status == OfferStatus::Accepted {
            let Some(agent) = agent else {
                unreachable_agent("accepted offer", &offer.id);
                return Ok(queued);
            };
            let customer = self.customer_name(&offer.wa_id).await;
            let text = texts::accepted_to_agent(
                &customer,
                &offer.wa_id,
                &offer.property_id,
                title,
                &amount,
                offer.answer.answered_by.as_deref().unwrap_or_default(),
            );
            let link = self.link(&offer.wa_id);
            let values = [
                ("change", TemplateValue::from("Oferta aceptada")),
                ("customer", customer.into()),
                ("phone", format!("+{}", offer.wa_id.as_str()).into()),
                ("property", title.to_owned().into()),
                ("address", amount.into()),
                (
                    "when",
                    TemplateValue::Moment(
                        step_at.with_timezone(&self.settings.timezone).naive_local(),
                    ),
                ),
                ("link", link.into()),
            ];
            let step = format!("{}:{key}:agent", offer.id);
            queued += self
                .send(
                    Outreach {
                        to: &agent.wa_id,
                        text: &text,
                        agent: OFFER_NOTICE,
                        phone_number_id: &self.settings.phone_number_id,
                        purpose: Purpose::StaffVisit,
                        values: &values,
                        step: &step,
                        step_at,
                        buttons: &[],
                    },
                    now,
                )
                .await?;
        }
        Ok(queued)
    }

    /// From `at` (local) on, each agent with visits today gets the day's list once.
    async fn agendas(&self, at: NaiveTime, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let tz = self.settings.timezone;
        let local = now.with_timezone(&tz);
        if local.time() < at {
            return Ok(0);
        }
        let today = local.date_naive();
        if *self.agendas_sent.lock().unwrap_or_else(|e| e.into_inner()) == Some(today) {
            return Ok(0);
        }
        let bounds = |day: chrono::NaiveDate| {
            tz.from_local_datetime(&day.and_time(NaiveTime::MIN))
                .earliest()
                .map(|d| d.to_utc())
        };
        let (Some(from), Some(to)) = (bounds(today), bounds(today + chrono::Days::new(1))) else {
            return Ok(0);
        };
        let day: Vec<Appointment> = self
            .realestate
            .appointments_between(from, to)
            .await?
            .into_iter()
            .filter(|a| a.status == AppointmentStatus::Booked)
            .collect();
        let staff = self.realestate.staff().await?;
        // Each listing of the day read once, not once per staff member.
        let mut properties = std::collections::HashMap::new();
        for appointment in &day {
            if !properties.contains_key(&appointment.property_id) {
                let property = self.realestate.property(&appointment.property_id).await?;
                properties.insert(appointment.property_id.clone(), property);
            }
        }
        let mut queued = 0;
        for member in staff.iter().filter(|m| m.is_active()) {
            let Some(to) = member.wa_id.clone() else {
                continue;
            };
            let mut lines = Vec::new();
            let mut first = None;
            for appointment in &day {
                let property = properties
                    .get(&appointment.property_id)
                    .and_then(Option::as_ref);
                let named = appointment.follow_up.agent.as_deref();
                let theirs = match named {
                    Some(name) => is_theirs(name, member),
                    None => property.as_ref().is_some_and(|p| {
                        agents_of(p, &staff)
                            .first()
                            .is_some_and(|a| a.id == member.id)
                    }),
                };
                if !theirs {
                    continue;
                }
                let start = appointment.starts_at.with_timezone(&tz).format("%H:%M");
                let customer = self.customer_name(&appointment.wa_id).await;
                let place = property
                    .map(|p| format!("{} {}, {}", p.id, p.title, p.address))
                    .unwrap_or_else(|| appointment.property_id.clone());
                first.get_or_insert(appointment.starts_at);
                lines.push(texts::agenda_line(
                    &start.to_string(),
                    &place,
                    &customer,
                    &appointment.wa_id,
                ));
            }
            let Some(first) = first else {
                continue;
            };
            let text = texts::agenda(&member.name, &lines);
            let step = format!("agenda:{}:{}", member.id, today.format("%Y%m%d"));
            // Outside the window as `staff_visit`: the first visit's time, and the day's list
            // on one line (a template's parameter holds no line breaks).
            let values = [
                (
                    "change",
                    TemplateValue::from(format!("Agenda de hoy: {} visitas", lines.len())),
                ),
                ("customer", member.name.clone().into()),
                ("phone", "—".into()),
                ("property", lines.join("; ").into()),
                ("address", "—".into()),
                (
                    "when",
                    TemplateValue::Moment(first.with_timezone(&tz).naive_local()),
                ),
                ("link", self.visits_link().into()),
            ];
            queued += self
                .send(
                    Outreach {
                        to: &to,
                        text: &text,
                        agent: AGENDA,
                        phone_number_id: &self.settings.phone_number_id,
                        purpose: Purpose::StaffVisit,
                        values: &values,
                        step: &step,
                        step_at: from,
                        buttons: &[],
                    },
                    now,
                )
                .await?;
        }
        *self.agendas_sent.lock().unwrap_or_else(|e| e.into_inner()) = Some(today);
        Ok(queued)
    }
}

/// The agent of a visit or an offer: the one its slot named, else the listing's (its own,
/// or the staff covering its zone).
pub(crate) async fn agent_for(
    realestate: &dyn RealEstateStore,
    named: Option<&str>,
    property: Option<&Property>,
) -> crate::store::StoreResult<Option<StaffMember>> {
    let staff = realestate.staff().await?;
    let by_name = named.and_then(|name| staff.iter().find(|m| is_theirs(name, m)));
    let member = by_name.or_else(|| property.and_then(|p| agents_of(p, &staff).first().copied()));
    Ok(member.cloned())
}

/// A follow-up with nobody to send it to: said in the logs and the metrics, and left for the
/// console.
fn unreachable_agent(what: &'static str, id: &str) {
    tracing::warn!(id, what, "no agent on WhatsApp to tell: see the console");
    metrics::counter!("zaguan_follow_ups_unreachable_total", "what" => what).increment(1);
}
