use super::*;

fn parse_text(file: &str, text: &str) -> (Option<PromptFile>, Vec<PromptProblem>) {
    let mut problems = Vec::new();
    let tools = BTreeSet::from(["search_properties".to_owned()]);
    let parsed = parse(Path::new(file), text, &tools, &mut problems);
    (parsed, problems)
}

fn lines_and_messages(problems: &[PromptProblem]) -> Vec<(usize, String)> {
    problems
        .iter()
        .map(|p| (p.line, p.message.clone()))
        .collect()
}

#[test]
fn a_well_formed_subgraph_file_parses_with_its_fields() {
    let text = "+++\nname = \"appointment_assistant\"\nkind = \"subgraph\"\n\
                delegation = \"  citas \"\nroles = [\"prospect\", \"owner\", \"prospect\"]\n\
                tools = [\"search_properties\"]\nkeywords = [\"cita\"]\n\
                offline_reply = \"Ahora no puedo.\"\n+++\nHola {{ user_name }}.\n";
    let (file, problems) = parse_text("p/appointment_assistant.md", text);
    assert_eq!(problems, []);
    let file = file.unwrap();
    assert_eq!(file.name, "appointment_assistant");
    assert_eq!(file.kind, PromptKind::Subgraph);
    assert_eq!(file.delegation.as_deref(), Some("citas"));
    assert_eq!(file.roles, [Role::Prospect, Role::Owner]);
    assert_eq!(file.tools, ["search_properties"]);
    assert_eq!(file.keywords, ["cita"]);
    assert_eq!(file.offline_reply.as_deref(), Some("Ahora no puedo."));
    assert_eq!(file.body_line, 10);
    assert_eq!(file.body, "Hola {{ user_name }}.\n");
    assert_eq!(file.key_line("roles"), 5);
}

#[test]
fn a_file_without_front_matter_is_reported_on_line_1() {
    let (file, problems) = parse_text("p/x_assistant.md", "Hola\n");
    assert!(file.is_none());
    assert_eq!(problems[0].line, 1);
    assert!(problems[0].message.contains("missing front matter"));
    let (_, problems) = parse_text("p/x_assistant.md", "+++\nname = \"x\"\nHola\n");
    assert!(problems[0].message.contains("not closed"), "{problems:?}");
}

#[test]
fn a_toml_syntax_error_is_reported_on_its_line() {
    let text = "+++\nname = \"x_assistant\"\nkind = subgraph\n+++\nHola\n";
    let (file, problems) = parse_text("p/x_assistant.md", text);
    assert!(file.is_none());
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 3, "{problems:?}");
    assert!(problems[0].message.contains("not valid TOML"));
}

#[test]
fn every_front_matter_problem_is_reported_at_its_key() {
    let text = "+++\nname = \"x_assistant\"\nkind = \"primary\"\n\
                delegation = \"nunca\"\nroles = [\"prospect\",\n  \"buyer\"]\n\
                tools = [\"search_properties\", \"teleport\"]\nmodel = \"gpt\"\n+++\nHola\n";
    let (file, problems) = parse_text("p/y_assistant.md", text);
    assert!(file.is_some());
    let found = lines_and_messages(&problems);
    let expect = [
        (8, "unknown key `model`"),
        (
            2,
            "name `x_assistant` differs from the file name `y_assistant`",
        ),
        (4, "a primary agent takes no `delegation`"),
        (6, "unknown role `buyer`"),
        (7, "unknown tool `teleport`"),
    ];
    assert_eq!(found.len(), expect.len(), "{found:?}");
    for ((line, message), (want_line, want)) in found.iter().zip(expect) {
        assert_eq!(*line, want_line, "{message}");
        assert!(message.starts_with(want), "{message} vs {want}");
    }
}

#[test]
fn a_subgraph_needs_a_non_empty_delegation_and_some_roles() {
    let text = "+++\nname = \"x_assistant\"\nkind = \"subgraph\"\n+++\nHola\n";
    let (_, problems) = parse_text("p/x_assistant.md", text);
    let found = lines_and_messages(&problems);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].1.starts_with("missing `delegation`"));
    assert!(found[1].1.starts_with("no role can reach"));

    let text = "+++\nname = \"x_assistant\"\nkind = \"subgraph\"\ndelegation = \" \"\n\
                roles = [\"owner\"]\n+++\nHola\n";
    let (_, problems) = parse_text("p/x_assistant.md", text);
    assert_eq!(lines_and_messages(&problems).len(), 1);
    assert_eq!(problems[0].line, 4);
    assert!(problems[0].message.contains("`delegation` is empty"));
}

#[test]
fn wrong_types_and_unknown_kinds_are_reported() {
    let text = "+++\nname = \"x_assistant\"\nkind = \"helper\"\nroles = \"owner\"\n+++\nHola\n";
    let (file, problems) = parse_text("p/x_assistant.md", text);
    assert!(file.is_none());
    let found = lines_and_messages(&problems);
    assert_eq!(
        found[0],
        (4, "`roles` must be a list of strings".to_owned())
    );
    assert_eq!(found[1].0, 3);
    assert!(found[1].1.starts_with("unknown kind `helper`"));
}

#[test]
fn agent_names_are_snake_case_ending_in_assistant() {
    assert!(is_agent_name("appointment_assistant"));
    assert!(is_agent_name("visit2_tracker_assistant"));
    assert!(!is_agent_name("assistant"));
    assert!(!is_agent_name("_assistant"));
    assert!(!is_agent_name("Appointment_assistant"));
    assert!(!is_agent_name("appointment__assistant"));
    assert!(!is_agent_name("appointment"));
}

#[test]
fn only_guard_translator_is_a_translator_and_it_takes_no_agent_keys() {
    let text = "+++\nname = \"guard_translator\"\nkind = \"translator\"\nroles = [\"owner\"]\n+++\nTraduce a {{ lang }}.\n";
    let (file, problems) = parse_text("p/guard_translator.md", text);
    assert_eq!(file.unwrap().kind, PromptKind::Translator);
    assert_eq!(
        lines_and_messages(&problems),
        [(
            4,
            "`roles` is not allowed on the translator prompt".to_owned()
        )]
    );

    let text = "+++\nname = \"x_assistant\"\nkind = \"translator\"\n+++\nHola\n";
    let (_, problems) = parse_text("p/x_assistant.md", text);
    assert_eq!(problems[0].line, 3);
    assert!(problems[0].message.contains("only `guard_translator`"));
}

#[test]
fn template_problems_are_reported_on_the_file_line() {
    let text = "+++\nname = \"x_assistant\"\nkind = \"primary\"\nroles = [\"owner\"]\n+++\n\
                Hola {{ user_name }}.\n\nHoy es {{ today }}.\n";
    let (file, problems) = parse_text("p/x_assistant.md", text);
    assert_eq!(problems, []);
    let mut env = Environment::new();
    let mut problems = Vec::new();
    assert!(!file.unwrap().compile(&mut env, &mut problems));
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 8);
    assert!(
        problems[0]
            .message
            .starts_with("unknown placeholder `today`")
    );

    let text = "+++\nname = \"x_assistant\"\nkind = \"primary\"\nroles = [\"owner\"]\n+++\n\
                Hola.\n{% if lang %}\nsin cerrar\n";
    let (file, _) = parse_text("p/x_assistant.md", text);
    let mut problems = Vec::new();
    assert!(!file.unwrap().compile(&mut env, &mut problems));
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].message.starts_with("template syntax error"),
        "{problems:?}"
    );
    assert!((7..=9).contains(&problems[0].line), "{problems:?}");
}

#[test]
fn the_translator_may_not_use_agent_placeholders() {
    let text = "+++\nname = \"guard_translator\"\nkind = \"translator\"\n+++\n\
                Traduce a {{ lang }} para {{ business_name }} y {{ user_name }}.\n";
    let (file, _) = parse_text("p/guard_translator.md", text);
    let mut problems = Vec::new();
    file.unwrap()
        .compile(&mut Environment::new(), &mut problems);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 5);
    assert!(
        problems[0]
            .message
            .starts_with("unknown placeholder `user_name`")
    );
}

#[test]
fn an_empty_body_is_reported_at_the_closing_fence() {
    let text = "+++\nname = \"x_assistant\"\nkind = \"primary\"\nroles = [\"owner\"]\n+++\n\n  \n";
    let (file, _) = parse_text("p/x_assistant.md", text);
    let mut problems = Vec::new();
    assert!(
        !file
            .unwrap()
            .compile(&mut Environment::new(), &mut problems)
    );
    assert_eq!(
        lines_and_messages(&problems),
        [(
            5,
            "empty body: write the system prompt after the closing `+++`".to_owned()
        )]
    );
}

#[test]
fn words_are_found_on_their_line_and_not_inside_other_words() {
    assert_eq!(line_of_word("a\nmy_lang\n{{ lang }}", "lang"), 2);
    assert_eq!(line_of_word("nothing", "lang"), 0);
}
