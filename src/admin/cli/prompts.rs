//! `zaguan prompts check [DIR]`: validates the prompts folder the way the service loads it, for
//! staff editing prompts and for CI. Prints every problem as `file:line: message` and fails, or
//! prints `N agents OK` and how the fast path does on the prompts' example phrases.

use std::path::PathBuf;

use crate::agents::{self, AgentRegistry};

#[derive(Debug, clap::Args)]
pub struct PromptsArgs {
    #[command(subcommand)]
    pub command: PromptsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PromptsCommand {
    /// Validate the prompt files; exit 1 listing every problem as `file:line: message`.
    Check(CheckArgs),
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
    }
}

/// Problems go to standard output, one per line, so editors and CI can link them; the error
/// returned makes the exit status 1.
fn check(args: CheckArgs) -> anyhow::Result<()> {
    match AgentRegistry::load(&args.dir, &agents::known_tools()) {
        Ok(registry) => {
            println!("{} agents OK", registry.agents().count());
            let report = registry.fast_route_report();
            if report.examples > 0 {
                println!(
                    "fast path: {}/{} example phrases ({:.0}%) go straight to their agent",
                    report.hits(),
                    report.examples,
                    100.0 * report.hits() as f64 / report.examples as f64
                );
                for (agent, example) in &report.misses {
                    println!("  left to the LLM: {agent}: «{example}»");
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
