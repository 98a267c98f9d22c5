use super::*;

/// The keyword lists of the prompts folder.
const AGENTS: &[(&str, &[&str])] = &[
    (
        "appointment_assistant",
        &[
            "cita",
            "visita",
            "agendar",
            "quedar",
            "ver la propiedad",
            "ver el piso",
            "cancelar cita",
            "cambiar cita",
        ],
    ),
    (
        "mortgage_loan_assistant",
        &[
            "hipoteca",
            "préstamo",
            "financiación",
            "cuota",
            "entrada",
            "banco",
            "interés",
            "euríbor",
        ],
    ),
    (
        "owner_info_assistant",
        &[
            "mi piso",
            "mi casa",
            "cómo va la venta",
            "ofertas recibidas",
            "bajar el precio",
            "propietario",
            "encargo",
            "documentación",
        ],
    ),
    (
        "property_assistant",
        &[
            "precio",
            "metros",
            "habitaciones",
            "fotos",
            "referencia",
            "disponible",
            "garaje",
            "comunidad",
        ],
    ),
    (
        "prospect_offer_assistant",
        &[
            "oferta",
            "ofrecer",
            "contraoferta",
            "negociar",
            "rebaja",
            "reservar",
            "señal",
            "arras",
        ],
    ),
    (
        "searcher_assistant",
        &[
            "busco",
            "buscar",
            "qué tenéis",
            "alquilar",
            "comprar",
            "presupuesto",
            "zona",
            "avisadme",
        ],
    ),
    (
        "visit_tracker_assistant",
        &[
            "cómo fue la visita",
            "opinión",
            "qué te pareció",
            "confirmo",
            "cuántas visitas",
            "visitas recibidas",
        ],
    ),
];

fn index_of(agents: &[(&str, &[&str])]) -> KeywordIndex {
    let owned: Vec<(&str, Vec<String>)> = agents
        .iter()
        .map(|(name, keywords)| (*name, keywords.iter().map(|k| k.to_string()).collect()))
        .collect();
    KeywordIndex::new(owned.iter().map(|(name, keywords)| (*name, keywords)))
}

fn index() -> KeywordIndex {
    index_of(AGENTS)
}

fn route_all<'a>(index: &'a KeywordIndex, text: &str) -> Option<&'a str> {
    index.route(text, |_| true)
}

/// What a prospect may reach: not the owner's own agent.
fn prospect(agent: &str) -> bool {
    agent != "owner_info_assistant"
}

#[test]
fn tokens_are_lowercase_accent_free_words() {
    assert_eq!(
        tokens("¿Según tú, el AÑO que viene? Euríbor+1,5%"),
        [
            "segun", "tu", "el", "ano", "que", "viene", "euribor", "1", "5"
        ]
    );
    assert_eq!(tokens("  ¡¡Hola!!  "), ["hola"]);
    assert!(tokens("").is_empty());
    assert!(tokens("👍🏼🙏 ... ?!").is_empty());
    // Already decomposed input folds the same way.
    assert_eq!(tokens("Inte\u{0301}re\u{0301}s"), ["interes"]);
}

#[test]
fn accents_and_case_do_not_matter() {
    let index = index();
    for text in [
        "Quiero AGENDAR una visita",
        "quiero agendar una visita",
        "Quiero Agéndar una visíta",
    ] {
        assert_eq!(
            route_all(&index, text),
            Some("appointment_assistant"),
            "{text}"
        );
    }
    for text in [
        "¿Cuánto me saldría la cuota de la hipoteca?",
        "Hipoteca",
        "que interés me darían",
        "que interes me darian",
        "¿Cómo está el Euríbor?",
        "EURIBOR",
        "necesito financiacion",
    ] {
        assert_eq!(
            route_all(&index, text),
            Some("mortgage_loan_assistant"),
            "{text}"
        );
    }
}

#[test]
fn keywords_match_whole_words_and_plurals() {
    let index = index();
    assert_eq!(route_all(&index, "Quiero solicitar información"), None);
    assert_eq!(route_all(&index, "Me han citado mañana"), None);
    assert_eq!(
        route_all(&index, "¿Tenéis citas libres el jueves?"),
        Some("appointment_assistant")
    );
    assert_eq!(
        route_all(&index, "Comparando hipotecas de varios bancos"),
        Some("mortgage_loan_assistant")
    );
    assert_eq!(
        route_all(&index, "¿Los intereses son fijos?"),
        Some("mortgage_loan_assistant")
    );
    // The plural allowance is for the message only: "fotos" is not matched by "foto".
    assert_eq!(route_all(&index, "mándame una foto"), None);
    assert_eq!(
        route_all(&index, "mándame fotos"),
        Some("property_assistant")
    );
}

#[test]
fn multi_word_keywords_match_across_punctuation() {
    let index = index();
    assert_eq!(
        route_all(&index, "¿Podría ver el piso?"),
        Some("appointment_assistant")
    );
    assert_eq!(
        route_all(&index, "me gustaría VER... el piso!!"),
        Some("appointment_assistant")
    );
    assert_eq!(
        route_all(&index, "¿Qué tenéis en el centro?"),
        Some("searcher_assistant")
    );
    // Every word must be there, in order.
    assert_eq!(route_all(&index, "el piso lo quiero ver"), None);
    // A plural of each word counts.
    assert_eq!(
        route_all(&index, "¿puedo ver las propiedades?"),
        Some("appointment_assistant")
    );
}

#[test]
fn a_longer_match_of_another_agent_hides_a_shorter_one() {
    let index = index();
    assert_eq!(
        index.matches("¿Cómo fue la visita de ayer?"),
        ["visit_tracker_assistant"]
    );
    assert_eq!(
        route_all(&index, "¿Cómo fue la visita de ayer?"),
        Some("visit_tracker_assistant")
    );
    assert_eq!(
        route_all(&index, "¿Cuántas visitas recibidas lleva?"),
        Some("visit_tracker_assistant")
    );
    assert_eq!(
        route_all(&index, "Quiero bajar el precio"),
        Some("owner_info_assistant")
    );
    // Only what lies inside is hidden: another "visita" elsewhere still counts.
    assert_eq!(
        index.matches("¿Cómo fue la visita? Quiero otra visita"),
        ["appointment_assistant", "visit_tracker_assistant"]
    );
}

#[test]
fn equal_matches_of_two_agents_are_ambiguous() {
    let index = index_of(&[("a_assistant", &["cita"]), ("b_assistant", &["Cita"])]);
    assert_eq!(index.matches("una cita"), ["a_assistant", "b_assistant"]);
    assert_eq!(route_all(&index, "una cita"), None);
}

#[test]
fn several_agents_let_the_llm_decide() {
    let index = index();
    let text = "quiero agendar una visita, ¿qué tal fue la anterior? opinión";
    assert_eq!(
        index.matches(text),
        ["appointment_assistant", "visit_tracker_assistant"]
    );
    assert_eq!(route_all(&index, text), None);
    assert_eq!(
        route_all(&index, "¿Cuál es el precio y la cuota de la hipoteca?"),
        None
    );
}

#[test]
fn no_match_routes_nowhere() {
    let index = index();
    for text in [
        "hola",
        "Buenas tardes, ¿quién eres?",
        "",
        "   ",
        "👍",
        "🏠🏠🏠",
    ] {
        assert!(index.matches(text).is_empty(), "{text:?}");
        assert_eq!(route_all(&index, text), None, "{text:?}");
    }
    assert_eq!(route_all(&index, "👍 cita"), Some("appointment_assistant"));
}

#[test]
fn unreachable_agents_neither_route_nor_hide() {
    let index = index();
    let text = "Quiero bajar el precio de mi casa";
    assert_eq!(route_all(&index, text), Some("owner_info_assistant"));
    // For a prospect the owner's "bajar el precio" does not hide "precio".
    assert_eq!(index.route(text, prospect), Some("property_assistant"));
    assert_eq!(
        index.route("¿Ofertas recibidas?", prospect),
        Some("prospect_offer_assistant")
    );
    assert_eq!(index.route("¿Cómo va la venta?", prospect), None);
    // Unreachable agents do not make a message ambiguous either.
    assert_eq!(
        index.route("Quiero ver el piso, es mi casa ideal", |agent| {
            agent != "owner_info_assistant"
        }),
        Some("appointment_assistant")
    );
    assert_eq!(index.route("Quiero agendar una visita", |_| false), None);
}

#[test]
fn empty_index_and_empty_keywords_match_nothing() {
    let empty = KeywordIndex::default();
    assert!(empty.matches("cita").is_empty());
    assert_eq!(route_all(&empty, "cita"), None);

    let blank = index_of(&[("a_assistant", &["", "¿?", "  ", "👍"])]);
    assert!(blank.matches("¿? 👍").is_empty());
    assert_eq!(route_all(&blank, ""), None);
}

#[test]
fn only_the_first_chars_are_scanned() {
    let index = index();
    // 2,000 two-byte chars: the cut is in chars, never inside one.
    let head = "é".repeat(MAX_SCANNED_CHARS - 5);
    assert_eq!(
        route_all(&index, &format!("{head} cita")),
        Some("appointment_assistant")
    );
    assert_eq!(route_all(&index, &format!("{head}é cita")), None);
    assert_eq!(route_all(&index, &format!("{head}ññ hipoteca")), None);
    assert_eq!(
        route_all(&index, &format!("hipoteca {}", "ñ".repeat(5_000))),
        Some("mortgage_loan_assistant")
    );
    let emoji = "🏠".repeat(MAX_SCANNED_CHARS + 1);
    assert!(index.matches(&emoji).is_empty());
}

#[test]
fn a_repeated_keyword_is_one_agent() {
    let index = index();
    let text = "cita ".repeat(400);
    assert_eq!(index.matches(&text), ["appointment_assistant"]);
    assert_eq!(route_all(&index, &text), Some("appointment_assistant"));
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Words the keywords are made of, and some that are not, so that random sentences match.
    const WORDS: &[&str] = &[
        "cita",
        "citas",
        "visita",
        "visitas",
        "cómo",
        "fue",
        "la",
        "el",
        "ver",
        "piso",
        "mi",
        "casa",
        "hipoteca",
        "Interés",
        "bajar",
        "precio",
        "ofertas",
        "recibidas",
        "cuántas",
        "opinión",
        "qué",
        "te",
        "pareció",
        "hola",
        "solicitar",
        "¿",
        "?",
        "👍",
    ];

    fn sentence() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(WORDS), 0..16).prop_map(|words| words.join(" "))
    }

    proptest! {
        #[test]
        fn matches_never_panics_on_arbitrary_text(text in any::<String>()) {
            let index = index();
            let matched = index.matches(&text);
            let routed = route_all(&index, &text);
            prop_assert!(routed.is_none() || matched.contains(&routed.unwrap()));
        }

        #[test]
        fn route_is_the_single_match(text in sentence(), reachable in any::<u8>()) {
            let index = index();
            let matched = index.matches(&text);
            let expected = match matched.as_slice() {
                [agent] => Some(*agent),
                _ => None,
            };
            prop_assert_eq!(route_all(&index, &text), expected);

            // With some agents unreachable, the answer is still a reachable agent whose
            // keywords the text holds.
            let allowed = |agent: &str| {
                let i = AGENTS.iter().position(|(name, _)| *name == agent).unwrap();
                reachable & (1 << i) != 0
            };
            if let Some(agent) = index.route(&text, allowed) {
                prop_assert!(allowed(agent));
                let entry = AGENTS.iter().find(|(name, _)| *name == agent).unwrap();
                let alone = index_of(std::slice::from_ref(entry));
                prop_assert_eq!(alone.matches(&text), [agent]);
            }
        }
    }
}
