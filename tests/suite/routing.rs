//! The fast path's routing, measured on the labelled corpus of `tests/data/routing/`: the shipped
//! prompts must keep the floor on the held-out part (so a prompt edit that breaks routing fails
//! CI), the corpus keeps its shape, and `zaguan prompts eval` / `check` report it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use zaguan::agents::keywords::tokens;
use zaguan::agents::route_eval::{self, FLOOR, HELD_OUT_CORPORA, Labelled, TARGET};
use zaguan::agents::{AgentKind, AgentRegistry};
use zaguan::domain::Role;
use zaguan::startup::known_tools;

fn prompts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts")
}

fn registry() -> AgentRegistry {
    AgentRegistry::load(&prompts_dir(), &known_tools()).expect("shipped prompts load")
}

/// The lines of a file under `tests/data/routing/`, or of every file of a folder there.
fn corpus(name: &str) -> Vec<Labelled> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/routing")
        .join(name);
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|file| file.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        files
    } else {
        vec![path]
    };
    files
        .iter()
        .flat_map(|path| {
            let text =
                std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            route_eval::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

fn zaguan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zaguan"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_shipped_prompts_route_the_held_out_corpus_at_the_target() {
    let registry = registry();
    let lines = corpus("held_out.jsonl");
    let evaluation = route_eval::evaluate(&registry, &lines, |line| {
        route_eval::route_line(&registry, line)
    });
    let report = route_eval::render(&evaluation, &FLOOR);
    println!("{report}");
    assert!(evaluation.unusable.is_empty(), "{report}");
    assert_eq!(evaluation.all.lines, lines.len());
    assert!(evaluation.shortfalls(&FLOOR).is_empty(), "{report}");
    // Where the shipped prompts stand against the target (issue 54: not reached yet).
    println!("short of the target: {:?}", evaluation.shortfalls(&TARGET));
}

/// Both held-out corpora, the second written apart in other styles (typos, dialects, voice notes,
/// elliptical follow-ups), and the strangers' (six writers who never saw the project, with the
/// contact's situation): each keeps its floor, the precision's 95 % interval included.
#[test]
fn the_shipped_prompts_keep_their_floor_on_every_held_out_corpus() {
    let registry = registry();
    for held_out in &HELD_OUT_CORPORA {
        let lines = corpus(held_out.file);
        let evaluation = route_eval::evaluate(&registry, &lines, |line| {
            route_eval::route_line(&registry, line)
        });
        let report = route_eval::render_with(&evaluation, &held_out.floor, None);
        println!("{}:\n{report}", held_out.file);
        // The strangers wrote what their customer would, whatever the graph serves: an owner
        // bargaining for another flat is a line no role of theirs reaches, left out.
        assert!(
            evaluation.unusable.is_empty() || held_out.file == "strangers/",
            "{}: {report}",
            held_out.file
        );
        assert!(
            evaluation.shortfalls(&held_out.floor).is_empty(),
            "{}: {report}",
            held_out.file
        );
    }
}

/// A message that carries on from the subgraph holding the conversation stays there, and a
/// second request announced by «y también» is heard even half-sure: both go to the LLM.
#[test]
fn continuations_stay_and_announced_second_requests_abstain() {
    let registry = registry();
    let mortgages = registry.get("mortgage_loan_assistant").unwrap();
    let text = "vale, y si ofrezco 200 en vez de 215 cuanto baja la cuota?";
    assert_eq!(
        registry
            .fast_route(text, mortgages, Role::Prospect)
            .map(|a| &a.name),
        None
    );
    let primary = registry.primary_for(Role::Prospect);
    let text = "quiero hacer una oferta por el piso de Ruzafa y también que me busquéis otras \
                opciones por si no la aceptan";
    assert_eq!(
        registry
            .fast_route(text, primary, Role::Prospect)
            .map(|a| &a.name),
        None
    );
    // A greeting or a «por favor» around a request is no second request.
    assert_eq!(
        registry
            .fast_route(
                "Hola, quiero agendar una visita al local de la calle Mayor, por favor.",
                primary,
                Role::Prospect
            )
            .map(|a| a.name.as_str()),
        Some("appointment_assistant")
    );
    // Each on its own still goes straight there.
    assert_eq!(
        registry
            .fast_route(
                "quiero hacer una oferta por el piso de Ruzafa",
                primary,
                Role::Prospect
            )
            .map(|a| a.name.as_str()),
        Some("prospect_offer_assistant")
    );
}

/// The three misroutes found by reading the old keywords stay with the primary assistant or go
/// where they belong.
#[test]
fn the_known_misroutes_stay_in_the_primary_or_go_right() {
    let registry = registry();
    let primary = registry.primary_for(Role::Prospect);
    for (text, allowed) in [
        ("Tengo interés en el piso", &[][..]),
        ("¿hay un banco cerca?", &["property_assistant"][..]),
        ("No quiero una cita", &[][..]),
    ] {
        let routed = registry.fast_route(text, primary, Role::Prospect);
        assert!(
            routed.is_none_or(|agent| allowed.contains(&agent.name.as_str())),
            "«{text}» went to {:?}",
            routed.map(|a| &a.name)
        );
    }
}

/// ≥ 600 lines, Spanish ≥ 60 %, English and Portuguese, every agent; the held-out part never
/// shapes the router: none of its messages is a prompt example, and the two parts share none.
#[test]
fn the_corpus_has_its_shape_and_the_held_out_part_stays_out_of_the_prompts() {
    let train = corpus("train.jsonl");
    let held_out = corpus("held_out.jsonl");
    let all: Vec<&Labelled> = train.iter().chain(&held_out).collect();
    assert!(all.len() >= 600, "{} lines", all.len());
    let mut languages: BTreeMap<&str, usize> = BTreeMap::new();
    for line in &all {
        *languages.entry(line.lang.as_str()).or_default() += 1;
    }
    assert!(
        languages["es"] * 100 >= all.len() * 60,
        "Spanish is {} of {}",
        languages["es"],
        all.len()
    );
    assert!(
        languages["en"] >= 50 && languages["pt"] >= 50,
        "{languages:?}"
    );
    let hard = held_out.iter().filter(|line| line.hard).count();
    assert!(hard * 4 >= held_out.len(), "{hard} hard held-out lines");

    let registry = registry();
    let agents: BTreeSet<&str> = registry.agents().map(|a| a.name.as_str()).collect();
    for split in [&train, &held_out] {
        let labelled: BTreeSet<&str> = split.iter().map(|line| line.agent.as_str()).collect();
        assert_eq!(labelled, agents, "every agent is in both parts");
    }

    let key = |text: &str| tokens(text).join(" ");
    let examples: BTreeSet<String> = registry
        .agents()
        .flat_map(|agent| agent.examples.iter().map(|e| key(e)))
        .collect();
    let train_texts: BTreeSet<String> = train.iter().map(|line| key(&line.text)).collect();
    for line in &held_out {
        let text = key(&line.text);
        assert!(
            !examples.contains(&text),
            "held-out «{}» is a prompt example",
            line.text
        );
        assert!(
            !train_texts.contains(&text),
            "«{}» is in both parts",
            line.text
        );
    }
    // The second held-out corpus and the file of the same styles to tune on share nothing with
    // the first corpus, the prompts or each other.
    let varied = corpus("held_out_varied.jsonl");
    let dev = corpus("dev_varied.jsonl");
    let first: BTreeSet<String> = held_out
        .iter()
        .map(|line| key(&line.text))
        .chain(train_texts.iter().cloned())
        .collect();
    let dev_texts: BTreeSet<String> = dev.iter().map(|line| key(&line.text)).collect();
    for line in &varied {
        let text = key(&line.text);
        assert!(
            !examples.contains(&text),
            "varied «{}» is an example",
            line.text
        );
        assert!(
            !first.contains(&text),
            "varied «{}» is in the first corpus",
            line.text
        );
        assert!(
            !dev_texts.contains(&text),
            "varied «{}» is in dev",
            line.text
        );
    }
    for split in [&varied, &dev] {
        let languages: BTreeSet<&str> = split.iter().map(|line| line.lang.as_str()).collect();
        assert_eq!(languages, BTreeSet::from(["en", "es", "pt"]));
        assert!(split.len() >= 250, "{} lines", split.len());
    }

    // The training part is what shapes the router: its lines (those not about a conversation
    // already in a subgraph) are the prompts' examples, under the agent they are labelled with.
    for line in train.iter().filter(|line| line.dialog_state.is_none()) {
        let agent = registry.get(&line.agent).unwrap();
        assert!(
            agent.examples.iter().any(|e| key(e) == key(&line.text)),
            "train «{}» is not an example of {}",
            line.text,
            agent.name
        );
    }
}

/// Every line names an agent its role reaches, and `dialog_state` a subgraph.
#[test]
fn every_corpus_line_is_usable() {
    let registry = registry();
    for name in [
        "train.jsonl",
        "held_out.jsonl",
        "held_out_varied.jsonl",
        "dev_varied.jsonl",
    ] {
        for (i, line) in corpus(name).iter().enumerate() {
            let agent = registry
                .get(&line.agent)
                .unwrap_or_else(|| panic!("{name}:{}", i + 1));
            assert!(agent.roles.contains(&line.role), "{name}:{}", i + 1);
            if let Some(state) = &line.dialog_state {
                let holding = registry.get(state).unwrap();
                assert_eq!(holding.kind, AgentKind::Subgraph, "{name}:{}", i + 1);
            }
        }
    }
}

#[test]
fn prompts_eval_prints_the_tables_and_json_for_ci() {
    let output = zaguan(&["prompts", "eval"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        text.starts_with("held_out.jsonl (built in), prompts "),
        "{text}"
    );
    assert!(
        text.contains("\nheld_out_varied.jsonl (built in), prompts "),
        "{text}"
    );
    assert!(
        text.contains("all lines: ") && text.contains("hard lines: "),
        "{text}"
    );
    assert!(text.contains("expected \\ routed"), "{text}");

    let output = zaguan(&["prompts", "eval", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let corpora = json["corpora"].as_array().unwrap();
    assert_eq!(corpora.len(), 3, "{json}");
    for corpus in corpora {
        let floor = corpus["floor"]["precision"].as_f64().unwrap();
        assert!(corpus["precision"].as_f64().unwrap() >= floor, "{json}");
        let interval = &corpus["evaluation"]["all"]["precision_interval"];
        assert!(
            interval[0].as_f64().unwrap() <= corpus["precision"].as_f64().unwrap()
                && corpus["precision"].as_f64().unwrap() <= interval[1].as_f64().unwrap(),
            "{json}"
        );
        assert!(
            corpus["evaluation"]["per_agent"]["appointment_assistant"].is_object(),
            "{json}"
        );
    }
    assert!(
        corpora[0]["recall"].as_f64().unwrap() >= FLOOR.recall,
        "{json}"
    );
    assert_eq!(json["shortfalls"], serde_json::json!([]));
}

/// A staff file: its own lines are measured, a misroute is listed with its line, and falling
/// below the floor fails the command. A bad line is an error naming it.
#[test]
fn prompts_eval_measures_a_file_staff_give() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.jsonl");
    // The second line is labelled wrong on purpose: whatever routes it is a misroute.
    std::fs::write(
        &file,
        "{\"text\":\"Quiero agendar una visita para el piso de la calle Mayor\",\
          \"agent\":\"appointment_assistant\",\"role\":\"prospect\",\"lang\":\"es\"}\n\
         {\"text\":\"¿Cuánto me saldría la cuota de la hipoteca a 30 años?\",\
          \"agent\":\"searcher_assistant\",\"role\":\"prospect\",\"lang\":\"es\"}\n",
    )
    .unwrap();
    let output = zaguan(&["prompts", "eval", file.to_str().unwrap(), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let json = &json["corpora"][0];
    assert_eq!(json["evaluation"]["all"]["lines"], 2, "{json}");
    let misroutes = json["evaluation"]["misroutes"].as_array().unwrap();
    assert_eq!(misroutes.len(), 1, "{json}");
    assert_eq!(misroutes[0]["line"], 2);
    assert_eq!(misroutes[0]["routed"], "mortgage_loan_assistant");
    assert_eq!(output.status.code(), Some(1), "below the floor: {output:?}");

    std::fs::write(
        &file,
        "{\"text\":\"hola\",\"agent\":\"primary_assistant\"}\n",
    )
    .unwrap();
    let output = zaguan(&["prompts", "eval", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("line 1:"), "{error}");
}

/// An edit that empties the examples still loads, but `check` warns that routing fell below the
/// floor on the held-out corpus.
#[test]
fn prompts_check_warns_when_an_edit_drops_routing_below_the_floor() {
    let output = zaguan(&["prompts", "check", "prompts"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        text.contains("routing on held_out.jsonl: precision")
            && text.contains("routing on held_out_varied.jsonl: precision"),
        "{text}"
    );
    assert!(!text.contains("warning:"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(prompts_dir()).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // Drops the examples array, one line or many.
        let edited = match text.find("examples = [") {
            Some(start) => {
                let end = start + text[start..].find("]\n").unwrap() + 2;
                format!("{}{}", &text[..start], &text[end..])
            }
            None => text,
        };
        std::fs::write(dir.path().join(path.file_name().unwrap()), edited).unwrap();
    }
    let output = zaguan(&["prompts", "check", dir.path().to_str().unwrap()]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "still a valid set: {output:?}");
    assert!(
        text.contains("warning: routing on held_out.jsonl: recall"),
        "{text}"
    );
}

/// What the router was tuned on: the prompts' examples, `train` and `dev_varied`.
fn tuning_lines(registry: &AgentRegistry) -> Vec<String> {
    registry
        .agents()
        .flat_map(|agent| agent.examples.iter().cloned())
        .chain(corpus("train.jsonl").into_iter().map(|l| l.text))
        .chain(corpus("dev_varied.jsonl").into_iter().map(|l| l.text))
        .collect()
}

const HELD_OUT_FILES: [&str; 3] = ["held_out.jsonl", "held_out_varied.jsonl", "strangers"];

/// The held-out files measure routing, not memory: none of their lines is a near copy (a
/// character 3-gram or word Jaccard of 0.8 or more) of a line the router was tuned on or of
/// another held-out file's, and no keyword is backed by held-out lines alone.
#[test]
fn the_held_out_files_share_nothing_near_with_what_the_router_learned() {
    use zaguan::agents::leakage::{held_out_only, near_copies};
    let registry = registry();
    let tuning = tuning_lines(&registry);
    let tuning: Vec<&str> = tuning.iter().map(String::as_str).collect();
    let held: Vec<(&str, Vec<String>)> = HELD_OUT_FILES
        .iter()
        .map(|file| (*file, corpus(file).into_iter().map(|l| l.text).collect()))
        .collect();
    let mut leaks = Vec::new();
    for (i, (file, lines)) in held.iter().enumerate() {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        for copy in near_copies(&lines, &tuning) {
            leaks.push(format!(
                "{file}: «{}» ≈ tuning «{}» ({} {:.2})",
                lines[copy.held_out], tuning[copy.tuning], copy.measure, copy.jaccard
            ));
        }
        for (other, other_lines) in &held[i + 1..] {
            let other_lines: Vec<&str> = other_lines.iter().map(String::as_str).collect();
            for copy in near_copies(&lines, &other_lines) {
                leaks.push(format!(
                    "{file}: «{}» ≈ {other} «{}» ({} {:.2})",
                    lines[copy.held_out], other_lines[copy.tuning], copy.measure, copy.jaccard
                ));
            }
        }
    }
    let keywords: Vec<&str> = registry
        .agents()
        .flat_map(|agent| agent.keywords.iter().map(String::as_str))
        .collect();
    let all_held: Vec<&str> = held
        .iter()
        .flat_map(|(_, lines)| lines.iter().map(String::as_str))
        .collect();
    for keyword in held_out_only(&keywords, &all_held, &tuning) {
        leaks.push(format!("keyword «{keyword}» matches held-out lines only"));
    }
    leaks.sort();
    leaks.dedup();
    assert!(
        leaks.is_empty(),
        "{} leaks:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}

/// The check above fails on a copy planted in a held-out file: a tuning line with another
/// number and its accents dropped.
#[test]
fn a_tuning_line_planted_in_a_held_out_file_is_caught() {
    let registry = registry();
    let tuning = tuning_lines(&registry);
    let tuning: Vec<&str> = tuning.iter().map(String::as_str).collect();
    let original = tuning
        .iter()
        .find(|line| line.split_whitespace().count() >= 8)
        .unwrap();
    let planted = format!("{} 600123456", original.to_uppercase().replace('Á', "A"));
    let mut held = corpus("held_out.jsonl")
        .into_iter()
        .map(|l| l.text)
        .collect::<Vec<_>>();
    held.insert(17, planted);
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    let copies = zaguan::agents::leakage::near_copies(&held, &tuning);
    assert!(
        copies.iter().any(|c| c.held_out == 17),
        "the planted «{}» was not caught",
        held[17]
    );
}

/// An owner's words about their flat's visits («cuántas visitas ha tenido mi piso», «what did
/// people say after visiting my flat?») never go to the visit follow-up from an owner's number:
/// an owner has no visit of their own made (what the service reads for them).
#[test]
fn an_owners_lines_never_go_to_the_visit_follow_up() {
    let registry = registry();
    let mut owners = 0;
    for file in HELD_OUT_FILES {
        for line in corpus(file).iter().filter(|l| l.role == Role::Owner) {
            owners += 1;
            let asking = zaguan::agents::Asking {
                role: Role::Owner,
                situation: Some(zaguan::domain::Situation::default()),
            };
            let routed = registry.fast_route(&line.text, registry.primary_for(Role::Owner), asking);
            assert_ne!(
                routed.map(|a| a.name.as_str()),
                Some("visit_tracker_assistant"),
                "{file}: «{}»",
                line.text
            );
        }
    }
    assert!(owners >= 200, "{owners} owners' lines");
}

/// The visit follow-up needs a visit made (`fast_path_needs`): «¿qué tal fue?»-type words go
/// there from a contact who visited, and to the model from one who did not.
#[test]
fn the_visit_follow_up_is_entered_only_for_a_contact_who_visited() {
    use zaguan::agents::Asking;
    use zaguan::domain::Situation;
    let registry = registry();
    let primary = registry.primary_for(Role::Prospect);
    let text = "la visita que hicimos ayer nos gustó mucho, ¿qué opinaron los demás?";
    let routed = |situation| {
        registry
            .fast_route(
                text,
                primary,
                Asking {
                    role: Role::Prospect,
                    situation,
                },
            )
            .map(|a| a.name.to_string())
    };
    assert_eq!(
        routed(None).as_deref(),
        Some("visit_tracker_assistant"),
        "the words alone read as a follow-up"
    );
    let visited = Situation {
        past_visit: true,
        upcoming_appointment: false,
    };
    assert_eq!(
        routed(Some(visited)).as_deref(),
        Some("visit_tracker_assistant")
    );
    assert_eq!(routed(Some(Situation::default())), None);
    let upcoming = Situation {
        past_visit: false,
        upcoming_appointment: true,
    };
    assert_eq!(routed(Some(upcoming)), None);
}
