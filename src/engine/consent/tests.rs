use super::{Consent, Offered, consent, consent_after};

/// The lines of a consent table: (message, expected, the bot's previous message).
fn table(file: &str) -> Vec<(&str, Option<Consent>, Option<&str>)> {
    file.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let mut columns = line.split('\t');
            let text = columns.next().expect("a message");
            let label = match columns.next().expect("a label").trim() {
                "opt_out" => Some(Consent::OptOut),
                "opt_in" => Some(Consent::OptIn),
                "none" => None,
                other => panic!("label {other}"),
            };
            (text, label, columns.next())
        })
        .collect()
}

/// How the lines of `file` were read wrong, by (wanted, read): the held-out table's
/// confusion, which says where the reader errs without showing its lines.
fn confusion(file: &str) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for (text, want, before) in table(file) {
        let offered = Offered {
            texts: before.iter().copied().collect(),
            choices: Vec::new(),
            about_consent: false,
        };
        let got = consent_after(text, &offered);
        if got != want {
            *counts
                .entry(format!(
                    "want {want:?} got {got:?} (context: {})",
                    before.is_some()
                ))
                .or_default() += 1;
        }
    }
    counts
}

fn misread(file: &str) -> (usize, Vec<String>) {
    let lines = table(file);
    let wrong = lines
        .iter()
        .filter_map(|(text, want, before)| {
            let offered = Offered {
                texts: before.iter().copied().collect(),
                choices: Vec::new(),
                about_consent: false,
            };
            let got = consent_after(text, &offered);
            (got != *want).then(|| format!("{text:?} after {before:?}: want {want:?}, got {got:?}"))
        })
        .collect();
    (lines.len(), wrong)
}

/// Measures a held-out table: prints its counts and confusion (never its lines, which are not
/// for the reader's authors to read) and holds it to `floor`.
fn measure_held_out(name: &str, file: &str, floor: f64) {
    let (lines, wrong) = misread(file);
    let right = lines - wrong.len();
    eprintln!(
        "consent held out{name}: {right}/{lines} read right; misread: {:?}",
        confusion(file)
    );
    assert!(lines >= 60, "{lines} lines");
    assert!(
        right as f64 >= floor * lines as f64,
        "{right}/{lines} held-out lines read right"
    );
}

#[test]
fn every_tuning_line_is_read_right() {
    let (lines, wrong) = misread(include_str!("../../../tests/data/consent/tuning.tsv"));
    assert!(lines >= 60, "{lines} lines");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Measured only: the held-out lines were written apart and never used to build the reader.
/// The aim is 97 %; on this third table (the first two were read while the reader was
/// built, and now tune it) it reads 145 of 151 (96.0 %): the floor below keeps that, and
/// what it leaves falls to the assistants' `record_opt_out`.
#[test]
fn the_held_out_lines_are_read_right_almost_always() {
    let file = include_str!("../../../tests/data/consent/held_out.tsv");
    measure_held_out("", file, 0.94);
}

/// Measured only, like the one above: a fourth writer's table, written by someone who read
/// neither the reader nor the other tables. 122 of 130 before the last two tuning passes
/// (on `tuning.tsv` only, each with a new writer's lines), 126 of 130 (96.9 %) after the third:
/// this table and the one above have been measured after every pass, so the fresh table below
/// is the one that says how the reader does on words nobody tuned it on.
#[test]
fn the_second_held_out_table_is_read_right() {
    let file = include_str!("../../../tests/data/consent/held_out_b.tsv");
    measure_held_out(" (second)", file, 0.95);
}

/// Measured only: a fifth writer's table (2026-12-02), written after the last tuning pass by
/// someone who read nothing of the reader or the other tables, and measured once that pass
/// was done; the floor keeps what it read then.
#[test]
fn the_third_held_out_table_is_read_right() {
    let file = include_str!("../../../tests/data/consent/held_out_c.tsv");
    measure_held_out(" (third)", file, 0.97);
}

#[test]
fn the_bots_own_acknowledgement_makes_its_keyword_consent() {
    let ack = Offered {
        texts: vec!["Hecho: no volverás a recibir recordatorios… escribe ALTA."],
        choices: Vec::new(),
        about_consent: true,
    };
    assert_eq!(consent_after("ALTA", &ack), Some(Consent::OptIn));
    let floors = Offered {
        texts: vec!["¿Lo prefieres en planta alta o baja?"],
        choices: Vec::new(),
        about_consent: false,
    };
    assert_eq!(consent_after("baja", &floors), None);
    assert_eq!(consent_after("Alta", &floors), None);
    assert_eq!(consent("baja"), Some(Consent::OptOut));
    // A button offers its word; a statement does not.
    let button = Offered {
        texts: vec!["¿Qué planta prefieres?"],
        choices: vec!["Planta baja", "Ático"],
        about_consent: false,
    };
    assert_eq!(consent_after("baja", &button), None);
    let news = Offered {
        texts: vec!["Novedades de la semana: el Euríbor baja en Madrid."],
        choices: Vec::new(),
        about_consent: false,
    };
    assert_eq!(consent_after("BAJA", &news), Some(Consent::OptOut));
}

#[tokio::test]
async fn record_opt_out_records_what_the_assistant_heard() {
    use crate::engine::Tool as _;
    use crate::store::{MemoryStore, UserStore as _};
    use std::sync::Arc;
    let store = Arc::new(MemoryStore::new());
    let tool = super::RecordOptOut::new(store.clone());
    let customer = crate::domain::WaId::parse("34611000555").unwrap();
    let context = crate::engine::ToolContext::new(
        customer.clone(),
        crate::domain::Role::Prospect,
        chrono::Utc::now(),
    );
    let output = tool
        .run(
            serde_json::json!({"said": "¿me podéis quitar de los avisos, que ya he alquilado?"}),
            &context,
        )
        .await
        .unwrap();
    assert!(
        output.text.starts_with("Done: no reminders"),
        "{}",
        output.text
    );
    let user = store.user(&customer).await.unwrap().unwrap();
    assert!(user.opted_out());
    assert_eq!(
        user.opt_out_source.as_deref(),
        Some("assistant:¿me podéis quitar de los avisos, que ya ")
    );
}
