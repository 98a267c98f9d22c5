//! The vocabulary floor: the types every layer speaks — ids, a message as received, a
//! conversation's state, a place, an LLM call. It imports nothing from the crate; everything
//! else imports downward from it.

mod account_health;
mod business_event;
mod clock;
mod conversation;
mod geo;
mod ids;
pub mod llm_call;
mod message;
pub mod phone;
pub mod phrases;
mod situation;

pub use account_health::{AccountHealth, AccountSignal, Restriction};
pub use business_event::BusinessEvent;
pub use clock::{Clock, ManualClock, SystemClock};
pub use conversation::{
    AgentName, DialogState, Handoff, MessageRole, PORTAL_AGENT, PendingAction, Role,
};
pub use geo::GeoPoint;
pub use ids::{OutboxId, WaId, WaMessageId};
pub use llm_call::{CallOutcome, LlmCall, ToolCall};
pub use message::{
    Content, GraphError, InboundMessage, MediaKind, Pricing, Referral, ReplyContext, StatusUpdate,
};
pub use situation::{Situation, SituationNeed};
