//! The conversation engine: the seed's graph as explicit Rust. A worker claims a conversation,
//! `context_extractor` loads its state, `route_to_workflow` picks the node from the persisted
//! `dialog_state`, assistants run (delegating with `To<X>Assistant`, returning with
//! `CompleteOrEscalate`), and every node's effect is stored before the next one runs.

pub mod abuse;
pub mod attachments;
pub mod consent;
pub mod context_extractor;
pub mod handoff;
pub mod history;
pub mod offline;
pub mod pending;
pub mod presses;
pub mod roles;
pub mod route;
pub mod tools;
pub mod turn;
pub mod user_info;

pub use abuse::UserLimits;
pub use context_extractor::{State, context_extractor, context_for};
pub use route::{Route, RouteFallback, route_to_workflow};
pub use tools::{ALL_ROLES, NoArgs, Tool, ToolContext, ToolError, ToolRegistry, TypedTool};
pub use turn::{
    DEFAULT_BUSINESS_NAME, Engine, EngineError, EngineSettings, Notified, Outreach, TurnOptions,
    TurnOutcome, default_templates, default_templates_in,
};
