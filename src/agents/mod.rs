//! The assistants of the graph (ARCHITECTURE.md §6): one prompt file each in the prompts folder,
//! read once at start-up into an [`AgentRegistry`] that tells the engine who the primary agent of
//! a role is, which `To<X>Assistant` delegation tools an agent is offered, and what its system
//! prompt says.

pub mod fast_route;
pub mod keywords;
pub mod prompt;
pub mod registry;
pub mod route_eval;

use std::collections::BTreeSet;

pub use prompt::PromptProblem;
pub use registry::{
    Agent, AgentKind, AgentRegistry, COMPLETE_OR_ESCALATE, FastRouteReport, PromptContext,
    TranslatorPrompt,
};

/// The domain tools a prompt may list in `tools`; the engine and `zaguan prompts check` both
/// ask here, so they agree on what is valid.
pub fn known_tools() -> BTreeSet<String> {
    crate::realestate::tools::TOOL_NAMES
        .iter()
        .chain([
            &crate::engine::handoff::REQUEST_HUMAN,
            &crate::realestate::tools::REQUEST_CALLBACK,
            &crate::realestate::tools::REQUEST_LISTING_CHANGE,
        ])
        .map(|name| (*name).to_owned())
        .collect()
}
