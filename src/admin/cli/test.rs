//! `zaguan test [PATH…]`: the conversation tests (`tests/conversations/` by default) through
//! the real engine, each step's failure printed with what actually happened; exit 1 on any
//! failure or test that needs recording. `--record` asks the configured model and keeps its
//! answers beside the tests; `--live` asks it without keeping them (and scores `judge`
//! criteria with the fallback model).

use std::path::PathBuf;

use clap::Args;

use crate::config::Config;
use crate::conversation_tests::cassette::Mode;
use crate::conversation_tests::runner::Outcome;
use crate::conversation_tests::{self, FileReport, Options};

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Test files or folders.
    #[arg(default_value = "tests/conversations")]
    paths: Vec<PathBuf>,
    /// Ask the configured model and record its answers beside the tests.
    #[arg(long, conflicts_with = "live")]
    record: bool,
    /// Ask the configured model without recording; score `judge` criteria.
    #[arg(long)]
    live: bool,
    /// Only the tests whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Also write the results as JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
}

pub async fn run(args: TestArgs, config: Config) -> anyhow::Result<()> {
    let options = Options {
        mode: if args.record {
            Mode::Record
        } else if args.live {
            Mode::Live
        } else {
            Mode::Replay
        },
        filter: args.filter,
    };
    let started = std::time::Instant::now();
    let mut current: Option<PathBuf> = None;
    let reports = conversation_tests::run(&args.paths, &options, config, |path, result| {
        if current.as_deref() != Some(path) {
            println!("{}", path.display());
            current = Some(path.to_owned());
        }
        let mark = match result.outcome {
            Outcome::Passed => "ok  ",
            Outcome::Failed => "FAIL",
            Outcome::NeedsRecording => "REC?",
        };
        println!(
            "  {mark} {} ({:.1} s, {} model call(s))",
            result.name, result.seconds, result.model_calls
        );
        if result.outcome == Outcome::NeedsRecording {
            println!(
                "       needs recording: no recorded model answers, and the offline engine does not pass it"
            );
        }
        for failure in &result.failures {
            for (i, line) in failure.to_string().lines().enumerate() {
                println!("       {}{line}", if i == 0 { "" } else { "  " });
            }
        }
        for note in &result.notes {
            println!("       note: {note}");
        }
    })
    .await?;
    let passed = FileReport::count(&reports, &Outcome::Passed);
    let failed = FileReport::count(&reports, &Outcome::Failed);
    let unrecorded = FileReport::count(&reports, &Outcome::NeedsRecording);
    println!(
        "{passed} passed, {failed} failed, {unrecorded} need recording ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &args.junit {
        std::fs::write(path, conversation_tests::junit::render(&reports)?)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    if failed + unrecorded > 0 {
        anyhow::bail!("{} conversation test(s) did not pass", failed + unrecorded);
    }
    if passed == 0 {
        anyhow::bail!("no test ran (see --filter)");
    }
    Ok(())
}
