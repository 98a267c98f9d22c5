//! The send governor: the one place that decides whether a message the service writes first
//! may go, and in what form. WhatsApp delivers free text only inside the contact's 24-hour
//! customer-service window, measured from their last message's own timestamp; outside it only
//! an approved template arrives. A contact who opted out gets nothing unasked. So:
//!
//! - to an opted-out contact, an outreach purpose (a visit reminder, a listing alert) is not
//!   sent at all;
//! - a marketing one (its template's category, as Meta last rated it) goes neither to a
//!   contact who stopped marketing inside WhatsApp (`user_preferences`) nor while Meta's
//!   signals hold the account (restricted, flagged, rated low): utility ones still go;
//! - inside the window it goes as text, carrying the purpose's template as its fallback in case
//!   Meta answers that the window closed meanwhile (131047);
//! - outside it, the purpose's template in the contact's language (else the fallback
//!   language), unless Meta paused or rejected it;
//! - with no template to send, nothing, and the reason is recorded on the outbox.
//!
//! Pacing (Meta's pair rate and the number's throughput) is the sender's, at send time.

use chrono::{DateTime, Utc};

use crate::domain::{GraphError, OutboxId, WaId};
use crate::store::{
    ConversationStore, NewOutbox, OutboxEntry, OutboxStatus, OutboxStore, StoreResult, Template,
    TemplateStatus, UserStore,
};
use crate::templates::{Category, Purpose, TemplateSpec, TemplateValue, Templates};

/// WhatsApp's customer-service window.
pub const SERVICE_WINDOW: chrono::Duration = chrono::Duration::hours(24);

/// Why a message was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The contact asked for no proactive messages (BAJA, STOP).
    OptedOut,
    /// A marketing message to a contact who stopped marketing inside WhatsApp.
    MarketingStopped,
    /// A marketing message while Meta's signals hold the account or number.
    MarketingHeld,
    /// Outside the contact's window, with no usable template for the purpose.
    WindowClosed,
    /// A conversation the business would start with one contact more than Meta's messaging
    /// limit allows in 24 hours.
    MessagingLimit,
    /// Its template needs a value the service does not have, and `templates.toml` declares no
    /// fallback for it: Meta would refuse it.
    MissingValue(&'static str),
}

impl Skip {
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::OptedOut => "opted_out",
            Skip::MarketingStopped => "marketing_opted_out",
            Skip::MarketingHeld => "marketing_held",
            Skip::WindowClosed => "window_closed_no_template",
            Skip::MessagingLimit => "messaging_limit",
            Skip::MissingValue(_) => "template_value_missing",
        }
    }

    /// As operators read it on the outbox.
    pub fn reason(self) -> String {
        match self {
            Skip::OptedOut => {
                "not sent: the contact opted out of messages they did not ask for".to_owned()
            }
            Skip::MarketingStopped => {
                "not sent: marketing, and the contact stopped marketing messages in WhatsApp"
                    .to_owned()
            }
            Skip::MarketingHeld => "not sent: marketing, and Meta restricted, flagged or rated \
                 the account low (the console's overview says which)"
                .to_owned(),
            Skip::WindowClosed => {
                "not sent: outside the contact's 24-hour window, and no approved template for it"
                    .to_owned()
            }
            Skip::MessagingLimit => "not sent: Meta's messaging limit (contacts the business \
                 may start conversations with in 24 hours) is reached; the console's overview \
                 shows it"
                .to_owned(),
            Skip::MissingValue(name) => format!(
                "not sent: its template needs `{name}`, which is missing here, and \
                 templates.toml declares no fallback for it"
            ),
        }
    }
}

/// How a message may go.
#[derive(Debug, Clone, PartialEq)]
pub enum Form {
    /// Free text; `fallback` is sent instead if Meta answers that the window closed.
    Text {
        fallback: Option<Template>,
    },
    Template(Template),
    Skip(Skip),
}

impl Form {
    pub fn label(&self) -> &'static str {
        match self {
            Form::Text { .. } => "text",
            Form::Template(_) => "template",
            Form::Skip(skip) => skip.as_str(),
        }
    }
}

/// Whether a contact who last wrote at `last_wrote` (WhatsApp's own stamp: a message delivered
/// late does not reopen it) can get free text at `now`, on the database's clock.
pub fn window_open(last_wrote: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now - last_wrote < SERVICE_WINDOW
}

/// How a notice of the service's own to a contact who just wrote (the «slow down») may go:
/// as text inside their window; outside it (a backlog answered late) nothing, for it has no
/// template, and the reason is recorded.
pub async fn notice_form(
    store: &(impl ConversationStore + ?Sized),
    to: &WaId,
    written_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> StoreResult<Form> {
    let last_wrote = store
        .conversation(to)
        .await?
        .and_then(|c| c.last_inbound_at)
        .map_or(written_at, |at| at.max(written_at));
    Ok(if window_open(last_wrote, now) {
        Form::Text { fallback: None }
    } else {
        Form::Skip(Skip::WindowClosed)
    })
}

/// Whether `to` can be written to first for `purpose` at all: opted-out contacts are not, for
/// outreach. Asked before a message is claimed, so an opt-in later still gets it.
pub async fn may_reach(
    store: &(impl UserStore + ?Sized),
    to: &WaId,
    purpose: Purpose,
) -> StoreResult<bool> {
    if !purpose.is_outreach() {
        return Ok(true);
    }
    Ok(!store.user(to).await?.is_some_and(|user| user.opted_out()))
}

/// How a message for `purpose` may go to `to`, whose language is `lang`, at `now` on the
/// database's clock; `values` fill the template's parameters.
pub async fn form(
    store: &(impl UserStore + ConversationStore + OutboxStore + ?Sized),
    templates: &Templates,
    to: &WaId,
    purpose: Purpose,
    lang: Option<&str>,
    values: &[(&str, TemplateValue)],
    now: DateTime<Utc>,
) -> StoreResult<Form> {
    let user = store.user(to).await?;
    if purpose.is_outreach() && user.as_ref().is_some_and(|u| u.opted_out()) {
        return Ok(Form::Skip(Skip::OptedOut));
    }
    let open = store
        .conversation(to)
        .await?
        .and_then(|c| c.last_inbound_at)
        .is_some_and(|at| window_open(at, now));
    let statuses = store.template_statuses().await?;
    let spec = usable(templates, &statuses, purpose, lang);
    if category(templates, &statuses, purpose, lang, spec) == Some(Category::Marketing) {
        if user.is_some_and(|u| u.marketing_opted_out_at.is_some()) {
            return Ok(Form::Skip(Skip::MarketingStopped));
        }
        if marketing_held(store, now).await?.is_some() {
            return Ok(Form::Skip(Skip::MarketingHeld));
        }
    }
    let template = spec.map(|spec| template(spec, purpose, values));
    Ok(match (open, template) {
        // Inside the window the text goes; a fallback that cannot be filled is left out.
        (true, fallback) => Form::Text {
            fallback: fallback.and_then(Result::ok),
        },
        (false, Some(Ok(template))) if within_messaging_limit(store, to, now).await? => {
            Form::Template(template)
        }
        (false, Some(Ok(_))) => Form::Skip(Skip::MessagingLimit),
        (false, Some(Err(skip))) => Form::Skip(skip),
        (false, None) => Form::Skip(Skip::WindowClosed),
    })
}

/// Asked again just before a queued part written first is sent: why it may no longer go, if
/// something changed since it was queued (the contact opted out or stopped marketing, Meta's
/// signals now hold marketing). Replies to the customer are never stopped here.
pub async fn stopped_at_send(
    store: &(impl UserStore + OutboxStore + ?Sized),
    entry: &OutboxEntry,
    now: DateTime<Utc>,
) -> StoreResult<Option<Skip>> {
    if !entry.purpose.is_some_and(Purpose::is_outreach) {
        return Ok(None);
    }
    let user = store.user(&entry.wa_id).await?;
    if user.as_ref().is_some_and(|u| u.opted_out()) {
        return Ok(Some(Skip::OptedOut));
    }
    let marketing = [&entry.template, &entry.fallback]
        .into_iter()
        .flatten()
        .any(|t| t.category.as_deref().and_then(Category::parse) == Some(Category::Marketing));
    if !marketing {
        return Ok(None);
    }
    if user.is_some_and(|u| u.marketing_opted_out_at.is_some()) {
        return Ok(Some(Skip::MarketingStopped));
    }
    Ok(marketing_held(store, now)
        .await?
        .map(|_| Skip::MarketingHeld))
}

/// The outbox's record of a part `skip` stopped.
pub fn skip_error(skip: Skip) -> GraphError {
    GraphError {
        code: None,
        title: None,
        message: Some(skip.reason()),
        error_data: None,
    }
}

/// Whether a conversation the business starts with `to` at `now` keeps within Meta's messaging
/// limit (the lowest its signals gave, shared by the portfolio's numbers): a contact already
/// reached in the last 24 hours costs nothing more.
async fn within_messaging_limit(
    store: &(impl OutboxStore + ?Sized),
    to: &WaId,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let Some(limit) = store
        .account_health()
        .await?
        .iter()
        .filter_map(crate::domain::AccountHealth::messaging_limit_users)
        .min()
    else {
        return Ok(true);
    };
    let (reached, already) = store.initiated_since(now - SERVICE_WINDOW, to).await?;
    Ok(already || reached < limit)
}

/// Why marketing waits at `now`, if Meta's signals hold any account or number of the business.
pub async fn marketing_held(
    store: &(impl OutboxStore + ?Sized),
    now: DateTime<Utc>,
) -> StoreResult<Option<String>> {
    Ok(store
        .account_health()
        .await?
        .iter()
        .find_map(|health| health.holds_marketing(now)))
}

/// Whether `purpose`'s template (the fallback language's) is marketing: Meta's category where
/// it moved it, else the file's, as [`form`] asks it per contact.
pub async fn is_marketing(
    store: &(impl OutboxStore + ?Sized),
    templates: &Templates,
    purpose: Purpose,
) -> StoreResult<bool> {
    let statuses = store.template_statuses().await?;
    let spec = usable(templates, &statuses, purpose, None);
    Ok(category(templates, &statuses, purpose, None, spec) == Some(Category::Marketing))
}

/// The category of `purpose`'s template (`spec`, else the file's in `lang`): Meta's where it
/// moved it, else the file's.
fn category(
    templates: &Templates,
    statuses: &[TemplateStatus],
    purpose: Purpose,
    lang: Option<&str>,
    spec: Option<&TemplateSpec>,
) -> Option<Category> {
    let spec = spec.or_else(|| templates.for_purpose(purpose, lang))?;
    let rated = statuses
        .iter()
        .find(|s| s.name == spec.name && s.language == spec.language)
        .and_then(|s| s.category.as_deref())
        .and_then(Category::parse);
    Some(rated.unwrap_or(spec.category))
}

/// The template for `purpose` in `lang` (else the fallback language) that Meta has not
/// paused or rejected, as its webhooks last said.
pub fn usable<'a>(
    templates: &'a Templates,
    statuses: &[TemplateStatus],
    purpose: Purpose,
    lang: Option<&str>,
) -> Option<&'a TemplateSpec> {
    templates.usable_for(purpose, lang, |spec| {
        statuses
            .iter()
            .find(|s| s.name == spec.name && s.language == spec.language)
            .is_none_or(TemplateStatus::usable)
    })
}

/// `spec` of `purpose` filled with `values`, as an outbox part carries it; or why it cannot be.
pub fn template(
    spec: &TemplateSpec,
    purpose: Purpose,
    values: &[(&str, TemplateValue)],
) -> Result<Template, Skip> {
    let parameters = spec.fill(values).map_err(|missing| {
        let name = purpose
            .values()
            .iter()
            .copied()
            .find(|value| *value == missing)
            .unwrap_or("a value");
        tracing::warn!(template = %spec.name, parameter = name, "a template value is missing and has no fallback: not sent");
        metrics::counter!("zaguan_template_values_missing_total", "purpose" => purpose.key())
            .increment(1);
        Skip::MissingValue(name)
    })?;
    // The approved template's quick replies carry the ids the text's buttons would.
    let buttons = values
        .iter()
        .find_map(|(_, value)| match value {
            TemplateValue::Buttons(ids) => Some(ids.iter().take(spec.quick_replies).cloned()),
            _ => None,
        })
        .into_iter()
        .flatten()
        .collect();
    Ok(Template {
        name: spec.name.clone(),
        language: spec.language.clone(),
        parameters,
        category: Some(spec.category.as_str().to_owned()),
        buttons,
    })
}

/// A part that was not sent, with why, for operators to see on the outbox (`skipped`).
pub fn skipped(mut part: NewOutbox, skip: Skip, id: OutboxId) -> OutboxEntry {
    part.fallback = None;
    let mut entry = OutboxEntry::queued(id, &part);
    entry.status = OutboxStatus::Skipped;
    entry.error = Some(skip_error(skip));
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ContactSeen, MemoryStore, OptOut};

    fn utility(name: &str, language: &str) -> crate::templates::TemplateSpec {
        crate::templates::TemplateSpec::new(
            name,
            language,
            crate::templates::Category::Utility,
            vec!["name".into()],
        )
    }

    fn contact(wa_id: &WaId, seen_at: DateTime<Utc>) -> ContactSeen {
        ContactSeen {
            wa_id: wa_id.clone(),
            phone: Some(wa_id.as_str().to_owned()),
            user_id: None,
            name: Some("Ana".into()),
            username: None,
            seen_at,
        }
    }

    #[tokio::test]
    async fn an_opt_out_stops_everything_written_first_but_the_staff_notice() {
        let store = MemoryStore::new();
        let templates = Templates::default().with_default(
            Purpose::ReEngagement,
            "es",
            utility("seguimos_aqui", "es"),
        );
        let to = WaId::parse("34611000001").unwrap();
        let now = Utc::now();
        store
            .record_contact(&contact(&to, now - chrono::Duration::hours(30)))
            .await
            .unwrap();
        let form_of = |purpose| {
            let (store, templates, to) = (&store, &templates, &to);
            async move {
                form(
                    store,
                    templates,
                    to,
                    purpose,
                    Some("es"),
                    &[("name", "Ana".into())],
                    now,
                )
                .await
                .unwrap()
            }
        };
        assert!(matches!(
            form_of(Purpose::ReEngagement).await,
            Form::Template(_)
        ));
        store
            .set_opt_out(
                &to,
                Some(&OptOut {
                    at: now,
                    source: "keyword:BAJA".into(),
                }),
            )
            .await
            .unwrap();
        for purpose in [
            Purpose::VisitReminder,
            Purpose::ListingAlert,
            Purpose::ReEngagement,
            Purpose::OperatorFollowUp,
        ] {
            assert!(
                matches!(form_of(purpose).await, Form::Skip(Skip::OptedOut)),
                "{purpose:?}"
            );
        }
        assert!(may_reach(&store, &to, Purpose::StaffHandoff).await.unwrap());
    }

    #[tokio::test]
    async fn outside_the_window_only_a_template_goes() {
        let store = MemoryStore::new();
        let templates = Templates::default().with_default(
            Purpose::ListingAlert,
            "en",
            utility("listing_alert", "en"),
        );
        let to = WaId::parse("34611000002").unwrap();
        let now = Utc::now();
        store
            .record_contact(&contact(&to, now - chrono::Duration::hours(2)))
            .await
            .unwrap();
        let inside = form(
            &store,
            &templates,
            &to,
            Purpose::ListingAlert,
            Some("en"),
            &[("name", "Ana".into())],
            now,
        )
        .await
        .unwrap();
        assert!(matches!(inside, Form::Text { fallback: Some(_) }));
        let later = now + chrono::Duration::hours(23);
        let outside = form(
            &store,
            &templates,
            &to,
            Purpose::ListingAlert,
            Some("en"),
            &[("name", "Ana".into())],
            later,
        )
        .await
        .unwrap();
        assert!(matches!(outside, Form::Template(ref t) if t.language == "en"));
        let none = form(
            &store,
            &templates,
            &to,
            Purpose::VisitReminder,
            Some("en"),
            &[("name", "Ana".into())],
            later,
        )
        .await
        .unwrap();
        assert!(matches!(none, Form::Skip(Skip::WindowClosed)));
    }

    #[tokio::test]
    async fn a_template_value_missing_without_a_fallback_is_not_sent_and_says_why() {
        let store = MemoryStore::new();
        let mut reminder = crate::templates::TemplateSpec::new(
            "visit_reminder",
            "es",
            crate::templates::Category::Utility,
            vec!["property".into(), "when".into(), "address".into()],
        );
        let templates =
            Templates::default().with_default(Purpose::VisitReminder, "es", reminder.clone());
        let to = WaId::parse("34611000003").unwrap();
        let now = Utc::now();
        store
            .record_contact(&contact(&to, now - chrono::Duration::hours(30)))
            .await
            .unwrap();
        // The listing is gone: no address.
        let values = [
            ("property", "P-1001".into()),
            ("when", "jueves 03/12 a las 10:00".into()),
            ("address", String::new().into()),
        ];
        let skipped = form(
            &store,
            &templates,
            &to,
            Purpose::VisitReminder,
            Some("es"),
            &values,
            now,
        )
        .await
        .unwrap();
        assert_eq!(skipped, Form::Skip(Skip::MissingValue("address")));
        assert!(
            Skip::MissingValue("address")
                .reason()
                .contains("needs `address`"),
        );
        // With a fallback declared, it goes.
        reminder
            .fallbacks
            .insert("address".into(), "la dirección que te indicamos".into());
        let templates = Templates::default().with_default(Purpose::VisitReminder, "es", reminder);
        let Form::Template(sent) = form(
            &store,
            &templates,
            &to,
            Purpose::VisitReminder,
            Some("es"),
            &values,
            now,
        )
        .await
        .unwrap() else {
            panic!("a template outside the window");
        };
        assert_eq!(sent.parameters[2], "la dirección que te indicamos");
    }

    #[tokio::test]
    async fn marketing_stops_for_a_contact_who_stopped_it_and_while_the_account_is_held() {
        let store = MemoryStore::new();
        let mut alert = utility("listing_alert", "es");
        alert.category = crate::templates::Category::Marketing;
        let templates = Templates::default()
            .with_default(Purpose::ListingAlert, "es", alert)
            .with_default(
                Purpose::VisitReminder,
                "es",
                utility("visit_reminder", "es"),
            );
        let to = WaId::parse("34611000004").unwrap();
        let now = Utc::now();
        store
            .record_contact(&contact(&to, now - chrono::Duration::hours(30)))
            .await
            .unwrap();
        let form_of = |purpose| {
            let (store, templates, to) = (&store, &templates, &to);
            async move {
                form(
                    store,
                    templates,
                    to,
                    purpose,
                    Some("es"),
                    &[("name", "Ana".into())],
                    now,
                )
                .await
                .unwrap()
            }
        };
        assert!(matches!(
            form_of(Purpose::ListingAlert).await,
            Form::Template(_)
        ));
        store
            .set_marketing_preference(&to, true, now)
            .await
            .unwrap();
        assert_eq!(
            form_of(Purpose::ListingAlert).await,
            Form::Skip(Skip::MarketingStopped)
        );
        assert!(matches!(
            form_of(Purpose::VisitReminder).await,
            Form::Template(_)
        ));
        store
            .set_marketing_preference(&to, false, now + chrono::Duration::seconds(1))
            .await
            .unwrap();
        assert!(matches!(
            form_of(Purpose::ListingAlert).await,
            Form::Template(_)
        ));

        // Meta flags the number: marketing waits, utility goes; unflagged, both go.
        let flag = |event: &str| crate::domain::AccountSignal {
            account: "1".into(),
            number: Some("34910000000".into()),
            field: "phone_number_quality_update",
            event: event.into(),
            restrictions: Vec::new(),
            messaging_limit: None,
            quality: None,
            detail: None,
        };
        let mut health = crate::domain::AccountHealth::default();
        health.apply(&flag("FLAGGED"), now);
        store.record_account_health(&health).await.unwrap();
        assert_eq!(
            form_of(Purpose::ListingAlert).await,
            Form::Skip(Skip::MarketingHeld)
        );
        assert!(matches!(
            form_of(Purpose::VisitReminder).await,
            Form::Template(_)
        ));
        health.apply(&flag("UNFLAGGED"), now);
        store.record_account_health(&health).await.unwrap();
        assert!(matches!(
            form_of(Purpose::ListingAlert).await,
            Form::Template(_)
        ));

        // Meta moves the reminder's template to marketing: it is marketing from then on.
        store
            .set_marketing_preference(&to, true, now + chrono::Duration::seconds(2))
            .await
            .unwrap();
        store
            .record_template_status(&TemplateStatus {
                name: "visit_reminder".into(),
                language: "es".into(),
                status: "APPROVED".into(),
                category: Some("marketing".into()),
                reason: None,
                quality: None,
                at: now,
            })
            .await
            .unwrap();
        assert_eq!(
            form_of(Purpose::VisitReminder).await,
            Form::Skip(Skip::MarketingStopped)
        );
    }

    #[tokio::test]
    async fn a_template_rated_low_falls_back_to_another_language_or_to_nothing() {
        let store = MemoryStore::new();
        let templates = Templates::default().with_default(
            Purpose::VisitReminder,
            "es",
            utility("visit_reminder", "es"),
        );
        let to = WaId::parse("34611000005").unwrap();
        let now = Utc::now();
        store
            .record_contact(&contact(&to, now - chrono::Duration::hours(30)))
            .await
            .unwrap();
        store
            .record_template_status(&TemplateStatus {
                name: "visit_reminder".into(),
                language: "es".into(),
                status: "APPROVED".into(),
                category: None,
                reason: None,
                quality: Some("RED".into()),
                at: now,
            })
            .await
            .unwrap();
        let reminder = form(
            &store,
            &templates,
            &to,
            Purpose::VisitReminder,
            Some("es"),
            &[("name", "Ana".into())],
            now,
        )
        .await
        .unwrap();
        assert_eq!(reminder, Form::Skip(Skip::WindowClosed));
    }
}
