//! The outbound channel: replies leave the `outbox` through the Graph API, in order per
//! conversation, within Meta's limits, retried with backoff, each part sent once.

pub mod bundle;
pub mod failures;
pub mod governor;
pub mod graph;
pub mod limits;
pub mod sender;

pub use graph::{AccountTemplate, GraphClient, OutboundMessage, SendError};
pub use limits::{Limiters, SendLimits};
pub use sender::{Flushed, Outbound, OutboundSettings, outbound_message};

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

/// Where and how replies leave: the Graph API's address, token and timeout, and Meta's limits.
#[derive(Debug, Clone)]
pub struct GraphSettings {
    /// Graph API bearer token; `None` means dry run (replies only logged).
    pub access_token: Option<SecretString>,
    pub api_base_url: Url,
    /// Longest one Graph API call may take before it is retried.
    pub api_timeout: Duration,
    /// Meta's throughput and pair rate limits, kept on our side.
    pub limits: SendLimits,
    /// The WhatsApp Business Account (`WHATSAPP_BUSINESS_ACCOUNT_ID`): where `zaguan templates
    /// check` reads the account's templates.
    pub business_account_id: Option<String>,
}
