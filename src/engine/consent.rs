//! Opt-out and opt-in, without a model. A whole message that is an opt-out word — STOP, BAJA,
//! PARAR, «no quiero recibir más mensajes», UNSUBSCRIBE, SAIR… — stops every proactive message
//! to that contact (reminders, saved-search alerts, re-engagement); START, ALTA, «volver a
//! recibir», SUBSCRIBE… bring them back. Case, accents, punctuation and a «por favor» around it
//! do not matter; anything more («¿cómo me doy de baja de la visita?») goes to the assistants.
//! Meta lowers the quality rating of numbers whose messages are ignored or blocked, and a low
//! rating caps or stops the number: honouring the opt-out at once protects the number.

use crate::agents::keywords::tokens;

/// What a message says about proactive messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Stop writing to me first.
    OptOut,
    /// Write to me again.
    OptIn,
}

/// Whole-message opt-outs, in the folded form of [`tokens`] joined by spaces.
const OPT_OUT: &[&str] = &[
    // es
    "baja",
    "de baja",
    "darme de baja",
    "dame de baja",
    "dadme de baja",
    "me doy de baja",
    "quiero darme de baja",
    "parar",
    "stop",
    "no quiero recibir mas mensajes",
    "no quiero recibir mensajes",
    "no quiero mas mensajes",
    "no mas mensajes",
    "no me escribais mas",
    "no me escribas mas",
    "no me escriban mas",
    "dejad de escribirme",
    "deja de escribirme",
    "dejen de escribirme",
    "no quiero recibir mas avisos",
    "cancelar suscripcion",
    // en
    "unsubscribe",
    "opt out",
    "optout",
    "stop messages",
    "stop messaging me",
    "stop sending messages",
    "no more messages",
    "remove me",
    "stop all",
    // pt
    "sair",
    "descadastrar",
    "pare",
    "parar mensagens",
    "nao quero receber mais mensagens",
    "nao quero mais mensagens",
    "cancelar inscricao",
    // ca, fr, it, de
    "baixa",
    "desabonner",
    "desinscrire",
    "arret",
    "disiscrivimi",
    "annulla iscrizione",
    "abmelden",
];

/// Whole-message opt-ins, in the same form.
const OPT_IN: &[&str] = &[
    // es
    "alta",
    "de alta",
    "darme de alta",
    "dame de alta",
    "volver a recibir",
    "quiero volver a recibir",
    "quiero volver a recibir mensajes",
    "quiero volver a recibir avisos",
    "reanudar",
    // en
    "start",
    "subscribe",
    "opt in",
    "optin",
    "resume",
    "unstop",
    // pt
    "voltar",
    "voltar a receber",
    "quero voltar a receber",
    "reativar",
    // ca, fr, it, de
    "alta de nou",
    "reabonner",
    "iscrivimi",
    "anmelden",
];

/// Words that may come with it without changing what it says.
const COURTESY: &[&str] = &[
    "por", "favor", "porfa", "porfavor", "please", "pls", "gracias", "thanks", "thank", "you",
    "obrigado", "obrigada", "ya", "ok", "vale", "hola", "hi", "hello", "ola", "oi",
];

/// What `text`, as a whole, says about proactive messages, if anything.
pub fn consent(text: &str) -> Option<Consent> {
    let words: Vec<String> = tokens(text)
        .into_iter()
        .filter(|w| !COURTESY.contains(&w.as_str()))
        .collect();
    if words.is_empty() || words.len() > 8 {
        return None;
    }
    let said = words.join(" ");
    if OPT_OUT.contains(&said.as_str()) {
        Some(Consent::OptOut)
    } else if OPT_IN.contains(&said.as_str()) {
        Some(Consent::OptIn)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{Consent, consent};

    #[test]
    fn opt_out_and_opt_in_words_are_read_whatever_their_case_accents_and_courtesy() {
        for text in [
            "BAJA",
            "baja.",
            "Stop",
            "STOP!!",
            "PARAR",
            "No quiero recibir más mensajes",
            "no quiero recibir mas mensajes por favor",
            "UNSUBSCRIBE",
            "sair",
            "Não quero receber mais mensagens",
            "darme de baja, gracias",
        ] {
            assert_eq!(consent(text), Some(Consent::OptOut), "{text}");
        }
        for text in [
            "ALTA",
            "start",
            "START please",
            "volver a recibir",
            "SUBSCRIBE",
            "voltar a receber",
        ] {
            assert_eq!(consent(text), Some(Consent::OptIn), "{text}");
        }
    }

    #[test]
    fn anything_more_is_for_the_assistants() {
        for text in [
            "¿cómo me doy de baja de la visita del jueves?",
            "quiero dar de baja mi anuncio",
            "stop, espera, que me he equivocado de piso",
            "para el jueves mejor",
            "cancelar",
            "start the viewing at 5",
            "hola",
            "",
        ] {
            assert_eq!(consent(text), None, "{text}");
        }
    }
}
