//! The conversation engine: the seed's graph as explicit Rust. A worker claims a conversation,
//! `context_extractor` loads its state, `route_to_workflow` picks the node from the persisted
//! `dialog_state`, assistants run (delegating with `To<X>Assistant`, returning with
//! `CompleteOrEscalate`), and every node's effect is stored before the next one runs.

pub mod abuse;
pub mod attachments;
pub mod concurrency;
pub mod confirm;
pub mod consent;
pub mod context;
pub mod handoff;
pub mod history;
pub mod instances;
pub mod monitor;
pub mod offline;
pub mod reload;
pub mod retention;
pub mod roles;
pub mod route;
pub mod state;
pub mod tools;
pub mod turn;
pub mod usage;
pub mod worker;

pub use abuse::UserLimits;
pub use reload::{PromptReloader, PromptStatus, Reloaded};
pub use route::{Route, RouteFallback, route_to_workflow};
pub use state::{State, context_extractor, context_for};
pub use tools::{ALL_ROLES, NoArgs, Tool, ToolContext, ToolError, ToolRegistry, TypedTool};
pub use turn::{
    DEFAULT_BUSINESS_NAME, Engine, EngineError, EngineSettings, Notified, TurnOptions, TurnOutcome,
    default_templates, default_templates_in,
};
pub use usage::UsageRecorder;
pub use worker::{Arrivals, WorkerSettings, Workers};
