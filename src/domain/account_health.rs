//! What Meta says of the business's WhatsApp account and numbers (`account_update`,
//! `phone_number_quality_update`), folded into one standing per account or number. A restricted
//! account, a flagged number or one rated low must stop the outreach that got it there before
//! Meta stops the number: marketing waits, utility goes on.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One signal as the webhook carried it.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountSignal {
    /// The WhatsApp Business Account (`entry.id`).
    pub account: String,
    /// The business number it concerns, when Meta names one (`display_phone_number`).
    pub number: Option<String>,
    /// `account_update` or `phone_number_quality_update`.
    pub field: &'static str,
    /// `ACCOUNT_RESTRICTION`, `FLAGGED`, `UPGRADE`, `VOLUME_BASED_PRICING_TIER_UPDATE`…
    pub event: String,
    pub restrictions: Vec<Restriction>,
    /// The number's messaging limit (`current_limit`, `max_daily_conversations_per_business`).
    pub messaging_limit: Option<String>,
    /// The quality rating where Meta states one (`GREEN`, `YELLOW`, `RED`).
    pub quality: Option<String>,
    /// A violation's type, a ban's state, a disconnection's reason, a pricing tier.
    pub detail: Option<String>,
}

impl AccountSignal {
    /// Where the standing is kept: the number's, else the account's.
    pub fn key(&self) -> String {
        match &self.number {
            Some(number) => number.clone(),
            None => format!("waba:{}", self.account),
        }
    }
}

/// A restriction Meta put on the account (`restriction_info`), until when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restriction {
    /// `RESTRICTED_BIZ_INITIATED_MESSAGING`, `RESTRICTED_ADD_PHONE_NUMBER_ACTION`…
    pub kind: String,
    pub until: Option<DateTime<Utc>>,
}

/// An account's or number's standing as its signals left it (`whatsapp_accounts`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccountHealth {
    /// The number, or `waba:ID` for the account.
    pub key: String,
    pub quality: Option<String>,
    /// Meta flagged the number for low quality (`FLAGGED` until `UNFLAGGED`).
    pub flagged: bool,
    pub messaging_limit: Option<String>,
    pub restrictions: Vec<Restriction>,
    /// Disabled, banned, deleted, offboarded or without its partner: why.
    pub disabled: Option<String>,
    pub violation: Option<String>,
    /// The volume pricing tier Meta last reported.
    pub tier: Option<String>,
    pub last_event: String,
    pub at: Option<DateTime<Utc>>,
}

impl AccountHealth {
    /// The standing after `signal`, received at `at`.
    pub fn apply(&mut self, signal: &AccountSignal, at: DateTime<Utc>) {
        self.key = signal.key();
        self.last_event = signal.event.clone();
        self.at = Some(at);
        if let Some(quality) = &signal.quality {
            self.quality = Some(quality.to_ascii_uppercase());
        }
        if let Some(limit) = &signal.messaging_limit {
            self.messaging_limit = Some(limit.clone());
        }
        match signal.event.as_str() {
            "ACCOUNT_RESTRICTION" => self.restrictions = signal.restrictions.clone(),
            "ACCOUNT_VIOLATION" => self.violation = signal.detail.clone(),
            "DISABLED_UPDATE" => {
                self.disabled = signal
                    .detail
                    .clone()
                    .filter(|state| !matches!(state.as_str(), "REINSTATE" | "REINSTATED"))
            }
            "ACCOUNT_DELETED" | "ACCOUNT_OFFBOARDED" | "PARTNER_REMOVED" | "DISABLED" => {
                self.disabled = Some(signal.event.clone())
            }
            "ACCOUNT_RECONNECTED" | "ACCOUNT_RESTORED" | "PARTNER_ADDED" => self.disabled = None,
            "VOLUME_BASED_PRICING_TIER_UPDATE" => self.tier = signal.detail.clone(),
            "FLAGGED" => {
                self.flagged = true;
                self.quality.get_or_insert_with(|| "RED".to_owned());
            }
            "UNFLAGGED" => {
                self.flagged = false;
                if signal.quality.is_none() && self.quality.as_deref() == Some("RED") {
                    self.quality = None;
                }
            }
            _ => {}
        }
    }

    /// How many unique contacts Meta lets the business start conversations with (deliver to
    /// outside their window) in a moving 24 hours, as its last signal put it: `TIER_250`,
    /// `TIER_2K`, or the number itself (`max_daily_conversations_per_business`); `None` when
    /// unlimited or unknown.
    pub fn messaging_limit_users(&self) -> Option<u64> {
        let limit = self.messaging_limit.as_deref()?.trim();
        let tier = limit
            .strip_prefix("TIER_")
            .unwrap_or(limit)
            .to_ascii_uppercase();
        let (digits, scale) = match tier.strip_suffix('K') {
            Some(digits) => (digits, 1_000),
            None => match tier.strip_suffix('M') {
                Some(digits) => (digits, 1_000_000),
                None => (tier.as_str(), 1),
            },
        };
        digits.parse::<u64>().ok().map(|n| n * scale)
    }

    /// The restrictions still in force at `now`.
    pub fn restrictions_at(&self, now: DateTime<Utc>) -> impl Iterator<Item = &Restriction> {
        self.restrictions
            .iter()
            .filter(move |r| r.until.is_none_or(|until| until > now))
    }

    /// Why marketing must wait at `now`, if it must: a restriction, a flag, a low rating, a
    /// disabled account.
    pub fn holds_marketing(&self, now: DateTime<Utc>) -> Option<String> {
        if let Some(why) = &self.disabled {
            return Some(format!("the WhatsApp account is disabled ({why})"));
        }
        if let Some(restriction) = self.restrictions_at(now).next() {
            return Some(format!(
                "Meta restricted the account ({})",
                restriction.kind
            ));
        }
        if self.flagged || self.quality.as_deref() == Some("RED") {
            return Some(format!("Meta rated the number {} low", self.key));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_messaging_limit_reads_as_meta_writes_it() {
        let limit = |value: &str| {
            AccountHealth {
                messaging_limit: Some(value.into()),
                ..AccountHealth::default()
            }
            .messaging_limit_users()
        };
        assert_eq!(limit("TIER_50"), Some(50));
        assert_eq!(limit("TIER_250"), Some(250));
        assert_eq!(limit("TIER_2K"), Some(2_000));
        assert_eq!(limit("TIER_100K"), Some(100_000));
        assert_eq!(limit("2000"), Some(2_000));
        assert_eq!(limit("TIER_UNLIMITED"), None);
        assert_eq!(AccountHealth::default().messaging_limit_users(), None);
    }

    fn signal(event: &str) -> AccountSignal {
        AccountSignal {
            account: "102290129340398".into(),
            number: None,
            field: "account_update",
            event: event.into(),
            restrictions: Vec::new(),
            messaging_limit: None,
            quality: None,
            detail: None,
        }
    }

    #[test]
    fn a_restriction_holds_marketing_until_it_expires_or_is_lifted() {
        let now = Utc::now();
        let mut health = AccountHealth::default();
        health.apply(
            &AccountSignal {
                restrictions: vec![Restriction {
                    kind: "RESTRICTED_BIZ_INITIATED_MESSAGING".into(),
                    until: Some(now + chrono::Duration::days(1)),
                }],
                ..signal("ACCOUNT_RESTRICTION")
            },
            now,
        );
        assert_eq!(
            health.holds_marketing(now).as_deref(),
            Some("Meta restricted the account (RESTRICTED_BIZ_INITIATED_MESSAGING)")
        );
        assert_eq!(
            health.holds_marketing(now + chrono::Duration::days(2)),
            None
        );
        health.apply(&signal("ACCOUNT_RESTRICTION"), now);
        assert_eq!(health.holds_marketing(now), None);
    }

    #[test]
    fn a_flag_holds_marketing_until_unflagged_and_a_ban_until_reinstated() {
        let now = Utc::now();
        let mut health = AccountHealth::default();
        let number = |event: &str| AccountSignal {
            number: Some("15550783881".into()),
            field: "phone_number_quality_update",
            messaging_limit: Some("TIER_1K".into()),
            ..signal(event)
        };
        health.apply(&number("FLAGGED"), now);
        assert_eq!(health.quality.as_deref(), Some("RED"));
        assert_eq!(health.messaging_limit.as_deref(), Some("TIER_1K"));
        assert_eq!(
            health.holds_marketing(now).as_deref(),
            Some("Meta rated the number 15550783881 low")
        );
        health.apply(&number("UNFLAGGED"), now);
        assert_eq!(health.holds_marketing(now), None);

        let ban = |state: &str| AccountSignal {
            detail: Some(state.into()),
            ..signal("DISABLED_UPDATE")
        };
        health.apply(&ban("DISABLE"), now);
        assert!(health.holds_marketing(now).unwrap().contains("disabled"));
        health.apply(&ban("REINSTATE"), now);
        assert_eq!(health.holds_marketing(now), None);
    }
}
