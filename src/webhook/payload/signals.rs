//! The changes that are not messages but that the service must act on: a customer's marketing
//! preference set inside WhatsApp (`user_preferences`), the account's and the number's standing
//! (`account_update`, `phone_number_quality_update`) and a template's quality
//! (`message_template_quality_update`). Each is read on its own, like a message: one that cannot
//! be typed is kept for operators, the rest of the body goes on.

use serde::Deserialize;

use super::{RejectedUpdate, TemplateChange, Updates, parse_timestamp};
use crate::domain::{AccountSignal, Restriction, WaId};

/// A customer's choice about marketing messages, made inside WhatsApp.
#[derive(Debug, Clone, PartialEq)]
pub struct MarketingPreference {
    pub wa_id: WaId,
    /// `marketing_messages` today; anything else is counted and left.
    pub category: String,
    /// `stop`, `resume` or `signup`.
    pub value: String,
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

impl MarketingPreference {
    /// `Some(true)` for a stop, `Some(false)` for a resume or a sign-up, `None` for anything
    /// this service does not act on.
    pub fn stops(&self) -> Option<bool> {
        if self.category != "marketing_messages" {
            return None;
        }
        match self.value.as_str() {
            "stop" => Some(true),
            "resume" | "signup" => Some(false),
            _ => None,
        }
    }
}

/// Whether this module reads `field`.
pub(super) fn reads(field: &str) -> bool {
    matches!(
        field,
        "user_preferences"
            | "account_update"
            | "phone_number_quality_update"
            | "message_template_quality_update"
    )
}

/// Reads one change of a field [`reads`] accepts into `updates`.
pub(super) fn read(account: &str, field: &str, value: &str, updates: &mut Updates) {
    let read = match field {
        "user_preferences" => preferences(value).map(|p| updates.preferences.extend(p)),
        "message_template_quality_update" => {
            template_quality(value).map(|t| updates.templates.push(t))
        }
        "account_update" => account_update(account, value).map(|s| updates.accounts.push(s)),
        _ => number_quality(account, value).map(|s| updates.accounts.push(s)),
    };
    if let Err(error) = read {
        updates.rejected.push(RejectedUpdate {
            what: "signal",
            reason: format!("{field}: {error}"),
            raw: value.to_owned(),
        });
    }
}

#[derive(Deserialize)]
struct WirePreferences {
    #[serde(default)]
    contacts: Vec<super::Contact>,
    #[serde(default)]
    user_preferences: Vec<WirePreference>,
}

#[derive(Deserialize)]
struct WirePreference {
    #[serde(default)]
    wa_id: Option<String>,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    category: String,
    #[serde(default)]
    value: String,
    #[serde(default)]
    timestamp: Option<serde_json::Value>,
}

fn preferences(value: &str) -> Result<Vec<MarketingPreference>, String> {
    let wire: WirePreferences = serde_json::from_str(value).map_err(|e| e.to_string())?;
    let only_contact = match wire.contacts.as_slice() {
        [only] => only.wa_id.clone().or_else(|| only.user_id.clone()),
        _ => None,
    };
    wire.user_preferences
        .into_iter()
        .map(|p| {
            let who = p
                .wa_id
                .or(p.user_id)
                .or_else(|| only_contact.clone())
                .ok_or("a preference names no contact")?;
            Ok(MarketingPreference {
                wa_id: WaId::parse(&who)?,
                category: p.category,
                value: p.value,
                at: p.timestamp.as_ref().and_then(timestamp),
            })
        })
        .collect()
}

/// Meta writes timestamps as numbers here and as strings elsewhere.
fn timestamp(value: &serde_json::Value) -> Option<chrono::DateTime<chrono::Utc>> {
    match value {
        serde_json::Value::Number(n) => n
            .as_i64()
            .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0)),
        serde_json::Value::String(s) => parse_timestamp(s),
        _ => None,
    }
}

#[derive(Deserialize)]
struct WireTemplateQuality {
    message_template_name: String,
    message_template_language: String,
    #[serde(default)]
    new_quality_score: Option<String>,
}

fn template_quality(value: &str) -> Result<TemplateChange, String> {
    let wire: WireTemplateQuality = serde_json::from_str(value).map_err(|e| e.to_string())?;
    Ok(TemplateChange {
        name: wire.message_template_name,
        language: wire.message_template_language,
        event: None,
        category: None,
        reason: None,
        quality: wire.new_quality_score,
    })
}

#[derive(Deserialize)]
struct WireAccountUpdate {
    #[serde(default)]
    event: String,
    #[serde(default)]
    phone_number: Option<String>,
    #[serde(default)]
    restriction_info: Vec<WireRestriction>,
    #[serde(default)]
    violation_info: Option<WireViolation>,
    #[serde(default)]
    ban_info: Option<WireBan>,
    #[serde(default)]
    volume_tier_info: Option<WireTier>,
    #[serde(default)]
    disconnection_info: Option<WireDisconnection>,
}

#[derive(Deserialize)]
struct WireRestriction {
    #[serde(default)]
    restriction_type: String,
    #[serde(default)]
    expiration: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WireViolation {
    #[serde(default)]
    violation_type: Option<String>,
}

#[derive(Deserialize)]
struct WireBan {
    #[serde(default)]
    waba_ban_state: Option<String>,
}

#[derive(Deserialize)]
struct WireTier {
    #[serde(default)]
    pricing_category: Option<String>,
    #[serde(default)]
    tier: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    effective_month: Option<String>,
}

#[derive(Deserialize)]
struct WireDisconnection {
    #[serde(default)]
    reason: Option<String>,
}

fn account_update(account: &str, value: &str) -> Result<AccountSignal, String> {
    let wire: WireAccountUpdate = serde_json::from_str(value).map_err(|e| e.to_string())?;
    let tier = wire.volume_tier_info.map(|t| {
        [t.pricing_category, t.tier, t.region, t.effective_month]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ")
    });
    let detail = wire
        .violation_info
        .and_then(|v| v.violation_type)
        .or(wire.ban_info.and_then(|b| b.waba_ban_state))
        .or(tier)
        .or(wire.disconnection_info.and_then(|d| d.reason));
    Ok(AccountSignal {
        account: account.to_owned(),
        number: wire.phone_number,
        field: "account_update",
        event: wire.event,
        restrictions: wire
            .restriction_info
            .into_iter()
            .map(|r| Restriction {
                kind: r.restriction_type,
                until: r.expiration.as_ref().and_then(timestamp),
            })
            .collect(),
        messaging_limit: None,
        quality: None,
        detail,
    })
}

#[derive(Deserialize)]
struct WireNumberQuality {
    #[serde(default)]
    display_phone_number: Option<String>,
    #[serde(default)]
    event: String,
    #[serde(default)]
    current_limit: Option<String>,
    #[serde(default)]
    max_daily_conversations_per_business: Option<serde_json::Value>,
    #[serde(default, alias = "new_quality_score")]
    quality_rating: Option<String>,
}

fn number_quality(account: &str, value: &str) -> Result<AccountSignal, String> {
    let wire: WireNumberQuality = serde_json::from_str(value).map_err(|e| e.to_string())?;
    // The newer field first: Meta retires `current_limit` during 2026.
    let limit = wire
        .max_daily_conversations_per_business
        .map(|v| match v {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        })
        .or(wire.current_limit);
    Ok(AccountSignal {
        account: account.to_owned(),
        number: wire.display_phone_number,
        field: "phone_number_quality_update",
        event: wire.event,
        restrictions: Vec::new(),
        messaging_limit: limit,
        quality: wire.quality_rating,
        detail: None,
    })
}
