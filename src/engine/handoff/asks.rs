//! A message that, as a whole, plainly asks for a person — «quiero hablar con una persona»,
//! «con un agente», «humano», «operator», «falar com um atendente» — is answered like a
//! button, without a model: the staff on duty are told and the customer hears the truth. Only
//! a whole message made of such words counts; anything more («…con el agente que me enseñó el
//! ático»), and any negation («no quiero hablar con una persona»), goes to the assistants.

use crate::agents::keywords::tokens;

/// Who the customer wants, in the folded form of [`tokens`]: es, en, pt (and ca, fr, it, de,
/// the other languages the service detects).
const PERSON: &[&str] = &[
    // es
    "persona",
    "personas",
    "humano",
    "humana",
    "agente",
    "asesor",
    "asesora",
    "comercial",
    "operador",
    "operadora",
    "empleado",
    "empleada",
    "alguien",
    "gente",
    "encargado",
    "encargada",
    "responsable",
    "trabajador",
    "trabajadora",
    // en
    "person",
    "human",
    "agent",
    "operator",
    "someone",
    "somebody",
    "representative",
    "rep",
    "staff",
    "advisor",
    "adviser",
    // pt
    "pessoa",
    "atendente",
    "alguem",
    "consultor",
    "consultora",
    "corretor",
    "corretora",
    "funcionario",
    "funcionaria",
    // ca, fr, it, de
    "persone",
    "personne",
    "humain",
    "conseiller",
    "operatore",
    "mensch",
    "mitarbeiter",
];

/// Words that may stand around it in such a request, in the same folded form.
const AROUND: &[&str] = &[
    // es
    "quiero",
    "quisiera",
    "queria",
    "querria",
    "necesito",
    "prefiero",
    "puedo",
    "podria",
    "puedes",
    "podrias",
    "puede",
    "pueden",
    "podeis",
    "me",
    "gustaria",
    "hablar",
    "hablo",
    "habla",
    "contactar",
    "contacto",
    "con",
    "un",
    "una",
    "el",
    "la",
    "los",
    "las",
    "algun",
    "alguna",
    "de",
    "del",
    "verdad",
    "real",
    "reales",
    "carne",
    "y",
    "hueso",
    "favor",
    "por",
    "porfa",
    "porfavor",
    "pf",
    "pasame",
    "paseme",
    "pasas",
    "pasa",
    "ponme",
    "pongame",
    "comunicar",
    "comunicarme",
    "comunica",
    "comuniques",
    "atender",
    "atienda",
    "atiende",
    "hola",
    "buenas",
    "buenos",
    "dias",
    "tardes",
    "noches",
    "disculpa",
    "disculpe",
    "perdona",
    "perdone",
    "si",
    "es",
    "posible",
    "se",
    "que",
    "a",
    "al",
    "directamente",
    "ahora",
    "mismo",
    "ya",
    "equipo",
    "agencia",
    "oficina",
    "vuestro",
    "vuestra",
    "vuestros",
    "su",
    // en
    "i",
    "d",
    "m",
    "want",
    "would",
    "like",
    "to",
    "talk",
    "speak",
    "chat",
    "with",
    "an",
    "the",
    "please",
    "pls",
    "plz",
    "can",
    "could",
    "may",
    "let",
    "need",
    "get",
    "put",
    "through",
    "connect",
    "hi",
    "hello",
    "hey",
    "actual",
    "live",
    "from",
    "your",
    "team",
    "now",
    "right",
    "agency",
    "office",
    "is",
    "there",
    // pt
    "quero",
    "gostaria",
    "preciso",
    "posso",
    "pode",
    "podia",
    "falar",
    "com",
    "um",
    "uma",
    "o",
    "ola",
    "oi",
    "bom",
    "boa",
    "dia",
    "tarde",
    "noite",
    "ser",
    "atendido",
    "atendida",
    "da",
    "do",
    "vossa",
    "vosso",
    "sua",
    "seu",
    "agora",
    "equipa",
    "equipe",
    // ca, fr, it, de
    "vull",
    "parlar",
    "amb",
    "je",
    "veux",
    "parler",
    "avec",
    "une",
    "voglio",
    "parlare",
    "ich",
    "mochte",
    "moechte",
    "mit",
    "einem",
    "einer",
    "sprechen",
];

/// Words that turn the request around: with one, the assistants read the message.
const NEGATION: &[&str] = &[
    "no", "not", "don", "dont", "t", "nao", "nunca", "never", "sin", "without", "ne", "pas",
    "nicht", "kein", "keine",
];

/// The longest message read this way, in words: a request for a person is short.
const MAX_WORDS: usize = 14;

/// Whether `text`, as a whole, asks for a person.
pub fn asks_for_person(text: &str) -> bool {
    let words = tokens(text);
    if words.is_empty() || words.len() > MAX_WORDS {
        return false;
    }
    let mut person = false;
    for word in &words {
        let word = word.as_str();
        if NEGATION.contains(&word) {
            return false;
        }
        if PERSON.contains(&word) {
            person = true;
        } else if !AROUND.contains(&word) {
            return false;
        }
    }
    person
}

#[cfg(test)]
mod tests {
    use super::asks_for_person;

    #[test]
    fn a_plain_request_for_a_person_is_one_in_each_language() {
        for text in [
            "quiero hablar con una persona",
            "Quiero hablar con una persona, por favor",
            "con un agente",
            "humano",
            "HUMANO!!",
            "operator",
            "falar com um atendente",
            "Quero falar com uma pessoa",
            "I want to talk to a human",
            "can I speak to a real person please?",
            "hola, ¿puedo hablar con alguien de la agencia?",
            "pásame con un asesor",
            "una persona de verdad por favor",
            "Je veux parler à une personne",
        ] {
            assert!(asks_for_person(text), "{text}");
        }
    }

    #[test]
    fn anything_more_or_a_negation_goes_to_the_assistants() {
        for text in [
            "no quiero hablar con una persona",
            "puedo hablar con una persona porfavor? no quiero hablar con una maquina",
            "quiero hablar con el agente que me enseñó el ático de Colón",
            "quiero ver el piso con un agente el jueves",
            "agente inmobiliario en Valencia con piscina",
            "hola",
            "gracias",
            "¿a qué hora abrís el sábado?",
            "I don't need a person, thanks",
            "",
        ] {
            assert!(!asks_for_person(text), "{text}");
        }
    }
}
