//! The outbound channel: replies leave the `outbox` through the Graph API, in order per
//! conversation, within Meta's limits, retried with backoff, each part sent once.

pub mod graph;
pub mod limits;
pub mod sender;

pub use graph::{GraphClient, OutboundMessage, SendError};
pub use limits::{Limiters, SendLimits};
pub use sender::{Flushed, Outbound, OutboundSettings};
