use super::*;

/// A fresh folder holding `files` (name, text).
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn primary(name: &str, roles: &str) -> String {
    format!("+++\nname = \"{name}\"\nkind = \"primary\"\nroles = {roles}\n+++\nEres {name}.\n")
}

fn subgraph(name: &str, roles: &str) -> String {
    format!(
        "+++\nname = \"{name}\"\nkind = \"subgraph\"\ndelegation = \"Delegar en {name}.\"\n\
         roles = {roles}\n+++\nEres {name}.\n"
    )
}

/// A valid folder: two primaries, two subgraphs.
fn minimal() -> Vec<(String, String)> {
    vec![
        (
            "primary_assistant.md".into(),
            primary("primary_assistant", r#"["prospect", "agent"]"#),
        ),
        (
            "only_owner_assistant.md".into(),
            primary("only_owner_assistant", r#"["owner"]"#),
        ),
        (
            "appointment_assistant.md".into(),
            subgraph("appointment_assistant", r#"["prospect", "owner", "agent"]"#),
        ),
        (
            "owner_info_assistant.md".into(),
            subgraph("owner_info_assistant", r#"["owner", "agent"]"#),
        ),
    ]
}

fn load(
    files: &[(String, String)],
) -> (tempfile::TempDir, Result<AgentRegistry, Vec<PromptProblem>>) {
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_str()))
        .collect();
    let dir = folder(&borrowed);
    let loaded = AgentRegistry::load(dir.path(), &BTreeSet::new());
    (dir, loaded)
}

fn problems_of(files: &[(String, String)]) -> Vec<(String, usize, String)> {
    let (_dir, loaded) = load(files);
    loaded
        .expect_err("the folder should have problems")
        .into_iter()
        .map(|p| {
            let file = p.file.file_name().unwrap().to_string_lossy().into_owned();
            (file, p.line, p.message)
        })
        .collect()
}

fn tool_names(tools: &[ToolSpec]) -> Vec<&str> {
    tools.iter().map(|tool| tool.name.as_str()).collect()
}

fn shipped() -> AgentRegistry {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    AgentRegistry::load(&dir, &crate::startup::known_tools()).unwrap_or_else(|problems| {
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        panic!("{}", text.join("\n"))
    })
}

#[test]
fn the_shipped_prompts_folder_loads_without_problems() {
    let registry = shipped();
    let names: Vec<&str> = registry.agents().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "appointment_assistant",
            "mortgage_loan_assistant",
            "only_owner_assistant",
            "owner_info_assistant",
            "primary_assistant",
            "property_assistant",
            "prospect_offer_assistant",
            "searcher_assistant",
            "visit_tracker_assistant",
        ]
    );
    assert_eq!(
        registry.primary_for(Role::Prospect).name,
        "primary_assistant"
    );
    assert_eq!(registry.primary_for(Role::Agent).name, "primary_assistant");
    assert_eq!(
        registry.primary_for(Role::Owner).name,
        "only_owner_assistant"
    );
    assert!(registry.translator_prompt().is_some());
    // The demo agency's business file, complete.
    let business = registry.business();
    assert_eq!(business.name.as_deref(), Some("Zaguan Inmobiliaria"));
    assert!(business.hours.is_some() && !business.holidays.is_empty());
    assert_eq!((business.offices.len(), business.zones.len()), (4, 4));
    assert!(
        ["deposit", "fees", "visit_documents"]
            .iter()
            .all(|topic| business.policies.contains_key(*topic))
    );
    // Primary agents delegate (or ask for a person, read the agency's facts, record an
    // opt-out); every subgraph has domain tools.
    for agent in registry.agents() {
        if agent.kind == AgentKind::Primary {
            assert_eq!(
                agent.tools,
                ["request_human", "business_info", "record_opt_out"],
                "{}",
                agent.name
            );
        } else {
            assert!(!agent.tools.is_empty(), "{}", agent.name);
        }
    }
}

#[test]
fn every_shipped_prompt_renders_with_its_placeholders_filled() {
    let registry = shipped();
    let context = PromptContext {
        user_name: Some("Lucía".into()),
        user_role: Role::Prospect,
        user_info: "Busca piso en Valencia.".into(),
        lang: "es".into(),
        now: "martes 3 de marzo de 2026, 10:15".into(),
        business_name: "Inmobiliaria Zaguán".into(),
        business_contact: String::new(),
    };
    for agent in registry.agents() {
        let prompt = registry.render_system_prompt(agent, &context).unwrap();
        assert!(
            !prompt.contains("{{") && !prompt.contains("{%"),
            "{}",
            agent.name
        );
        assert!(
            prompt.contains("Inmobiliaria Zaguán"),
            "{} names the business",
            agent.name
        );
    }
    let translator = registry
        .translator_prompt()
        .unwrap()
        .render("en", "Inmobiliaria Zaguán")
        .unwrap();
    assert!(translator.contains("en"));
}

#[test]
fn shipped_subgraphs_are_reached_by_the_roles_the_design_says() {
    let registry = shipped();
    let roles = |name: &str| registry.get(name).unwrap().roles.clone();
    assert_eq!(roles("owner_info_assistant"), [Role::Owner, Role::Agent]);
    assert_eq!(
        roles("prospect_offer_assistant"),
        [Role::Prospect, Role::Agent]
    );
    for agent in registry.agents().filter(|a| a.kind == AgentKind::Subgraph) {
        assert!(agent.delegation.as_deref().is_some_and(|d| !d.is_empty()));
    }
}

#[test]
fn a_minimal_folder_loads_and_ignores_readme_and_other_files() {
    let mut files = minimal();
    files.push(("README.md".into(), "# not a prompt".into()));
    files.push(("notes.txt".into(), "not a prompt".into()));
    files.push((
        "guard_translator.md".into(),
        "+++\nname = \"guard_translator\"\nkind = \"translator\"\n+++\nTraduce a {{ lang }}.\n"
            .into(),
    ));
    let (_dir, loaded) = load(&files);
    let registry = loaded.unwrap();
    assert_eq!(registry.agents().count(), 4);
    assert!(registry.get("guard_translator").is_none());
    assert_eq!(
        registry
            .translator_prompt()
            .unwrap()
            .render("fr", "Z")
            .unwrap(),
        "Traduce a fr."
    );
    assert_eq!(
        registry.get("appointment_assistant").unwrap().kind,
        AgentKind::Subgraph
    );
    assert!(registry.get("nobody_assistant").is_none());
}

#[test]
fn a_folder_without_translator_has_no_translator_prompt() {
    let (_dir, loaded) = load(&minimal());
    assert!(loaded.unwrap().translator_prompt().is_none());
}

#[test]
fn delegation_tool_names_are_pascal_case_between_to_and_assistant() {
    assert_eq!(
        AgentRegistry::delegation_tool_name("appointment_assistant"),
        "ToAppointmentAssistant"
    );
    assert_eq!(
        AgentRegistry::delegation_tool_name("visit_tracker_assistant"),
        "ToVisitTrackerAssistant"
    );
    assert_eq!(
        AgentRegistry::delegation_tool_name("mortgage_loan_assistant"),
        "ToMortgageLoanAssistant"
    );
}

#[test]
fn an_agent_never_gets_its_own_delegation_tool() {
    let (_dir, loaded) = load(&minimal());
    let registry = loaded.unwrap();
    let appointment = registry.get("appointment_assistant").unwrap();
    let tools = registry.delegation_tools(appointment, Role::Agent);
    assert_eq!(tool_names(&tools), ["ToOwnerInfoAssistant"]);
    let primary = registry.primary_for(Role::Agent);
    let tools = registry.delegation_tools(primary, Role::Agent);
    assert_eq!(
        tool_names(&tools),
        ["ToAppointmentAssistant", "ToOwnerInfoAssistant"]
    );
}

#[test]
fn a_prospect_is_not_offered_the_owner_info_assistant() {
    let registry = shipped();
    let primary = registry.primary_for(Role::Prospect);
    let names = tool_names(&registry.delegation_tools(primary, Role::Prospect)).join(",");
    assert!(!names.contains("ToOwnerInfoAssistant"), "{names}");
    assert!(names.contains("ToAppointmentAssistant"), "{names}");
    assert!(names.contains("ToProspectOfferAssistant"), "{names}");
    let owner_primary = registry.primary_for(Role::Owner);
    let names = tool_names(&registry.delegation_tools(owner_primary, Role::Owner)).join(",");
    assert!(names.contains("ToOwnerInfoAssistant"), "{names}");
    assert!(!names.contains("ToProspectOfferAssistant"), "{names}");
}

#[test]
fn delegation_tools_carry_the_delegation_text_and_a_query_argument() {
    let (_dir, loaded) = load(&minimal());
    let registry = loaded.unwrap();
    let tools = registry.delegation_tools(registry.primary_for(Role::Owner), Role::Owner);
    let tool = &tools[0];
    assert_eq!(tool.name, "ToAppointmentAssistant");
    assert_eq!(tool.description, "Delegar en appointment_assistant.");
    assert_eq!(tool.parameters["type"], "object");
    assert_eq!(tool.parameters["properties"]["query"]["type"], "string");
    assert_eq!(tool.parameters["required"], json!(["query"]));
}

#[test]
fn delegation_targets_are_found_by_tool_name_for_subgraphs_only() {
    let (_dir, loaded) = load(&minimal());
    let registry = loaded.unwrap();
    let target = registry.delegation_target("ToOwnerInfoAssistant").unwrap();
    assert_eq!(target.name, "owner_info_assistant");
    assert!(registry.delegation_target("ToPrimaryAssistant").is_none());
    assert!(registry.delegation_target("CompleteOrEscalate").is_none());
}

#[test]
fn complete_or_escalate_has_cancel_defaulting_to_true_and_a_required_reason() {
    let spec = AgentRegistry::complete_or_escalate();
    assert_eq!(spec.name, COMPLETE_OR_ESCALATE);
    assert_eq!(spec.parameters["properties"]["cancel"]["type"], "boolean");
    assert_eq!(spec.parameters["properties"]["cancel"]["default"], true);
    assert_eq!(spec.parameters["properties"]["reason"]["type"], "string");
    assert_eq!(spec.parameters["required"], json!(["reason"]));
}

#[test]
fn rendering_fills_every_placeholder() {
    let mut files = minimal();
    files[0].1 = "+++\nname = \"primary_assistant\"\nkind = \"primary\"\nroles = [\"prospect\", \"agent\"]\n+++\n\
                  {{ business_name }}: hola{% if user_name %} {{ user_name }}{% endif %} ({{ user_role }}, {{ lang }}).\n\
                  Ahora: {{ now }}.\n{{ user_info }}\n"
        .into();
    let (_dir, loaded) = load(&files);
    let registry = loaded.unwrap();
    let mut context = PromptContext {
        user_name: Some("Ana".into()),
        user_role: Role::Agent,
        user_info: "Agente de la oficina centro.".into(),
        lang: "es".into(),
        now: "2026-03-03 10:15".into(),
        business_name: "Zaguán".into(),
        business_contact: String::new(),
    };
    let agent = registry.get("primary_assistant").unwrap();
    assert_eq!(
        registry.render_system_prompt(agent, &context).unwrap(),
        "Zaguán: hola Ana (agent, es).\nAhora: 2026-03-03 10:15.\nAgente de la oficina centro."
    );
    context.user_name = None;
    let rendered = registry.render_system_prompt(agent, &context).unwrap();
    assert!(
        rendered.starts_with("Zaguán: hola (agent, es)."),
        "{rendered}"
    );
}

#[test]
fn an_unreadable_folder_is_one_problem() {
    let missing = std::env::temp_dir().join("zaguan-no-such-prompts-folder");
    let problems = AgentRegistry::load(&missing, &BTreeSet::new()).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].file, missing);
    assert!(
        problems[0]
            .message
            .starts_with("cannot read the prompts folder")
    );
}

#[test]
fn a_role_without_primary_agent_is_reported_on_the_folder() {
    let files: Vec<_> = minimal()
        .into_iter()
        .filter(|(name, _)| name != "only_owner_assistant.md")
        .collect();
    let (dir, loaded) = load(&files);
    let problems = loaded.unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].file, dir.path());
    assert_eq!(problems[0].line, 1);
    assert!(
        problems[0]
            .message
            .starts_with("no primary agent serves role `owner`")
    );
}

#[test]
fn a_role_with_two_primary_agents_is_reported_at_the_roles_line() {
    let mut files = minimal();
    files.push((
        "zeta_assistant.md".into(),
        primary("zeta_assistant", r#"["owner"]"#),
    ));
    assert_eq!(
        problems_of(&files),
        [(
            "zeta_assistant.md".to_owned(),
            4,
            "role `owner` has two primary agents: `only_owner_assistant` and `zeta_assistant`"
                .to_owned()
        )]
    );
}

#[test]
fn a_duplicate_name_is_reported_at_the_name_line() {
    let mut files = minimal();
    files.push((
        "copy_assistant.md".into(),
        subgraph("appointment_assistant", r#"["owner"]"#),
    ));
    let problems = problems_of(&files);
    assert_eq!(problems.len(), 2, "{problems:?}");
    for (file, line, _) in &problems {
        assert_eq!((file.as_str(), *line), ("copy_assistant.md", 2));
    }
    assert!(
        problems
            .iter()
            .any(|(_, _, m)| m.starts_with("name `appointment_assistant` differs"))
    );
    assert!(
        problems
            .iter()
            .any(|(_, _, m)| m.starts_with("duplicate name `appointment_assistant` (also in"))
    );
}

#[test]
fn unknown_tools_are_problems_and_known_ones_are_kept() {
    let mut files = minimal();
    files[2].1 = files[2]
        .1
        .replace("+++\nEres", "tools = [\"book_visit\", \"fly\"]\n+++\nEres");
    let (dir, loaded) = load(&files);
    let problems = loaded.unwrap_err();
    assert_eq!(problems.len(), 2);
    assert!(
        problems[0]
            .to_string()
            .ends_with("appointment_assistant.md:6: unknown tool `book_visit`"),
        "{}",
        problems[0]
    );

    let known = BTreeSet::from(["book_visit".to_owned(), "fly".to_owned()]);
    let registry = AgentRegistry::load(dir.path(), &known).unwrap();
    assert_eq!(
        registry.get("appointment_assistant").unwrap().tools,
        ["book_visit", "fly"]
    );
}

#[test]
fn problems_of_several_files_are_all_reported_sorted_by_file_and_line() {
    let mut files = minimal();
    files[2].1 = files[2].1.replace(
        "kind = \"subgraph\"",
        "kind = \"subgraph\"\ncolour = \"red\"",
    );
    files[3].1 = files[3].1.replace("Eres", "Eres {{ nombre }}");
    files.push(("broken_assistant.md".into(), "no front matter".into()));
    let problems = problems_of(&files);
    let summary: Vec<(&str, usize)> = problems.iter().map(|(f, l, _)| (f.as_str(), *l)).collect();
    assert_eq!(
        summary,
        [
            ("appointment_assistant.md", 4),
            ("broken_assistant.md", 1),
            ("owner_info_assistant.md", 7)
        ],
        "{problems:?}"
    );
}

#[test]
fn problems_display_as_file_colon_line_colon_message() {
    let problem = PromptProblem::new("prompts/x.md", 3, "unknown key `model`");
    assert_eq!(problem.to_string(), "prompts/x.md:3: unknown key `model`");
}
