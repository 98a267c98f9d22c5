//! `zaguan prompts check [DIR]`: validates the prompts folder the way the service loads it, for
//! staff editing prompts and for CI. Prints every problem as `file:line: message` and fails, or
//! prints `N agents OK`, how the fast path does on the prompts' example phrases and, as a
//! warning, any routing bar the held-out corpus no longer reaches.
//!
//! `zaguan prompts eval [FILE]`: the fast path's precision, recall and confusion table on the
//! held-out corpus or on a file staff give, like `rasa test nlu`.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::agents::AgentRegistry;
use crate::agents::route_eval::{self, FLOOR};

#[derive(Debug, clap::Args)]
pub struct PromptsArgs {
    #[command(subcommand)]
    pub command: PromptsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PromptsCommand {
    /// Validate the prompt files; exit 1 listing every problem as `file:line: message`.
    Check(CheckArgs),
    /// Measure the fast path's routing on labelled messages (JSON Lines); exit 1 below the floor.
    Eval(EvalArgs),
}

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Labelled messages, one JSON object per line: {"text", "agent", "role", "lang", "hard",
    /// "dialog_state"}. Default: the held-out corpus built into zaguan.
    pub file: Option<PathBuf>,
    /// The prompts folder.
    #[arg(long, env = "ZAGUAN_PROMPTS_DIR", default_value = "prompts")]
    pub dir: PathBuf,
    /// Print the evaluation as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The prompts folder.
    #[arg(env = "ZAGUAN_PROMPTS_DIR", default_value = "prompts")]
    pub dir: PathBuf,
}

pub async fn run(args: PromptsArgs) -> anyhow::Result<()> {
    match args.command {
        PromptsCommand::Check(args) => check(args),
        PromptsCommand::Eval(args) => eval(args),
    }
}

/// Problems go to standard output, one per line, so editors and CI can link them; the error
/// returned makes the exit status 1.
fn check(args: CheckArgs) -> anyhow::Result<()> {
    match AgentRegistry::load(&args.dir, &crate::startup::known_tools()) {
        Ok(registry) => {
            println!("{} agents OK", registry.agents().count());
            for warning in registry.warnings() {
                println!("warning: {warning}");
            }
            let report = registry.fast_route_report();
            if report.examples > 0 {
                println!(
                    "fast path: {}/{} example phrases ({:.0}%) go straight to their agent",
                    report.hits(),
                    report.examples,
                    100.0 * report.hits() as f64 / report.examples as f64
                );
            }
            let lines = route_eval::parse(route_eval::HELD_OUT)
                .map_err(|error| anyhow::anyhow!("the built-in held-out corpus: {error}"))?;
            let evaluation = route_eval::evaluate(&registry, &lines, |line| {
                route_eval::route_line(&registry, line)
            });
            println!(
                "routing on the held-out corpus: precision {:.1} %, recall {:.1} % (hard lines: \
                 {:.1} %, {:.1} %)",
                100.0 * evaluation.all.precision(),
                100.0 * evaluation.all.recall(),
                100.0 * evaluation.hard.precision(),
                100.0 * evaluation.hard.recall(),
            );
            for shortfall in evaluation.shortfalls(&FLOOR) {
                println!(
                    "warning: routing {shortfall} (the floor); `zaguan prompts eval` shows the \
                     misroutes"
                );
            }
            Ok(())
        }
        Err(problems) => {
            for problem in &problems {
                println!("{problem}");
            }
            let plural = if problems.len() == 1 { "" } else { "s" };
            anyhow::bail!(
                "{} problem{plural} in {}",
                problems.len(),
                args.dir.display()
            )
        }
    }
}

/// Prints the evaluation (text or JSON) and fails below the floor.
fn eval(args: EvalArgs) -> anyhow::Result<()> {
    let registry =
        AgentRegistry::load(&args.dir, &crate::startup::known_tools()).map_err(|problems| {
            anyhow::anyhow!(
                "the prompts in {} do not load ({} problems): run `zaguan prompts check`",
                args.dir.display(),
                problems.len()
            )
        })?;
    let text = match &args.file {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?,
        None => route_eval::HELD_OUT.to_owned(),
    };
    let source = args
        .file
        .as_ref()
        .map_or("the held-out corpus".to_owned(), |f| {
            f.display().to_string()
        });
    let lines = route_eval::parse(&text).map_err(|error| anyhow::anyhow!("{source}: {error}"))?;
    anyhow::ensure!(!lines.is_empty(), "{source}: no labelled lines");
    let evaluation = route_eval::evaluate(&registry, &lines, |line| {
        route_eval::route_line(&registry, line)
    });
    let shortfalls = evaluation.shortfalls(&FLOOR);
    if args.json {
        let json = serde_json::json!({
            "source": source,
            "prompts_version": registry.version(),
            "precision": evaluation.all.precision(),
            "recall": evaluation.all.recall(),
            "hard_precision": evaluation.hard.precision(),
            "hard_recall": evaluation.hard.recall(),
            "floor": FLOOR,
            "target": route_eval::TARGET,
            "shortfalls": shortfalls,
            "evaluation": evaluation,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!("{source}, prompts {}:", registry.version());
        print!("{}", route_eval::render(&evaluation, &FLOOR));
    }
    anyhow::ensure!(
        shortfalls.is_empty(),
        "routing below the floor: {}",
        shortfalls.join("; ")
    );
    Ok(())
}
