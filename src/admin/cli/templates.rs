//! `zaguan templates check [DIR]`: the templates the service may send — the prompts'
//! `templates.toml` and the environment's for the purposes it leaves out — checked as the
//! service loads them (`file:line: message`), listed by purpose and language, and, with
//! `WHATSAPP_ACCESS_TOKEN` and `WHATSAPP_BUSINESS_ACCOUNT_ID`, compared with the account's own
//! list (`GET /{waba-id}/message_templates`): one the account does not have, or that Meta
//! paused, rejected or disabled, is a problem, as is a body whose placeholders are not the file's
//! parameters, or a header or button that needs a value the service does not send; a category
//! that differs is a warning (Meta bills by it). Exit 1 on any problem.

use std::path::PathBuf;

use crate::config::Config;
use crate::outbound::{AccountTemplate, GraphClient};
use crate::templates::{self, TEMPLATES_FILE, Templates};

#[derive(Debug, clap::Args)]
pub struct TemplatesArgs {
    #[command(subcommand)]
    pub command: TemplatesCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum TemplatesCommand {
    /// Validate the templates file and compare it with the account's templates.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The prompts folder, where `templates.toml` is.
    #[arg(env = "ZAGUAN_PROMPTS_DIR", default_value = "prompts")]
    pub dir: PathBuf,
}

pub async fn run(args: TemplatesArgs, config: Config) -> anyhow::Result<()> {
    match args.command {
        TemplatesCommand::Check(args) => check(args, config).await,
    }
}

async fn check(args: CheckArgs, config: Config) -> anyhow::Result<()> {
    let path = args.dir.join(TEMPLATES_FILE);
    let file = match std::fs::read_to_string(&path) {
        Ok(text) => match templates::parse(&text) {
            Ok(file) => file,
            Err(problems) => {
                for problem in &problems {
                    println!("{}:{}: {}", path.display(), problem.line, problem.message);
                }
                anyhow::bail!("{} problem(s) in {}", problems.len(), path.display());
            }
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "{}: none; the environment's templates stand for every purpose",
                path.display()
            );
            Templates::default()
        }
        Err(error) => anyhow::bail!("cannot read {}: {error}", path.display()),
    };
    let mut templates = file;
    if !templates.from_file {
        templates.fallback_language = config.engine.templates.fallback_language.clone();
    }
    for ((purpose, lang), spec) in &config.engine.templates.entries {
        templates = templates.with_default(*purpose, lang, spec.clone());
    }
    println!(
        "{} template(s), fallback language `{}`:",
        templates.entries.len(),
        templates.fallback_language
    );
    for ((purpose, lang), spec) in &templates.entries {
        println!(
            "  {} [{lang}]: {} ({}, {}) {{{{1}}}}… = {}",
            purpose.key(),
            spec.name,
            spec.language,
            spec.category.as_str(),
            spec.parameters.join(", ")
        );
    }
    let graph = &config.whatsapp.graph;
    let (Some(_), Some(waba)) = (&graph.access_token, &graph.business_account_id) else {
        println!(
            "not compared with the account: set WHATSAPP_ACCESS_TOKEN and \
             WHATSAPP_BUSINESS_ACCOUNT_ID to compare"
        );
        return Ok(());
    };
    let client = GraphClient::new(
        graph.api_base_url.clone(),
        graph.access_token.clone(),
        graph.api_timeout,
    )?;
    let account = client.message_templates(waba).await?;
    let (problems, warnings) = compare(&templates, &account);
    for warning in &warnings {
        println!("warning: {warning}");
    }
    for problem in &problems {
        println!("{problem}");
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "{} template problem(s) against the account's {} template(s)",
            problems.len(),
            account.len()
        );
    }
    println!(
        "every template is approved in the account ({} listed there)",
        account.len()
    );
    Ok(())
}

/// The problems and warnings of `templates` against the account's list.
pub fn compare(templates: &Templates, account: &[AccountTemplate]) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    for ((purpose, lang), spec) in &templates.entries {
        let what = format!(
            "{} [{lang}]: `{}` ({})",
            purpose.key(),
            spec.name,
            spec.language
        );
        let Some(found) = account
            .iter()
            .find(|t| t.name == spec.name && t.language == spec.language)
        else {
            problems.push(format!("{what}: unknown, the account has no such template"));
            continue;
        };
        if found.status != "APPROVED" {
            problems.push(format!(
                "{what}: {} in the account, so it is not sent",
                found.status.to_ascii_lowercase()
            ));
        }
        problems.extend(
            components(spec, found)
                .into_iter()
                .map(|problem| format!("{what}: {problem}")),
        );
        if let Some(category) = &found.category
            && !category.eq_ignore_ascii_case(spec.category.as_str())
        {
            warnings.push(format!(
                "{what}: the account says {}, the file {} (Meta bills by the account's)",
                category.to_ascii_lowercase(),
                spec.category.as_str()
            ));
        }
    }
    (problems, warnings)
}

/// What in the account's template the service would send wrong: a body that takes another
/// number of values than the file's `parameters`, named placeholders (the service sends them
/// by position), and a header or button that needs a value the service does not send. Meta
/// refuses each at send time (132000, 132012), so they are caught here.
fn components(spec: &crate::templates::TemplateSpec, found: &AccountTemplate) -> Vec<String> {
    let mut problems = Vec::new();
    let kind = |c: &serde_json::Value| c["type"].as_str().unwrap_or_default().to_ascii_uppercase();
    if found
        .parameter_format
        .as_deref()
        .is_some_and(|f| f.eq_ignore_ascii_case("NAMED"))
    {
        problems.push(
            "named parameters ({{name}}): the service fills them by position ({{1}}, {{2}}…); \
             approve it with positional parameters"
                .to_owned(),
        );
    }
    for component in &found.components {
        match kind(component).as_str() {
            "BODY" => {
                let takes = placeholders(component["text"].as_str().unwrap_or_default());
                if takes != spec.parameters.len() {
                    problems.push(format!(
                        "the account's body takes {takes} value(s), the file gives {} ({})",
                        spec.parameters.len(),
                        spec.parameters.join(", ")
                    ));
                }
            }
            "HEADER" => {
                let format = component["format"]
                    .as_str()
                    .unwrap_or("TEXT")
                    .to_ascii_uppercase();
                if format != "TEXT" {
                    problems.push(format!(
                        "a {} header, which the service does not send",
                        format.to_ascii_lowercase()
                    ));
                    continue;
                } else if placeholders(component["text"].as_str().unwrap_or_default()) > 0 {
                    problems.push(
                        "a header that takes a value, which the service does not send".to_owned(),
                    );
                }
            }
            "BUTTONS" => {
                for button in component["buttons"].as_array().into_iter().flatten() {
                    let button_type = button["type"].as_str().unwrap_or_default();
                    let url = button["url"].as_str().unwrap_or_default();
                    if button_type.eq_ignore_ascii_case("URL") && placeholders(url) > 0 {
                        problems.push(format!(
                            "the button «{}» takes a value for its link, which the service \
                             does not send",
                            button["text"].as_str().unwrap_or_default()
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    problems
}

/// How many different `{{…}}` placeholders `text` has.
fn placeholders(text: &str) -> usize {
    let mut seen: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest[start..].find("}}") else {
            break;
        };
        let name = rest[start + 2..start + end].trim();
        if !name.is_empty() && !seen.contains(&name) {
            seen.push(name);
        }
        rest = &rest[start + end + 2..];
    }
    seen.len()
}
