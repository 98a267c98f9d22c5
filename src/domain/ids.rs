//! The ids everything is keyed by. Raw webhook JSON becomes these exactly once, in
//! `webhook::payload`; past that edge nothing handles a bare `String` phone number or message id.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The conversation key: the sender's phone number (`wa_id`), or their business-scoped user id
/// (`user_id`, e.g. `US.13491208655302741918`) when WhatsApp withholds the number.
///
/// Shared text (`Arc<str>`), as is [`WaMessageId`]'s: an id is copied into every index, queue
/// and record of its conversation or message, and each copy was an allocation of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WaId(Arc<str>);

impl WaId {
    /// Accepts what WhatsApp sends as a sender: non-empty, printable, at most 256 bytes.
    pub fn parse(raw: &str) -> Result<Self, String> {
        check_id("sender id", raw).map(|()| Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// For logs at info level: never a full phone number, only its last four characters.
    pub fn masked(&self) -> String {
        let tail: String = {
            let chars: Vec<char> = self.0.chars().collect();
            chars[chars.len().saturating_sub(4)..].iter().collect()
        };
        format!("…{tail}")
    }
}

impl fmt::Display for WaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A WhatsApp message id (`wamid.…`), inbound or returned by the Graph API for an outbound one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WaMessageId(Arc<str>);

impl WaMessageId {
    pub fn parse(raw: &str) -> Result<Self, String> {
        check_id("message id", raw).map(|()| Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for WaMessageId {
    /// Ids the Graph API hands back to us; no need to validate our own supplier's ids.
    fn from(raw: String) -> Self {
        Self(raw.into())
    }
}

impl fmt::Display for WaMessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn check_id(what: &str, raw: &str) -> Result<(), String> {
    if raw.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if raw.len() > 256 {
        return Err(format!("{what} is longer than 256 bytes"));
    }
    if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("{what} contains whitespace or control characters"));
    }
    Ok(())
}

/// An `outbox` id (a MongoDB ObjectId in hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutboxId(pub String);

impl OutboxId {
    /// The id of part `part` of the reply to the inbound message `in_reply_to`, the same every
    /// time it is computed: queuing a reply again (a turn resumed after a crash) runs into the
    /// first copy's `_id` instead of queuing a second one. An ObjectId still — its first four
    /// bytes are the inbound message's arrival second, so ids sort by time as usual — whose
    /// other eight are a hash of the inbound id and the part.
    pub fn for_reply(in_reply_to: &WaMessageId, received_at: DateTime<Utc>, part: u32) -> Self {
        use sha2::{Digest, Sha256};
        let mut bytes = [0u8; 12];
        let seconds = u32::try_from(received_at.timestamp().max(0)).unwrap_or(u32::MAX);
        bytes[..4].copy_from_slice(&seconds.to_be_bytes());
        let digest = Sha256::new()
            .chain_update(in_reply_to.as_str().as_bytes())
            .chain_update(part.to_be_bytes())
            .finalize();
        bytes[4..].copy_from_slice(&digest[..8]);
        Self(hex::encode(bytes))
    }
}

impl OutboxId {
    /// The id of a message queued by a step that may be replayed (a staff notice, a reminder),
    /// the same for the same `key`: the replay runs into the first copy. Like
    /// [`OutboxId::for_reply`], its first four bytes are `at`'s second — a time the step is
    /// about (a request's, a visit's), never the clock's: a replay a second later, or a second
    /// instance, must compute the same id.
    pub fn derived(key: &str, at: DateTime<Utc>) -> Self {
        use sha2::{Digest, Sha256};
        let mut bytes = [0u8; 12];
        let seconds = u32::try_from(at.timestamp().max(0)).unwrap_or(u32::MAX);
        bytes[..4].copy_from_slice(&seconds.to_be_bytes());
        let digest = Sha256::new()
            .chain_update(b"derived:")
            .chain_update(key.as_bytes())
            .finalize();
        bytes[4..].copy_from_slice(&digest[..8]);
        Self(hex::encode(bytes))
    }
}

impl OutboxId {
    /// The id of part `part` of a notice of the service's own (the «slow down») prompted by
    /// the inbound message `via`: distinct from the reply's parts to the same message.
    pub fn for_notice(via: &WaMessageId, received_at: DateTime<Utc>, part: u32) -> Self {
        Self::derived(&format!("notice:{}:{part}", via.as_str()), received_at)
    }
}

/// What a sent part carries in `biz_opaque_callback_data`, before its id: Meta echoes it in
/// the part's status webhooks, which then find the part even when its wamid was never
/// recorded (the process died between the Graph API's answer and the record).
const CALLBACK_PREFIX: &str = "zaguan:outbox:";

impl OutboxId {
    /// The `biz_opaque_callback_data` a part is sent with.
    pub fn callback_data(&self) -> String {
        format!("{CALLBACK_PREFIX}{}", self.0)
    }

    /// The part a status webhook's `biz_opaque_callback_data` names, if it names one of ours.
    pub fn from_callback_data(data: &str) -> Option<Self> {
        let hex = data.strip_prefix(CALLBACK_PREFIX)?;
        (hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Self(hex.to_ascii_lowercase()))
    }
}
