//! `zaguan prompts check` through the real binary: exit status and `file:line: message` output.

use std::path::Path;
use std::process::{Command, Output};

fn prompts_check(dir: Option<&Path>, env_dir: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zaguan"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["prompts", "check"]);
    if let Some(dir) = dir {
        command.arg(dir);
    }
    if let Some(dir) = env_dir {
        command.env("ZAGUAN_PROMPTS_DIR", dir);
    }
    command.output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A folder with one good primary agent for every role and two broken files.
fn broken_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "primary_assistant.md",
        "+++\nname = \"primary_assistant\"\nkind = \"primary\"\n\
         roles = [\"prospect\", \"owner\", \"agent\"]\n+++\nHola {{ user_name }}.\n",
    );
    write(
        "appointment_assistant.md",
        "+++\nname = \"appointment_assistant\"\nkind = \"subgraph\"\n\
         roles = [\"prospect\"]\nmodel = \"gpt\"\n+++\nCitas.\n",
    );
    write(
        "searcher_assistant.md",
        "+++\nname = \"searcher_assistant\"\nkind = \"subgraph\"\ndelegation = \"Buscar.\"\n\
         roles = [\"prospect\"]\n+++\nBusca.\n\nHoy: {{ today }}\n",
    );
    dir
}

#[test]
fn the_shipped_prompts_folder_passes_the_check() {
    let output = prompts_check(Some(Path::new("prompts")), None);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(
        !text.contains("warning:"),
        "the shipped prompts promise nothing unkept: {text}"
    );
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("9 agents OK"));
    let fast_path = lines.next().unwrap_or_default();
    assert!(
        fast_path.starts_with("fast path: ") && fast_path.contains(" example phrases ("),
        "{text}"
    );
}

#[test]
fn an_example_taught_as_two_agents_is_a_problem() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "primary_assistant.md",
        "+++\nname = \"primary_assistant\"\nkind = \"primary\"\n\
         roles = [\"prospect\", \"owner\", \"agent\"]\nexamples = [\"hola\"]\n+++\nHola.\n",
    );
    write(
        "appointment_assistant.md",
        "+++\nname = \"appointment_assistant\"\nkind = \"subgraph\"\ndelegation = \"Citas.\"\n\
         roles = [\"prospect\"]\nkeywords = [\"cita\"]\n\
         examples = [\"Quiero una cita\", \"¿Y la cuota?\"]\n+++\nCitas.\n",
    );
    write(
        "mortgage_loan_assistant.md",
        "+++\nname = \"mortgage_loan_assistant\"\nkind = \"subgraph\"\ndelegation = \"Hipotecas.\"\n\
         roles = [\"prospect\"]\nkeywords = [\"cuota\"]\n\
         examples = [\"¿Qué hipoteca me dais?\", \"¿y la CUOTA?\"]\n+++\nHipotecas.\n",
    );
    let output = prompts_check(Some(dir.path()), None);
    assert!(!output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(
        text.contains(
            "mortgage_loan_assistant.md:7: example «¿y la CUOTA?» is also an example of \
             `appointment_assistant`"
        ),
        "{text}"
    );
    assert!(!text.contains("hipoteca me dais"), "{text}");
}

/// A body that names a tool its agent does not have would promise what the assistant cannot
/// do: the set loads, and `check` warns with the line.
#[test]
fn a_body_naming_a_tool_its_agent_lacks_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "primary_assistant.md",
        "+++\nname = \"primary_assistant\"\nkind = \"primary\"\n\
         roles = [\"prospect\", \"owner\", \"agent\"]\ntools = [\"request_human\"]\n+++\n\
         Hola.\nSi lo piden, usa request_human.\nReserva con book_appointment.\n\
         Nada de book_appointments_x.\n",
    );
    let output = prompts_check(Some(dir.path()), None);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{text}");
    assert!(
        warnings.iter().any(|w| w.ends_with(
            "primary_assistant.md:9: the body names `book_appointment`, which is not in `tools`: \
             add it there, or do not promise what it does"
        )),
        "{text}"
    );
    // No business file: the office would count as open at all hours, and that is said.
    assert!(
        warnings.iter().any(|w| w.ends_with(
            "business.toml:1: is missing: the office counts as always open, so staff are told \
             of handoffs at any hour, nights and holidays included; give the agency's opening \
             hours in [hours]"
        )),
        "{text}"
    );
}

#[test]
fn the_folder_defaults_to_zaguan_prompts_dir_then_prompts() {
    let output = prompts_check(None, None);
    assert!(output.status.success(), "{output:?}");

    let dir = broken_folder();
    let output = prompts_check(None, Some(dir.path()));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

#[test]
fn a_broken_folder_fails_with_every_problem_as_file_line_message() {
    let dir = broken_folder();
    let output = prompts_check(Some(dir.path()), None);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    let at = |file: &str, line: usize| format!("{}:{line}: ", dir.path().join(file).display());
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with(&at("appointment_assistant.md", 1)),
        "{text}"
    );
    assert!(lines[0].contains("missing `delegation`"), "{text}");
    assert!(
        lines[1].starts_with(&at("appointment_assistant.md", 5)),
        "{text}"
    );
    assert!(lines[1].contains("unknown key `model`"), "{text}");
    assert!(
        lines[2].starts_with(&at("searcher_assistant.md", 9)),
        "{text}"
    );
    assert!(lines[2].contains("unknown placeholder `today`"), "{text}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("3 problems"));
}

/// A prompt that promises what no tool of its agent does — a counter-offer in the delegation
/// line, a deposit in the body, a person writing back in the offline reply — is warned about
/// with its line; the same words where the assistant hands back or says it does not, are not.
#[test]
fn a_promise_no_tool_keeps_is_a_warning_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "primary_assistant.md",
        "+++\nname = \"primary_assistant\"\nkind = \"primary\"\n\
         roles = [\"prospect\", \"owner\", \"agent\"]\n\
         offline_reply = \"Ahora no puedo. Un agente te escribirá lo antes posible.\"\n+++\nHola.\n",
    );
    write(
        "prospect_offer_assistant.md",
        "+++\nname = \"prospect_offer_assistant\"\nkind = \"subgraph\"\n\
         delegation = \"Ofertas: hacer una oferta o responder a una contraoferta.\"\n\
         roles = [\"prospect\"]\ntools = [\"submit_offer\"]\n+++\n\
         Registra ofertas con submit_offer.\n\
         Si quiere, puedes reservar con señal.\n\
         No gestiones la señal ni las arras.\n\
         - cancel=true, si pide algo fuera de las ofertas (agendar una visita).\n",
    );
    let output = prompts_check(Some(dir.path()), None);
    assert!(
        output.status.success(),
        "warnings do not fail the check: {output:?}"
    );
    let text = stdout(&output);
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("warning: ") && l.contains(".md:"))
        .collect();
    assert_eq!(warnings.len(), 4, "{text}");
    for (expected, words) in [
        (
            "primary_assistant.md:5: the offline reply promises a person writing or calling back",
            "te escribira",
        ),
        (
            "prospect_offer_assistant.md:4: the delegation line promises counter-offers",
            "contraoferta",
        ),
        (
            "prospect_offer_assistant.md:9: the body promises taking a deposit",
            "reservar con senal",
        ),
        (
            "prospect_offer_assistant.md:9: the body promises deposits and arras",
            "senal",
        ),
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(expected) && w.contains(&format!("«{words}»"))),
            "{expected}: {text}"
        );
    }
}

/// The business file is checked with the prompts: each problem with its line, exit 1.
#[test]
fn a_broken_business_file_fails_the_check_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let business = dir.path().join("business.toml");
    let text = std::fs::read_to_string(&business)
        .unwrap()
        .replace("saturday = [\"10:00-13:30\"]", "saturday = [\"10-13:30\"]");
    std::fs::write(&business, &text).unwrap();
    let line = text.lines().position(|l| l.contains("10-13:30")).unwrap() + 1;
    let output = prompts_check(Some(dir.path()), None);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!(
            "business.toml:{line}: hours: `10-13:30` is not a span of the day like `09:30-14:00`"
        )),
        "{printed}"
    );
}

/// `zaguan templates check` against a fake account: the file's templates are listed; one the
/// account does not have and one Meta paused are problems (exit 1), a category that differs a
/// warning; the account's list is read across its pages.
#[test]
fn templates_check_compares_the_file_with_the_account() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let base = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let page = move |query: axum::extract::Query<std::collections::HashMap<String, String>>,
                         headers: axum::http::HeaderMap| async move {
            assert_eq!(
                headers.get("authorization").unwrap(),
                "Bearer EAAG-templates"
            );
            if query.get("after").is_none() {
                axum::Json(serde_json::json!({
                    "data": [
                        {"name": "visit_reminder", "language": "es", "status": "APPROVED", "category": "UTILITY", "id": "1",
                         "parameter_format": "POSITIONAL",
                         "components": [
                            {"type": "HEADER", "format": "TEXT", "text": "Tu visita"},
                            {"type": "BODY", "text": "Mañana, {{2}}, visitas {{1}} ({{3}}). Si no puedes, dínoslo por aquí.",
                             "example": {"body_text": [["Ático en Ruzafa", "jueves 03/12 a las 10:00", "Calle de Sueca 12"]]}},
                            {"type": "FOOTER", "text": "Zaguan Inmobiliaria"},
                            {"type": "BUTTONS", "buttons": [{"type": "QUICK_REPLY", "text": "Cambiar la visita"}]}]},
                        {"name": "operator_follow_up", "language": "es", "status": "APPROVED", "category": "UTILITY", "id": "4",
                         "parameter_format": "NAMED",
                         "components": [
                            {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::aW"]}},
                            {"type": "BODY", "text": "Hola {{name}}, soy {{operator}} de {{business}}.",
                             "example": {"body_text_named_params": [{"param_name": "name", "example": "Ana"}]}},
                            {"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Ver la ficha", "url": "https://zaguan.example/p/{{1}}", "example": ["P-1001"]}]}]},
                        {"name": "visit_reminder", "language": "en", "status": "PAUSED", "category": "UTILITY", "id": "2"},
                    ],
                    "paging": {"cursors": {"after": "b"}, "next": format!("http://{addr}/v21.0/555000/message_templates?after=b")}
                }))
            } else {
                axum::Json(serde_json::json!({
                    "data": [
                        {"name": "listing_alert", "language": "es", "status": "APPROVED", "category": "MARKETING", "id": "3",
                         "components": [{"type": "BODY", "text": "Nuevo para tu búsqueda: {{1}} por {{2}}."}]},
                    ],
                    "paging": {"cursors": {"before": "b"}}
                }))
            }
        };
        let app = axum::Router::new().route(
            "/v21.0/555000/message_templates",
            axum::routing::get(page),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("templates.toml"),
        r#"
fallback_language = "es"
[visit_reminder.es]
name = "visit_reminder"
language = "es"
category = "utility"
parameters = ["property", "when", "address"]
[visit_reminder.en]
name = "visit_reminder"
language = "en"
category = "utility"
parameters = ["property", "when", "address"]
[listing_alert.es]
name = "listing_alert"
language = "es"
category = "utility"
parameters = ["title", "price", "reference"]
[re_engagement.es]
name = "seguimos_aqui"
language = "es"
category = "utility"
parameters = ["name"]
[operator_follow_up.es]
name = "operator_follow_up"
language = "es"
category = "utility"
parameters = ["name", "operator", "business"]
"#,
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_zaguan"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("WHATSAPP_ACCESS_TOKEN", "EAAG-templates")
        .env("WHATSAPP_BUSINESS_ACCOUNT_ID", "555000")
        .env("WHATSAPP_API_BASE_URL", format!("{base}/v21.0"))
        .args(["templates", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        text.contains("visit_reminder [en]: `visit_reminder` (en): paused in the account"),
        "{text}"
    );
    assert!(
        text.contains(
            "re_engagement [es]: `seguimos_aqui` (es): unknown, the account has no such template"
        ),
        "{text}"
    );
    assert!(text.contains("warning: listing_alert [es]: `listing_alert` (es): the account says marketing, the file utility"), "{text}");
    assert!(
        !text.contains("visit_reminder [es]: `visit_reminder` (es):"),
        "the Spanish reminder's body takes the file's three values: {text}"
    );
    // What Meta would refuse at send time, caught here.
    assert!(
        text.contains("listing_alert [es]: `listing_alert` (es): the account's body takes 2 value(s), the file gives 3 (title, price, reference)"),
        "{text}"
    );
    for problem in [
        "operator_follow_up [es]: `operator_follow_up` (es): named parameters",
        "operator_follow_up [es]: `operator_follow_up` (es): a image header, which the service does not send",
        "operator_follow_up [es]: `operator_follow_up` (es): the button «Ver la ficha» takes a value for its link",
    ] {
        assert!(text.contains(problem), "{problem}\n{text}");
    }
    // The environment's staff notice stands for the purpose the file leaves out.
    assert!(
        text.contains("staff_handoff [es]: staff_handoff (es, utility)"),
        "{text}"
    );

    // A broken file: its line, exit 1, nothing asked of the account.
    std::fs::write(
        dir.path().join("templates.toml"),
        "[visit_reminder.es]\nname = \"x\"\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_zaguan"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(["templates", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stdout(&output).contains("templates.toml:1:"),
        "{}",
        stdout(&output)
    );
}
