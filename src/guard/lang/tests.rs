use super::*;
use std::time::Instant;

/// lingua's languages in the order of [`SUPPORTED`].
pub(super) const LINGUA: [lingua::Language; LANGUAGES] = [
    lingua::Language::Spanish,
    lingua::Language::English,
    lingua::Language::Portuguese,
    lingua::Language::French,
    lingua::Language::German,
    lingua::Language::Italian,
    lingua::Language::Catalan,
];

const ALL: [&str; 7] = ["es", "en", "pt", "fr", "de", "it", "ca"];

fn detector() -> LanguageDetector {
    LanguageDetector::new(&ALL).unwrap()
}

/// The same lexicon and rules over lingua instead of whatlang, for the comparison.
fn with_lingua(low_accuracy: bool) -> LanguageDetector {
    let mut builder = lingua::LanguageDetectorBuilder::from_languages(&LINGUA);
    builder.with_preloaded_language_models();
    if low_accuracy {
        builder.with_low_accuracy_mode();
    }
    LanguageDetector::assemble([true; LANGUAGES], Statistical::Lingua(builder.build()))
}

const SPANISH_REPLY: &str = "¡Hola! Sí, el piso de la calle Mayor sigue disponible y tiene \
    tres habitaciones. El alquiler es de 950 € al mes con una fianza de dos mensualidades. \
    ¿Te viene bien visitarlo el jueves por la tarde?";
const ENGLISH_REPLY: &str = "Hi! Yes, the flat on Calle Mayor is still available and has \
    three bedrooms. The rent is €950 a month with a two-month deposit. Would Thursday \
    afternoon suit you for a viewing?";

#[test]
fn ok_from_a_spanish_user_keeps_spanish() {
    assert_eq!(detector().follow("ok", Some("es")).as_deref(), Some("es"));
}

#[test]
fn a_full_english_sentence_switches_to_english() {
    let detector = detector();
    let text = "Sorry, I don't speak Spanish. Is the apartment still available?";
    assert_eq!(detector.follow(text, Some("es")).as_deref(), Some("en"));
}

#[test]
fn replies_of_three_sentences_are_detected() {
    let detector = detector();
    assert_eq!(detector.detect(SPANISH_REPLY), Some("es"));
    assert_eq!(detector.detect(ENGLISH_REPLY), Some("en"));
}

#[test]
fn an_unknown_code_is_an_error_naming_it() {
    let error = LanguageDetector::new(&["es", "xx"]).err().unwrap();
    assert!(error.contains("\"xx\""), "{error}");
    let error = LanguageDetector::new(&["es", "nl"]).err().unwrap();
    assert!(error.contains("\"nl\""), "{error}");
    assert!(LanguageDetector::new(&[]).is_err());
    assert!(LanguageDetector::new(&["ES", " pt "]).is_ok());
}

#[test]
fn emoji_only_is_no_language() {
    let detector = detector();
    for text in ["👍", "😂😂", "🙏🏻", "❤️", "", "   "] {
        assert_eq!(detector.detect(text), None, "{text:?}");
        assert_eq!(detector.follow(text, None), None, "{text:?}");
        assert_eq!(detector.follow(text, Some("pt")).as_deref(), Some("pt"));
    }
}

#[test]
fn texts_without_language_evidence_keep_the_previous_language() {
    let detector = detector();
    for text in [
        "12:30",
        "28013",
        "+34 612 345 678",
        "P-102",
        "C/ Mayor 5",
        "Calle Serrano 45, 3ºB",
        "jajaja",
        "si",
        "claro",
        "https://www.idealista.com/inmueble/12345678/",
    ] {
        assert_eq!(
            detector.follow(text, Some("en")).as_deref(),
            Some("en"),
            "{text}"
        );
        assert_eq!(detector.follow(text, None), None, "{text}");
    }
}

#[test]
fn courtesy_sets_an_unknown_language_but_does_not_override_a_known_one() {
    let detector = detector();
    assert_eq!(detector.detect("gracias"), Some("es"));
    assert_eq!(detector.follow("gracias", None).as_deref(), Some("es"));
    assert_eq!(
        detector.follow("ok gracias", Some("en")).as_deref(),
        Some("en")
    );
    assert_eq!(
        detector.follow("thanks!", Some("es")).as_deref(),
        Some("es")
    );
    assert_eq!(detector.follow("bon dia", None).as_deref(), Some("ca"));
    assert_eq!(
        detector.follow("bon dia", Some("es")).as_deref(),
        Some("es")
    );
    assert_eq!(detector.follow("obrigado", None).as_deref(), Some("pt"));
}

#[test]
fn the_previous_code_is_returned_as_given() {
    let detector = detector();
    assert_eq!(
        detector.follow("ok", Some("es-ES")).as_deref(),
        Some("es-ES")
    );
    let text = "Hello, is the flat still available?";
    assert_eq!(detector.follow(text, Some("es-ES")).as_deref(), Some("en"));
}

#[test]
fn only_served_languages_are_detected() {
    let spanish_and_english = LanguageDetector::new(&["es", "en"]).unwrap();
    assert_eq!(
        spanish_and_english.detect("obrigado, tenho interesse"),
        None
    );
    let spanish_only = LanguageDetector::new(&["es"]).unwrap();
    assert_eq!(spanish_only.detect(ENGLISH_REPLY), None);
    assert_eq!(spanish_only.detect(SPANISH_REPLY), Some("es"));
}

#[test]
fn supported_codes() {
    assert!(is_supported("es") && is_supported("CA") && is_supported(" pt "));
    assert!(!is_supported("nl") && !is_supported("") && !is_supported("es-ES"));
    assert_eq!(SUPPORTED.join(","), ALL.join(","));
}

#[test]
fn is_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<LanguageDetector>();
}

/// Rows of a fixture: every non-comment line after the header, split on tabs.
fn fixture(name: &str) -> Vec<Vec<String>> {
    let path = format!("{}/tests/fixtures/lang/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .skip(1)
        .map(|line| line.split('\t').map(str::to_string).collect())
        .collect()
}

fn follow_accuracy(detector: &LanguageDetector, name: &str) -> (usize, usize) {
    let rows = fixture(name);
    let right = rows
        .iter()
        .filter(|row| {
            let previous = (row[0] != "-").then_some(row[0].as_str());
            let expected = (row[2] != "-").then_some(row[2].as_str());
            detector.follow(&row[1], previous).as_deref() == expected
        })
        .count();
    (right, rows.len())
}

/// The figures behind the choice of whatlang (module documentation). Run in release:
/// `cargo test --release --lib guard::lang::tests::statistical_layer_comparison --
/// --ignored --nocapture`
#[test]
#[ignore = "measurement: run on demand, in release"]
fn statistical_layer_comparison() {
    let long_reply = format!(
        "{SPANISH_REPLY} Si lo prefieres, te envío antes más fotos del salón y de la cocina, \
         y también el plano de la vivienda. La comunidad incluye piscina, trastero y una \
         plaza de garaje, y los gastos de comunidad son de 60 € al mes."
    );
    assert!(long_reply.chars().count() >= 400);
    for (name, detector) in [
        ("whatlang", detector()),
        ("lingua low accuracy", with_lingua(true)),
        ("lingua high accuracy", with_lingua(false)),
    ] {
        for set in ["short_messages.tsv", "held_out.tsv"] {
            let (right, total) = follow_accuracy(&detector, set);
            let percent = 100.0 * right as f64 / total as f64;
            println!("{name:22} {set:20} {right}/{total} = {percent:.1} %");
        }
        let replies = fixture("replies.tsv");
        let right = replies
            .iter()
            .filter(|row| detector.detect(&row[0]) == Some(row[1].as_str()))
            .count();
        println!("{name:22} replies.tsv          {right}/{}", replies.len());
        for text in ["ok gracias", "el casero no contesta", long_reply.as_str()] {
            let calls = 2_000;
            let start = Instant::now();
            for _ in 0..calls {
                std::hint::black_box(detector.follow(std::hint::black_box(text), Some("es")));
            }
            let micros = start.elapsed().as_secs_f64() * 1e6 / f64::from(calls);
            let chars = text.chars().count();
            println!("{name:22} {chars:4} chars: {micros:7.1} µs per call");
        }
    }
}

/// lingua's memory, alone in its process (its models stay mapped once read). Run with
/// `cargo test --release --lib guard::lang::tests::lingua_memory -- --ignored --nocapture`
#[test]
#[ignore = "measurement: run on demand, alone in its process"]
fn lingua_memory() {
    let status = || {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .filter(|line| {
                ["VmRSS", "RssAnon", "RssFile"]
                    .iter()
                    .any(|k| line.starts_with(k))
            })
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("before:             {}", status());
    let detector = with_lingua(false);
    println!("after building:     {}", status());
    for set in ["short_messages.tsv", "held_out.tsv"] {
        follow_accuracy(&detector, set);
    }
    for row in fixture("replies.tsv") {
        detector.detect(&row[0]);
    }
    println!("after the fixtures: {}", status());
}
