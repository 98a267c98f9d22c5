//! Conversation tests: `zaguan test` runs YAML conversations through the real engine and checks
//! what the bot did after each customer step, replaying recorded model answers so a run needs
//! no key and gives the same result every day. Staff who edit `prompts/` run it before they
//! commit; `--record` asks the configured model again after an intended change.
//!
//! - [`spec`]: the file format; [`runner`]: one test through the engine; [`expect`]: the
//!   expectations; [`cassette`]: recorded answers; [`payload`]: Meta's message shapes;
//!   [`junit`]: the report CI systems read.

pub mod cassette;
pub mod expect;
pub mod export;
pub mod junit;
pub mod payload;
pub mod runner;
pub mod spec;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cassette::{Cassette, CassetteLlm, Mode};
use runner::{Failure, Model, Outcome, Shared, TestResult};

use crate::config::Config;

/// How a run answers model calls, and which tests it runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    /// Only tests whose name contains this (case aside).
    pub filter: Option<String>,
}

/// The results of one file's tests.
#[derive(Debug, Clone)]
pub struct FileReport {
    pub path: PathBuf,
    pub results: Vec<TestResult>,
}

impl FileReport {
    pub fn count(reports: &[FileReport], outcome: &Outcome) -> usize {
        reports
            .iter()
            .flat_map(|r| &r.results)
            .filter(|t| t.outcome == *outcome)
            .count()
    }
}

/// What a replay-only run needs (export, the console): the prompts, no provider.
pub fn shared_for_replay(config: Config) -> anyhow::Result<Shared> {
    let registry = Arc::new(crate::startup::load_prompts(&config)?);
    Ok(Shared {
        config,
        registry,
        provider: None,
        judge: None,
    })
}

/// Runs the tests of `paths` (files or folders); `Err` when a file cannot be read or the
/// prompts do not load.
pub async fn run(
    paths: &[PathBuf],
    options: &Options,
    config: Config,
    mut progress: impl FnMut(&Path, &TestResult),
) -> anyhow::Result<Vec<FileReport>> {
    let files = spec::discover(paths).map_err(anyhow::Error::msg)?;
    if files.is_empty() {
        anyhow::bail!("no test files (*.yaml) under {paths:?}");
    }
    let mut parsed = Vec::new();
    for file in &files {
        parsed.push(spec::read(file).map_err(anyhow::Error::msg)?);
    }
    let registry = Arc::new(crate::startup::load_prompts(&config)?);
    let (provider, judge) = match options.mode {
        Mode::Replay => (None, None),
        Mode::Record | Mode::Live => {
            let keyed = [&config.llm.primary, &config.llm.fallback]
                .into_iter()
                .map(|spec| crate::startup::provider(&config, spec))
                .collect::<anyhow::Result<Vec<_>>>()?;
            if keyed.iter().all(Option::is_none) {
                anyhow::bail!(
                    "--record and --live ask the configured model: set OPENAI_API_KEY or \
                     ANTHROPIC_API_KEY (LLM_PRIMARY, LLM_FALLBACK)"
                );
            }
            let chain = crate::startup::llm_chain(&config, None)?;
            let judge = match options.mode {
                Mode::Live => keyed.into_iter().last().flatten(),
                _ => None,
            };
            (Some(chain), judge)
        }
    };
    let shared = Shared {
        config,
        registry,
        provider,
        judge,
    };
    let filter = options.filter.as_deref().map(expect::fold);
    let mut reports = Vec::new();
    for file in parsed {
        let cassette_path = cassette::path_for(&file.path);
        let mut cassette = Cassette::load(&cassette_path)
            .map_err(anyhow::Error::msg)?
            .unwrap_or_default();
        let mut results = Vec::new();
        let mut recorded = false;
        for test in &file.tests {
            if filter
                .as_deref()
                .is_some_and(|f| !expect::fold(&test.name).contains(f))
            {
                continue;
            }
            let result = match options.mode {
                _ if test.without_model => {
                    let mut result = runner::run(&shared, test, Model::Offline).await;
                    if result.outcome == Outcome::NeedsRecording {
                        result.outcome = Outcome::Failed;
                    }
                    result
                }
                Mode::Replay => match cassette.tests.get(&test.name) {
                    Some(interactions) => {
                        let llm = Arc::new(CassetteLlm::replay(
                            interactions.clone(),
                            cassette.prompts.clone(),
                        ));
                        let mut result =
                            runner::run(&shared, test, Model::Cassette(llm.clone())).await;
                        let unused = llm.unused();
                        if result.failures.is_empty() && unused > 0 {
                            result.outcome = Outcome::Failed;
                            result.failures.push(Failure {
                                step: 0,
                                action: String::new(),
                                message: format!(
                                    "{unused} recorded model call(s) were not made: the \
                                     conversation changed; record again with `zaguan test --record`"
                                ),
                            });
                        }
                        result
                    }
                    None => runner::run(&shared, test, Model::Offline).await,
                },
                Mode::Record | Mode::Live => {
                    let provider = shared.provider.clone().expect("checked above");
                    let llm = Arc::new(CassetteLlm::provider(options.mode, provider));
                    let result = runner::run(&shared, test, Model::Cassette(llm.clone())).await;
                    if options.mode == Mode::Record {
                        cassette.put(&test.name, llm.recording());
                        recorded = true;
                    }
                    result
                }
            };
            progress(&file.path, &result);
            results.push(result);
        }
        if recorded {
            cassette.save(&cassette_path).map_err(anyhow::Error::msg)?;
        }
        if !results.is_empty() {
            reports.push(FileReport {
                path: file.path,
                results,
            });
        }
    }
    Ok(reports)
}
