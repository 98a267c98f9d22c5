//! Tunes the fast path's router on the training split only: 5-fold cross-validation over
//! `tests/data/routing/train.jsonl`, whose lines are also the prompts' examples. Each fold's lines
//! are taken out of the examples, the router is trained on the rest and measured on the fold.
//! Prints precision and recall (all lines and hard ones) per confidence threshold for a few
//! parameter sets. The held-out corpus is never read here.
//!
//! `cargo run --release --example route_tune [PROMPTS_DIR] [TRAIN_JSONL]`

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use zaguan::agents::fast_route::{FastRouter, Params};
use zaguan::agents::route_eval::{self, FLOOR, Labelled};
use zaguan::agents::{AgentKind, AgentRegistry, known_tools};
use zaguan::domain::Role;

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
        for (threshold, sure, owners_max) in [0.6, 0.8, 0.9, 0.95, 0.98]
            .into_iter()
            .flat_map(|t| [0.95, 0.98, f32::INFINITY].map(|sure| (t, sure)))
            .flat_map(|(t, sure)| [1.0, 0.05, 0.02, 0.01, 0.005].map(|o| (t, sure, o)))
        {
            let evaluation = route_eval::evaluate(&registry, &lines, |line| {
                let outcome = readings.get(&key(line))?;
                let bar = if outcome.keywords_agree {
                    threshold
                } else {
                    sure
                };
                outcome
                    .routed
                    .filter(|_| outcome.confidence >= bar && outcome.owners_own < owners_max)
            });
            println!(
                "  ≥ {threshold:.2} / {sure:.2} owners' own < {owners_max:.3}: precision {:5.1} % recall {:5.1} % | hard {:5.1} % {:5.1} % | wrong {}{}",
                100.0 * evaluation.all.precision(),
                100.0 * evaluation.all.recall(),
                100.0 * evaluation.hard.precision(),
                100.0 * evaluation.hard.recall(),
                evaluation.misroutes.len(),
                if evaluation.shortfalls(&FLOOR).is_empty() {
                    "  ← keeps the floor"
                } else {
                    ""
                },
            );
            if std::env::var("ROUTE_TUNE_SHOW")
                .is_ok_and(|t| t == format!("{threshold:.2}/{sure:.2}/{owners_max:.3}"))
            {
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
    for fold in 0..FOLDS {
        let held: Vec<&Labelled> = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| i % FOLDS == fold)
            .map(|(_, line)| line)
            .collect();
        let out: HashSet<&str> = held.iter().map(|line| line.text.as_str()).collect();
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
            .map(|a| (a.name.clone(), kept(&a.examples), a.keywords.clone()))
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
            let reading = router.read(&line.text);
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
                    owners_own,
                },
            );
        }
    }
    readings
}
