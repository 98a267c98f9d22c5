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
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(
        warnings[0].ends_with(
            "primary_assistant.md:9: the body names `book_appointment`, which is not in `tools`: \
             add it there, or do not promise what it does"
        ),
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
