//! The assistants of the graph (`docs/prompts.md`): one prompt file each in the prompts folder,
//! read once at start-up into an [`AgentRegistry`] that tells the engine who the primary agent of
//! a role is, which `To<X>Assistant` delegation tools an agent is offered, and what its system
//! prompt says.

pub mod fast_route;
pub mod keywords;
pub mod leakage;
pub mod prompt;
pub mod registry;
pub mod route_eval;

pub use prompt::PromptProblem;
pub use registry::{
    Agent, AgentKind, AgentRegistry, Asking, COMPLETE_OR_ESCALATE, FastRouteReport, PromptContext,
    TranslatorPrompt,
};
