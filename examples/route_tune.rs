//! Tunes the fast path's router on the training split only: 5-fold cross-validation over
//! `tests/data/routing/train.jsonl`, whose lines are also the prompts' examples. Each fold's lines
//! are taken out of the examples, the router is trained on the rest and measured on the fold.
//! Prints precision and recall (all lines and hard ones) for a few parameter sets, over a grid of
//! settings `keywords/neighbour/similarity/owners/split`: the confidence needed when the keywords
//! agree, the confidence and cosine needed when the nearest example agrees instead, the owners'
//! own specialists' share above which an owner is not sent to a shared specialist, and whether
//! two requests in one message abstain (a message carrying on from the subgraph holding the
//! conversation always stays). The held-out corpora are never read here; `tests/data/routing/dev_varied.jsonl`
//! (messages in other styles) is the second file to tune on: pass it as `TRAIN_JSONL` with
//! `ROUTE_TUNE_NO_FOLDS=1` to measure the router trained on every example.
//!
//! `cargo run --release --example route_tune [PROMPTS_DIR] [TRAIN_JSONL]`, with
//! - `ROUTE_TUNE_ONLY=<variant>`: one parameter set;
//! - `ROUTE_TUNE_MIN_PRECISION=0.98`: only the settings at least this precise;
//! - `ROUTE_TUNE_MEASURE_FIRST=N`: measured on the first N lines only (all still train);
//! - `ROUTE_TUNE_SHOW=<setting>`: that setting's per-agent recall and misroutes;
//! - `ROUTE_TUNE_NO_FOLDS=1`: no folds, for a file whose lines are not prompt examples.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use zaguan::agents::fast_route::{FastRouter, Params};
use zaguan::agents::route_eval::{self, Labelled};
use zaguan::agents::{AgentKind, AgentRegistry};
use zaguan::domain::Role;
use zaguan::startup::known_tools;

const FOLDS: usize = 5;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "prompts".into()));
    let train = args
        .next()
        .unwrap_or_else(|| "tests/data/routing/train.jsonl".into());
    let registry = AgentRegistry::load(&dir, &known_tools())
        .map_err(|problems| anyhow::anyhow!("prompts do not load: {problems:?}"))?;
    let lines =
        route_eval::parse(&std::fs::read_to_string(&train)?).map_err(|e| anyhow::anyhow!(e))?;

    // Measured on the first N lines only (say, the lines a change of the others is judged on).
    let measured: Vec<Labelled> = match std::env::var("ROUTE_TUNE_MEASURE_FIRST") {
        Ok(n) => lines[..n.parse::<usize>()?.min(lines.len())].to_vec(),
        Err(_) => lines.clone(),
    };
    let base = Params::DEFAULT;
    let variants: Vec<(&str, Params)> = vec![
        ("default", base),
        (
            "more epochs",
            Params {
                epochs: 200,
                learning_rate: 3.0,
                l2: 0.0,
                ..base
            },
        ),
        ("words only", Params { ngram: 0.0, ..base }),
        (
            "grams 2-4",
            Params {
                min_gram: 2,
                max_gram: 4,
                ..base
            },
        ),
        (
            "negation 5",
            Params {
                negation_scope: 5,
                ..base
            },
        ),
    ];
    let filter = std::env::var("ROUTE_TUNE_ONLY").ok();
    for (name, params) in variants {
        if filter.as_deref().is_some_and(|only| only != name) {
            continue;
        }
        let readings = cross_validate(&registry, &lines, params);
        println!("== {name}: {params:?}");
        let min_precision: f64 = std::env::var("ROUTE_TUNE_MIN_PRECISION")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0.0);
        let grid = [0.0, 0.8, 0.9, 0.95].into_iter().flat_map(|t| {
            [0.0, 0.5, 0.7, 0.8, 0.9, 0.95]
                .into_iter()
                .flat_map(move |sure| {
                    [-1.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, f32::INFINITY]
                        .into_iter()
                        .flat_map(move |near| [1.0, 0.02, 0.01].map(|o| (t, sure, near, o)))
                })
        });
        let rivals: Vec<f32> = match std::env::var("ROUTE_TUNE_RIVALS") {
            Ok(list) => list.split(',').filter_map(|r| r.parse().ok()).collect(),
            Err(_) => vec![base.rival],
        };
        let grid = grid.flat_map(|g| rivals.clone().into_iter().map(move |r| (g, r)));
        for (((threshold, sure, near, owners_max), rival), split) in
            grid.flat_map(|g| [(g, false), (g, true)])
        {
            let evaluation = route_eval::evaluate(&registry, &measured, |line| {
                let outcome = readings.get(&key(line))?;
                let confident = (outcome.keywords_agree && outcome.confidence >= threshold)
                    || (outcome.neighbour.is_some_and(|s| s >= near)
                        && !outcome.keywords_conflict
                        && outcome.confidence >= sure);
                outcome.routed.filter(|_| {
                    confident
                        && outcome.owners_own < owners_max
                        && !(split && outcome.two_requests)
                        && !outcome.continues
                        && !(split && outcome.rival >= rival)
                })
            });
            if evaluation.all.precision() < min_precision {
                continue;
            }
            let setting =
                format!("{threshold:.2}/{sure:.2}/{near:.2}/{owners_max:.3}/{rival:.2}/{split}");
            println!(
                "  {setting}: precision {:5.1} % recall {:5.1} % | hard {:5.1} % {:5.1} % | wrong {}",
                100.0 * evaluation.all.precision(),
                100.0 * evaluation.all.recall(),
                100.0 * evaluation.hard.precision(),
                100.0 * evaluation.hard.recall(),
                evaluation.misroutes.len(),
            );
            if std::env::var("ROUTE_TUNE_SHOW").is_ok_and(|t| t == setting) {
                for (agent, score) in &evaluation.per_agent {
                    println!(
                        "      {agent:28} lines {:3} routed {:3} right {:3} recall {:5.1} %",
                        score.lines,
                        score.routed,
                        score.right,
                        100.0 * score.recall()
                    );
                }
                for m in &evaluation.misroutes {
                    println!(
                        "      «{}» → {} (expected {})",
                        m.text, m.routed, m.expected
                    );
                }
            }
        }
    }
    Ok(())
}

/// A line by its text and `dialog_state`.
type Key = (String, Option<String>);

/// What the router trained without a line's fold reads in it.
struct Outcome<'r> {
    /// The reachable subgraph it would enter, at some confidence.
    routed: Option<&'r str>,
    confidence: f32,
    keywords_agree: bool,
    neighbour: Option<f32>,
    keywords_conflict: bool,
    two_requests: bool,
    rival: f32,
    /// Carries on from the message before, while a subgraph holds the conversation.
    continues: bool,
    /// For an owner routed to a specialist prospects reach too: the probability of the
    /// specialists only owners (and staff) reach.
    owners_own: f32,
}

fn key(line: &Labelled) -> Key {
    (line.text.clone(), line.dialog_state.clone())
}

/// For every line: the reachable subgraph the router trained without its fold would enter,
/// with its confidence (`None` when the best class is the primary's or unreachable) and whether
/// the keywords agree.
fn cross_validate<'r>(
    registry: &'r AgentRegistry,
    lines: &[Labelled],
    params: Params,
) -> HashMap<Key, Outcome<'r>> {
    let mut readings = HashMap::new();
    // Lines that are not prompt examples (another file) need no folds.
    let no_folds = std::env::var("ROUTE_TUNE_NO_FOLDS").is_ok();
    for fold in 0..if no_folds { 1 } else { FOLDS } {
        let held: Vec<&Labelled> = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| no_folds || i % FOLDS == fold)
            .map(|(_, line)| line)
            .collect();
        let out: HashSet<&str> = if no_folds {
            HashSet::new()
        } else {
            held.iter().map(|line| line.text.as_str()).collect()
        };
        let kept = |examples: &[String]| -> Vec<String> {
            examples
                .iter()
                .filter(|e| !out.contains(e.as_str()))
                .cloned()
                .collect()
        };
        let subgraphs: Vec<(String, Vec<String>, Vec<String>)> = registry
            .agents()
            .filter(|a| a.kind == AgentKind::Subgraph)
            .map(|a| (a.name.to_string(), kept(&a.examples), a.keywords.clone()))
            .collect();
        let primary: Vec<String> = registry
            .agents()
            .filter(|a| a.kind == AgentKind::Primary)
            .flat_map(|a| kept(&a.examples))
            .collect();
        let router = FastRouter::train_with(
            params,
            subgraphs
                .iter()
                .map(|(n, e, k)| (n.as_str(), e.as_slice(), k.as_slice())),
            &primary,
        );
        for line in held {
            let caller = line
                .dialog_state
                .as_deref()
                .and_then(|name| registry.get(name))
                .filter(|a| a.kind == AgentKind::Subgraph && a.roles.contains(&line.role))
                .unwrap_or_else(|| registry.primary_for(line.role));
            let reading = router.read_for(&line.text, |name| {
                registry
                    .get(name)
                    .is_some_and(|a| a.roles.contains(&line.role))
            });
            let routed = reading.as_ref().and_then(|r| r.agent).and_then(|agent| {
                let target = registry.get(agent)?;
                (target.name != caller.name && target.roles.contains(&line.role))
                    .then_some(target.name.as_str())
            });
            let confidence = reading.as_ref().map_or(0.0, |r| r.confidence);
            let agree = reading.as_ref().is_some_and(|r| r.keywords_agree);
            let owners_own = match routed.and_then(|name| registry.get(name)) {
                Some(target)
                    if line.role == Role::Owner && target.roles.contains(&Role::Prospect) =>
                {
                    router.probability(&line.text, |name| {
                        registry.get(name).is_some_and(|a| {
                            a.roles.contains(&Role::Owner) && !a.roles.contains(&Role::Prospect)
                        })
                    })
                }
                _ => 0.0,
            };
            readings.insert(
                key(line),
                Outcome {
                    routed,
                    confidence,
                    keywords_agree: agree,
                    neighbour: reading.as_ref().and_then(|r| r.neighbour),
                    keywords_conflict: reading.as_ref().is_some_and(|r| r.keywords_conflict),
                    two_requests: reading.as_ref().is_some_and(|r| r.two_requests),
                    rival: reading.as_ref().map_or(0.0, |r| r.rival),
                    continues: caller.kind == AgentKind::Subgraph
                        && reading.as_ref().is_some_and(|r| r.continues),
                    owners_own,
                },
            );
        }
    }
    readings
}
