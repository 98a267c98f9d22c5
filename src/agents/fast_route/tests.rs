use super::reading::{Clause, negated_words};
use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn router() -> FastRouter {
    let appointments = strings(&[
        "quiero agendar una visita",
        "puedo ver el piso el jueves",
        "cambia mi cita de mañana",
        "cuando puedo ir a verlo",
    ]);
    let mortgages = strings(&[
        "cuanto me saldria la hipoteca",
        "que entrada necesito",
        "me financiais la compra",
        "cuota mensual a 30 años",
    ]);
    let primary = strings(&[
        "hola buenas",
        "gracias",
        "no quiero una cita",
        "quienes sois",
        "adios",
    ]);
    let appointment_keywords = strings(&["cita", "visita", "agendar"]);
    let mortgage_keywords = strings(&["hipoteca", "financiación", "cuota"]);
    FastRouter::train(
        [
            (
                "appointment_assistant",
                appointments.as_slice(),
                appointment_keywords.as_slice(),
            ),
            (
                "mortgage_loan_assistant",
                mortgages.as_slice(),
                mortgage_keywords.as_slice(),
            ),
        ],
        &primary,
    )
}

#[test]
fn routes_what_it_learned_and_abstains_on_greetings() {
    let router = router();
    assert_eq!(
        router
            .decide("Quiero agendar una visita", |_| true, None)
            .agent(),
        Some("appointment_assistant")
    );
    assert_eq!(
        router
            .decide("cuanto me saldria la hipoteca", |_| true, None)
            .agent(),
        Some("mortgage_loan_assistant")
    );
    assert!(matches!(
        router.decide("hola buenas", |_| true, None),
        Decision::Abstain(Abstention::Primary { .. })
    ));
}

#[test]
fn a_negated_request_is_not_routed() {
    let router = router();
    assert_eq!(
        router.decide("No quiero una cita", |_| true, None).agent(),
        None
    );
}

#[test]
fn an_agent_the_role_cannot_reach_is_out_of_the_reading() {
    let router = router();
    let decision = router.decide(
        "Quiero agendar una visita",
        |agent| agent != "appointment_assistant",
        None,
    );
    assert_ne!(decision.agent(), Some("appointment_assistant"));
    let reading = router
        .read_for("Quiero agendar una visita", |agent| {
            agent != "appointment_assistant"
        })
        .unwrap();
    assert_ne!(reading.agent, Some("appointment_assistant"));
}

#[test]
fn the_holder_keeps_its_own_messages() {
    let router = router();
    assert_eq!(
        router.decide(
            "Quiero agendar una visita",
            |_| true,
            Some("appointment_assistant")
        ),
        Decision::Abstain(Abstention::Holder)
    );
}

#[test]
fn nothing_to_read_or_nothing_learned_abstains() {
    let router = router();
    for text in ["", "👍", "   ", "?!"] {
        assert_eq!(
            router.decide(text, |_| true, None),
            Decision::Abstain(Abstention::Empty),
            "{text:?}"
        );
    }
    let empty = FastRouter::train([], &[]);
    assert_eq!(
        empty.decide("quiero una cita", |_| true, None),
        Decision::Abstain(Abstention::Empty)
    );
}

#[test]
fn two_requests_in_one_message_abstain() {
    let router = router();
    let text = "quiero agendar una visita y de paso cuanto me saldria la hipoteca";
    assert_eq!(
        clauses(text),
        [
            Clause {
                text: "quiero agendar una visita".into(),
                cued: false
            },
            Clause {
                text: "cuanto me saldria la hipoteca".into(),
                cued: true
            }
        ]
    );
    assert!(router.read(text).unwrap().two_requests);
    assert_eq!(router.decide(text, |_| true, None).agent(), None);
    // One request in two sentences is still one.
    let text = "Quiero agendar una visita. Puedo ver el piso el jueves?";
    assert_eq!(clauses(text).len(), 2);
    assert!(!router.read(text).unwrap().two_requests);
}

#[test]
fn the_nearest_example_backs_a_reading_only_when_it_is_of_the_same_agent() {
    let router = router();
    // No keyword names it, but it is an appointments example word for word.
    let reading = router.read("puedo ver el piso el jueves").unwrap();
    assert_eq!(reading.agent, Some("appointment_assistant"));
    assert!(!reading.keywords_agree && !reading.keywords_conflict);
    assert!(
        reading.neighbour.is_some_and(|alike| alike > 0.99),
        "{reading:?}"
    );
    // A greeting's nearest example is a greeting: nothing backs a subgraph.
    let reading = router.read("hola buenas tardes").unwrap();
    assert_eq!(reading.agent, None);
    assert_eq!(reading.neighbour, None);
    // Keywords of another agent are a conflict, whatever the model reads.
    let reading = router.read("cuando puedo ir a verlo, y la cuota?").unwrap();
    assert!(reading.keywords_conflict || reading.agent == Some("mortgage_loan_assistant"));
}

#[test]
fn training_is_deterministic() {
    let (a, b) = (router(), router());
    for text in ["una cita el lunes", "hipoteca fija o variable", "hola"] {
        assert_eq!(a.read(text), b.read(text));
    }
}

#[test]
fn negation_covers_the_next_words_only() {
    let words = strings(&["no", "quiero", "una", "cita", "sino", "info"]);
    assert_eq!(
        negated_words(&words, 3),
        [false, true, true, true, false, false]
    );
    let words = strings(&["i", "don", "t", "want", "a", "visit"]);
    assert_eq!(
        negated_words(&words, 3),
        [false, false, false, true, true, true]
    );
}

#[test]
fn a_message_carrying_on_is_read_as_such() {
    use super::reading::continues;
    for text in [
        "y el de la playa?",
        "vale, y si ofrezco 200?",
        "tá, e pode visitar amanhã?",
        "ok and the other one?",
    ] {
        assert!(continues(text), "{text}");
    }
    for text in [
        "quiero ver el piso",
        "ok me gusta, cuánto sería la cuota?",
        "Oye y otra cosa, ¿cuánto me saldría la cuota de la hipoteca?",
        "vale, y de paso, ¿tenéis algo en Ruzafa?",
        "",
    ] {
        assert!(!continues(text), "{text}");
    }
}

#[test]
fn segments_cut_the_context_from_the_request() {
    use super::reading::segments;
    let parts: Vec<String> =
        segments("el banco ya me aprobó la hipoteca, puedo ir a verlo otra vez")
            .into_iter()
            .map(|s| s.text)
            .collect();
    assert_eq!(
        parts,
        [
            "el banco ya me aprobo la hipoteca",
            "puedo ir a verlo otra vez"
        ]
    );
    let parts = segments("cuantas visitas tuvo mi depto y me buscas uno mas chico");
    assert_eq!(parts.len(), 2);
    assert!(parts[1].cued);
}

#[test]
fn a_part_reading_as_another_agent_stops_the_route() {
    let router = router();
    // Alone, the request goes straight to appointments.
    let request = "quiero agendar una visita el jueves";
    assert_eq!(
        router.decide(request, |_| true, None).agent(),
        Some("appointment_assistant")
    );
    // After a part about mortgages, it is left to the LLM.
    let text = "me financiais la compra, quiero agendar una visita el jueves";
    let reading = router.read(text).unwrap();
    assert!(reading.rival >= Params::DEFAULT.rival, "{reading:?}");
    assert_eq!(router.decide(text, |_| true, None).agent(), None);
}
