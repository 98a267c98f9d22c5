//! `route_to_workflow`: which assistant handles the next step, decided from the persisted
//! `dialog_state` and the user's role alone. Deterministic — no LLM — so what an operator sees
//! in MongoDB is exactly where the next message goes.

use crate::agents::{Agent, AgentKind, AgentRegistry};
use crate::domain::Role;
use crate::domain::{AgentName, DialogState};

/// Why routing did not follow `dialog_state` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteFallback {
    /// The state names no agent we have (a prompt file removed or renamed).
    UnknownAgent(AgentName),
    /// The state names a primary agent, which is never a subgraph.
    NotASubgraph(AgentName),
    /// The agent exists but this user's role may not reach it (the role changed).
    NotForRole(AgentName),
}

/// The node that runs, and why it differs from `dialog_state` when it does.
#[derive(Debug, Clone, Copy)]
pub struct Route<'r> {
    pub agent: &'r Agent,
    /// `true` for a subgraph agent named by `dialog_state`.
    pub in_subgraph: bool,
}

/// `[]` → the role's primary agent (`primary_assistant`, or `only_owner_assistant` for owners);
/// `["x"]` → subgraph `x`. Anything unusable → the primary agent, with the reason.
pub fn route_to_workflow<'r>(
    dialog_state: &DialogState,
    role: Role,
    registry: &'r AgentRegistry,
) -> (Route<'r>, Option<RouteFallback>) {
    let primary = Route {
        agent: registry.primary_for(role),
        in_subgraph: false,
    };
    let Some(name) = dialog_state.current() else {
        return (primary, None);
    };
    match registry.get(name) {
        None => (primary, Some(RouteFallback::UnknownAgent(name.into()))),
        Some(agent) if agent.kind != AgentKind::Subgraph => {
            (primary, Some(RouteFallback::NotASubgraph(name.into())))
        }
        Some(agent) if !agent.roles.contains(&role) => {
            (primary, Some(RouteFallback::NotForRole(name.into())))
        }
        Some(agent) => (
            Route {
                agent,
                in_subgraph: true,
            },
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn registry() -> AgentRegistry {
        AgentRegistry::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts"),
            &crate::startup::known_tools(),
        )
        .expect("shipped prompts load")
    }

    fn state(names: &[&str]) -> DialogState {
        DialogState::from_list(names.iter().map(|n| (*n).to_owned()).collect()).0
    }

    #[test]
    fn an_empty_state_goes_to_the_primary_agent_of_the_role() {
        let registry = registry();
        for (role, expected) in [
            (Role::Prospect, "primary_assistant"),
            (Role::Agent, "primary_assistant"),
            (Role::Owner, "only_owner_assistant"),
        ] {
            let (route, fallback) = route_to_workflow(&DialogState::primary(), role, &registry);
            assert_eq!(route.agent.name, expected);
            assert!(!route.in_subgraph);
            assert_eq!(fallback, None);
        }
    }

    #[test]
    fn every_subgraph_in_the_state_is_routed_to_for_every_role_that_reaches_it() {
        let registry = registry();
        let mut routed = 0;
        for agent in registry.agents().filter(|a| a.kind == AgentKind::Subgraph) {
            for role in [Role::Prospect, Role::Owner, Role::Agent] {
                let (route, fallback) = route_to_workflow(&state(&[&agent.name]), role, &registry);
                if agent.roles.contains(&role) {
                    assert_eq!(route.agent.name, agent.name);
                    assert!(route.in_subgraph);
                    assert_eq!(fallback, None);
                    routed += 1;
                } else {
                    assert_eq!(route.agent.name, registry.primary_for(role).name);
                    assert_eq!(
                        fallback,
                        Some(RouteFallback::NotForRole(agent.name.clone()))
                    );
                }
            }
        }
        assert!(routed >= 7, "every subgraph reachable by someone");
    }

    #[test]
    fn an_unknown_agent_goes_to_the_primary_agent_with_a_reason() {
        let registry = registry();
        let (route, fallback) =
            route_to_workflow(&state(&["removed_assistant"]), Role::Prospect, &registry);
        assert_eq!(route.agent.name, "primary_assistant");
        assert_eq!(
            fallback,
            Some(RouteFallback::UnknownAgent("removed_assistant".into()))
        );
    }

    #[test]
    fn a_primary_agent_in_the_state_is_not_a_subgraph() {
        let registry = registry();
        let (route, fallback) =
            route_to_workflow(&state(&["only_owner_assistant"]), Role::Owner, &registry);
        assert_eq!(route.agent.name, "only_owner_assistant");
        assert!(!route.in_subgraph);
        assert_eq!(
            fallback,
            Some(RouteFallback::NotASubgraph("only_owner_assistant".into()))
        );
    }

    #[test]
    fn of_several_agents_stored_by_hand_the_last_one_is_followed() {
        let registry = registry();
        let (dialog_state, several) = DialogState::from_list(vec![
            "property_assistant".into(),
            "appointment_assistant".into(),
        ]);
        assert_eq!(several, Some(2));
        let (route, fallback) = route_to_workflow(&dialog_state, Role::Prospect, &registry);
        assert_eq!(route.agent.name, "appointment_assistant");
        assert_eq!(fallback, None);
    }
}
