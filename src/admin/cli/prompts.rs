//! `zaguan prompts check [DIR]`: validates the prompts folder the way the service loads it, for
//! staff editing prompts and for CI. Prints every problem as `file:line: message` and fails, or
//! prints `N agents OK`, how the fast path does on the prompts' example phrases and, as a
//! warning, any routing bar a held-out corpus no longer reaches.
//!
//! `zaguan prompts eval [FILE]`: the fast path's precision, recall and confusion table on both
//! held-out corpora or on a file staff give, like `rasa test nlu`.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::agents::AgentRegistry;
use crate::agents::route_eval::{self, Bars, FLOOR};

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
    /// "dialog_state"}. Default: both held-out corpora built into zaguan.
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
            for corpus in &route_eval::HELD_OUT_CORPORA {
                let lines = route_eval::parse(corpus.lines)
                    .map_err(|error| anyhow::anyhow!("the built-in {}: {error}", corpus.file))?;
                let evaluation = route_eval::evaluate(&registry, &lines, |line| {
                    route_eval::route_line(&registry, line)
                });
                println!(
                    "routing on {}: precision {:.1} %, recall {:.1} % (hard lines: {:.1} %, \
                     {:.1} %)",
                    corpus.file,
                    100.0 * evaluation.all.precision(),
                    100.0 * evaluation.all.recall(),
                    100.0 * evaluation.hard.precision(),
                    100.0 * evaluation.hard.recall(),
                );
                for shortfall in evaluation.shortfalls(&corpus.floor) {
                    println!(
                        "warning: routing on {}: {shortfall} (the floor); `zaguan prompts eval` \
                         shows the misroutes",
                        corpus.file
                    );
                }
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

/// Prints the evaluation of a staff file, or of both held-out corpora (text or JSON), and fails
/// below a floor.
fn eval(args: EvalArgs) -> anyhow::Result<()> {
    let registry =
        AgentRegistry::load(&args.dir, &crate::startup::known_tools()).map_err(|problems| {
            anyhow::anyhow!(
                "the prompts in {} do not load ({} problems): run `zaguan prompts check`",
                args.dir.display(),
                problems.len()
            )
        })?;
    // (source, its lines, its floor, the target when it has one)
    let corpora: Vec<(String, String, Bars, Option<Bars>)> = match &args.file {
        Some(file) => vec![(
            file.display().to_string(),
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?,
            FLOOR,
            Some(route_eval::TARGET),
        )],
        None => route_eval::HELD_OUT_CORPORA
            .iter()
            .map(|corpus| {
                (
                    format!("{} (built in)", corpus.file),
                    corpus.lines.to_owned(),
                    corpus.floor,
                    corpus.target,
                )
            })
            .collect(),
    };
    let mut reports = Vec::new();
    let mut all_shortfalls = Vec::new();
    for (i, (source, text, floor, target)) in corpora.iter().enumerate() {
        let lines =
            route_eval::parse(text).map_err(|error| anyhow::anyhow!("{source}: {error}"))?;
        anyhow::ensure!(!lines.is_empty(), "{source}: no labelled lines");
        let evaluation = route_eval::evaluate(&registry, &lines, |line| {
            route_eval::route_line(&registry, line)
        });
        let shortfalls = evaluation.shortfalls(floor);
        all_shortfalls.extend(shortfalls.iter().map(|s| format!("{source}: {s}")));
        if args.json {
            reports.push(serde_json::json!({
                "source": source,
                "precision": evaluation.all.precision(),
                "recall": evaluation.all.recall(),
                "hard_precision": evaluation.hard.precision(),
                "hard_recall": evaluation.hard.recall(),
                "floor": floor,
                "target": target,
                "shortfalls": shortfalls,
                "evaluation": evaluation,
            }));
        } else {
            if i > 0 {
                println!();
            }
            println!("{source}, prompts {}:", registry.version());
            print!(
                "{}",
                route_eval::render_with(&evaluation, floor, target.as_ref())
            );
        }
    }
    if args.json {
        let json = serde_json::json!({
            "prompts_version": registry.version(),
            "corpora": reports,
            "shortfalls": all_shortfalls,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    anyhow::ensure!(
        all_shortfalls.is_empty(),
        "routing below the floor: {}",
        all_shortfalls.join("; ")
    );
    Ok(())
}
