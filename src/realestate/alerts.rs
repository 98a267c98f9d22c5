//! Saved-search alerts: a customer saved a search (`create_search_alert`); when a listing is
//! added or its price drops (`zaguan listings add|update`, or the admin API) and it matches,
//! the customer is told — a plain text inside WhatsApp's 24-hour window, the approved template
//! `WHATSAPP_ALERT_TEMPLATE` outside it — like a visit reminder, through guard_translator, the
//! outbox and the history. Each notice is claimed by unique insert on (customer, listing)
//! before it is queued, so a customer hears of a listing at most once, however many of their
//! searches match and however many instances look.

use crate::realestate::{AlertStore, PropertyStore};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::tools::text::{listing_line, price};
use super::{Alert, AlertCriteria, ListingStatus, Property, PropertyFilter, RealEstateStore};
use crate::agents::keywords::tokens;
use crate::engine::{Engine, EngineError, Notified, Outreach};
use crate::outbound::governor;
use crate::runtime::{PeriodicJob, spawn_every};
use crate::templates::Purpose;

/// The `agent` of alert notices in the history.
pub const ALERT_AGENT: &str = "search_alert";

/// News older than this is not announced: an instance down for a day still catches up, a
/// restored backup does not flood customers with last year's listings.
pub const ALERT_LOOKBACK: chrono::Duration = chrono::Duration::days(3);

impl AlertCriteria {
    /// Whether `property`, available, is what the search asks for.
    pub fn matches(&self, property: &Property) -> bool {
        let listed = PropertyFilter {
            city: self.city.clone(),
            operation: self.operation,
            available_only: true,
            owner_id: None,
        };
        listed.admits(property)
            && self
                .neighbourhood
                .as_ref()
                .is_none_or(|n| tokens(n) == tokens(&property.neighbourhood))
            && self.kind.is_none_or(|kind| kind == property.kind)
            && self.max_price.is_none_or(|max| property.price <= max)
            && self.min_bedrooms.is_none_or(|min| property.bedrooms >= min)
    }

    /// Whether it names anything at all: an alert for every listing is not a search.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// In a line, as the customer is told what they saved.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(kind) = self.kind {
            parts.push(kind.label_es().to_owned());
        }
        if let Some(op) = self.operation {
            parts.push(format!("en {}", op.label_es()));
        }
        match (&self.neighbourhood, &self.city) {
            (Some(n), Some(c)) => parts.push(format!("en {n} ({c})")),
            (Some(place), None) | (None, Some(place)) => parts.push(format!("en {place}")),
            (None, None) => {}
        }
        if let Some(n) = self.min_bedrooms {
            parts.push(format!("con {n} habitaciones o más"));
        }
        if let Some(max) = self.max_price {
            parts.push(format!("hasta {}", super::tools::text::money(max, "EUR")));
        }
        if parts.is_empty() {
            "cualquier inmueble".to_owned()
        } else {
            parts.join(" ")
        }
    }
}

/// How notices are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertSettings {
    /// The business number notices are sent from.
    pub phone_number_id: String,
    /// How often to look.
    pub every: Duration,
}

/// The alert loop of one process.
pub struct Alerts<S: ?Sized = dyn RealEstateStore> {
    realestate: Arc<S>,
    /// Says them: translation, outbox, history.
    engine: Arc<Engine>,
    settings: AlertSettings,
}

impl<S: AlertStore + PropertyStore + ?Sized> PeriodicJob for Alerts<S> {
    const DONE: Option<&'static str> = Some("saved-search notices queued");
    const FAILED: &'static str = "saved searches not checked";
    type Error = EngineError;

    async fn round(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        self.tick(now).await
    }
}

impl<S: AlertStore + PropertyStore + ?Sized> Alerts<S> {
    pub fn new(realestate: Arc<S>, engine: Arc<Engine>, settings: AlertSettings) -> Self {
        Self {
            realestate,
            engine,
            settings,
        }
    }

    /// Looks every `settings.every` until the process stops.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        let every = self.settings.every;
        spawn_every(self, every)
    }

    /// Queues the notices due at `now`; returns how many.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let news = self
            .realestate
            .properties_news_since(now - ALERT_LOOKBACK)
            .await?;
        if news.is_empty() {
            return Ok(0);
        }
        // While Meta's signals hold marketing, nothing is claimed: the news goes once they
        // clear, if still within the lookback.
        let store = self.engine.store().as_ref();
        if governor::is_marketing(store, &self.engine.templates(), Purpose::ListingAlert).await?
            && let Some(why) = governor::marketing_held(store, now).await?
        {
            tracing::info!(reason = %why, "saved-search notices wait: marketing is held");
            metrics::counter!("zaguan_outreach_held_total", "purpose" => Purpose::ListingAlert.key())
                .increment(1);
            return Ok(0);
        }
        let alerts = self.realestate.active_alerts().await?;
        let mut queued = 0;
        for property in news.iter().filter(|p| p.status == ListingStatus::Available) {
            for alert in alerts.iter().filter(|a| due(a, property)) {
                // Not claimed for an opted-out customer: after ALTA the notice still goes.
                if !governor::may_reach(
                    self.engine.store().as_ref(),
                    &alert.wa_id,
                    Purpose::ListingAlert,
                )
                .await?
                {
                    continue;
                }
                if !self
                    .realestate
                    .claim_alert_notice(&alert.wa_id, &property.id, now)
                    .await?
                {
                    continue;
                }
                if self.notify(alert, property, now).await? {
                    queued += 1;
                }
            }
        }
        Ok(queued)
    }

    async fn notify(
        &self,
        alert: &Alert,
        property: &Property,
        now: DateTime<Utc>,
    ) -> Result<bool, EngineError> {
        let dropped = property
            .price_dropped_at
            .is_some_and(|at| at > property.listed_at);
        let news = if dropped {
            "ha bajado de precio"
        } else {
            "acaba de entrar"
        };
        let text = format!(
            "Novedad para tu búsqueda ({}): {news} {}\n¿Quieres ver la ficha o visitarla? Si ya \
             no te interesa este aviso, dímelo y lo cancelo.",
            alert.criteria.describe(),
            listing_line(property),
        );
        let values = [
            ("title", property.title.clone().into()),
            ("price", price(property).into()),
            ("reference", property.id.clone().into()),
            ("business", self.engine.business_name().into()),
        ];
        let step = format!("alert:{}:{}", alert.id, property.id);
        let notified = self
            .engine
            .notify(
                Outreach {
                    to: &alert.wa_id,
                    text: &text,
                    agent: ALERT_AGENT,
                    phone_number_id: &self.settings.phone_number_id,
                    purpose: Purpose::ListingAlert,
                    values: &values,
                    step: &step,
                    step_at: property.news_at(),
                    buttons: &[],
                },
                now,
            )
            .await?;
        if let Notified::Skipped(skip) = notified {
            tracing::info!(conversation.id = %alert.wa_id.masked(), alert = %alert.id, property = %property.id, reason = skip.as_str(), "saved-search notice not sent");
            return Ok(false);
        }
        tracing::info!(conversation.id = %alert.wa_id.masked(), alert = %alert.id, property = %property.id, "saved-search notice queued");
        metrics::counter!("zaguan_alert_notices_total", "news" => if dropped { "price_drop" } else { "new_listing" })
            .increment(1);
        Ok(true)
    }
}

/// Whether `alert` should hear of `property`: news after the search was saved, and a match.
fn due(alert: &Alert, property: &Property) -> bool {
    property.news_at() >= alert.created_at && alert.criteria.matches(property)
}
