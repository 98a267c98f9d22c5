//! The fixed words the customer reads, per language: one home for them, so the engine, the
//! guard and the tools say the same thing the same way (and a translator finds them in one
//! place).

/// The day of the week as a Spanish agency says it.
pub fn weekday_es(day: chrono::Weekday) -> &'static str {
    const DAYS: [&str; 7] = [
        "lunes",
        "martes",
        "miércoles",
        "jueves",
        "viernes",
        "sábado",
        "domingo",
    ];
    DAYS[day.num_days_from_monday() as usize]
}

/// Said when nothing else can be (the model down, a runaway turn, a reply the guard could not
/// keep): short, in the user's language (Spanish when unknown).
pub fn apology(lang: Option<&str>) -> &'static str {
    match lang.unwrap_or("es") {
        "en" => "Sorry, I can't answer that properly right now. Please try again in a few minutes.",
        "pt" => {
            "Desculpe, agora não consigo responder bem. Por favor, tente novamente em alguns minutos."
        }
        "fr" => {
            "Désolé, je ne peux pas bien vous répondre pour le moment. Réessayez dans quelques minutes."
        }
        "de" => {
            "Entschuldigung, ich kann gerade nicht richtig antworten. Bitte versuchen Sie es in ein paar Minuten erneut."
        }
        "it" => "Mi dispiace, ora non riesco a rispondere bene. Riprova tra qualche minuto.",
        "ca" => "Ho sento, ara mateix no puc atendre't bé. Torna-ho a provar d'aquí a uns minuts.",
        _ => {
            "Lo siento, ahora mismo no puedo atenderte bien. Por favor, inténtalo de nuevo en unos minutos."
        }
    }
}

/// The polite answer to media the assistants cannot read.
pub fn media_answer(lang: Option<&str>) -> &'static str {
    match lang.unwrap_or("es") {
        "en" => {
            "Thanks! I can't open images, audio or files here yet. Could you tell me in writing what you need?"
        }
        "pt" => {
            "Obrigado! Ainda não consigo abrir imagens, áudios ou ficheiros aqui. Pode escrever-me o que precisa?"
        }
        "fr" => {
            "Merci ! Je ne peux pas encore ouvrir les images, audios ou fichiers ici. Pouvez-vous m'écrire ce dont vous avez besoin ?"
        }
        "de" => {
            "Danke! Bilder, Audios oder Dateien kann ich hier noch nicht öffnen. Können Sie mir schreiben, was Sie brauchen?"
        }
        "it" => {
            "Grazie! Qui non riesco ancora ad aprire immagini, audio o file. Può scrivermi di cosa ha bisogno?"
        }
        "ca" => {
            "Gràcies! Encara no puc obrir imatges, àudios ni fitxers aquí. Em pots escriure què necessites?"
        }
        _ => {
            "¡Gracias! Por aquí todavía no puedo abrir imágenes, audios ni archivos. ¿Me cuentas por escrito qué necesitas?"
        }
    }
}

/// Said for a Confirm or Cancel button of an action that is no longer pending, before the
/// pending one is shown again with its own buttons.
pub const STALE_BUTTON_REASKED: &str =
    "Esa confirmación ya no es válida. Esto es lo que queda pendiente de confirmar:";

/// Said for a Confirm or Cancel button when nothing is pending.
pub const STALE_BUTTON: &str = "Esa confirmación ya no es válida: no hay nada pendiente de confirmar. ¿En qué te puedo ayudar?";
