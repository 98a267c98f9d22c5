//! `zaguan templates check [DIR]`: the templates the service may send — the prompts'
//! `templates.toml` and the environment's for the purposes it leaves out — checked as the
//! service loads them (`file:line: message`), listed by purpose and language, and, with
//! `WHATSAPP_ACCESS_TOKEN` and `WHATSAPP_BUSINESS_ACCOUNT_ID`, compared with the account's own
//! list (`GET /{waba-id}/message_templates`): one the account does not have, or that Meta
//! paused, rejected or disabled, is a problem; a category that differs is a warning (Meta bills
//! by it). Exit 1 on any problem.

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
