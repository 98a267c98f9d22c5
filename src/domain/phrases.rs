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

/// Said once to a reaction (a 👍) on the message with a pending action's buttons: it is not a
/// yes, so nothing is done, and this is how to confirm `summary`.
pub fn reaction_to_confirmation(lang: Option<&str>, summary: &str) -> String {
    let summary = summary.trim().trim_end_matches('.');
    match lang.unwrap_or("es") {
        "en" => {
            format!("It isn't done yet: {summary}. To confirm it, tap «Confirm» or reply «yes».")
        }
        "pt" => format!(
            "Ainda não está feito: {summary}. Para o confirmar, toque em «Confirmar» ou responda «sim»."
        ),
        _ => format!(
            "Todavía no está hecho: {summary}. Para confirmarlo, pulsa «Confirmar» o responde «sí»."
        ),
    }
}

/// Said for a Confirm or Cancel button when nothing is pending.
pub const STALE_BUTTON: &str = "Esa confirmación ya no es válida: no hay nada pendiente de confirmar. ¿En qué te puedo ayudar?";

/// The day of the week in `lang` (es, en, pt; Spanish otherwise, for the translator).
fn weekday(lang: &str, day: chrono::Weekday) -> &'static str {
    const EN: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    const PT: [&str; 7] = [
        "segunda-feira",
        "terça-feira",
        "quarta-feira",
        "quinta-feira",
        "sexta-feira",
        "sábado",
        "domingo",
    ];
    let i = day.num_days_from_monday() as usize;
    match lang {
        "en" => EN[i],
        "pt" => PT[i],
        _ => weekday_es(day),
    }
}

/// A moment as a message in `lang` writes it: «jueves 03/12 a las 10:00», «Thursday 3 December
/// at 10:00», «quinta-feira, 3 de dezembro, às 10:00» (Spanish for other languages, for the
/// translator).
pub fn moment(lang: Option<&str>, at: chrono::NaiveDateTime) -> String {
    use chrono::{Datelike as _, Timelike as _};
    const EN_MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const PT_MONTHS: [&str; 12] = [
        "janeiro",
        "fevereiro",
        "março",
        "abril",
        "maio",
        "junho",
        "julho",
        "agosto",
        "setembro",
        "outubro",
        "novembro",
        "dezembro",
    ];
    let lang = lang.unwrap_or("es");
    let time = format!("{}:{:02}", at.hour(), at.minute());
    let month = at.month0() as usize;
    let name = weekday(lang, at.weekday());
    match lang {
        "en" => format!("{name} {} {} at {time}", at.day(), EN_MONTHS[month]),
        "pt" => format!("{name}, {} de {}, às {time}", at.day(), PT_MONTHS[month]),
        _ => {
            let at_the = if at.hour() == 1 { "a la" } else { "a las" };
            format!("{name} {:02}/{:02} {at_the} {time}", at.day(), at.month())
        }
    }
}

/// When the office opens next, as the customer is told it, from the local time `now`:
/// «hoy a partir de las 16:30», «mañana a partir de las 9:00», «el lunes 30 a partir de las
/// 9:00».
pub fn opening(
    lang: Option<&str>,
    now: chrono::NaiveDateTime,
    opens: chrono::NaiveDateTime,
) -> String {
    use chrono::{Datelike as _, Timelike as _};
    let lang = lang.unwrap_or("es");
    let time = format!("{}:{:02}", opens.hour(), opens.minute());
    let days = (opens.date() - now.date()).num_days();
    let day = opens.day();
    let name = weekday(lang, opens.weekday());
    match lang {
        "en" => match days {
            0 => format!("today from {time}"),
            1 => format!("tomorrow from {time}"),
            _ => format!("on {name} the {day}{} from {time}", ordinal_suffix(day)),
        },
        "pt" => match days {
            0 => format!("hoje a partir das {time}"),
            1 => format!("amanhã a partir das {time}"),
            _ => format!("na {name}, dia {day}, a partir das {time}"),
        },
        _ => {
            let from = if opens.hour() == 1 { "de la" } else { "de las" };
            match days {
                0 => format!("hoy a partir {from} {time}"),
                1 => format!("mañana a partir {from} {time}"),
                _ => format!("el {name} {day} a partir {from} {time}"),
            }
        }
    }
}

fn ordinal_suffix(day: u32) -> &'static str {
    match (day % 10, day % 100) {
        (1, n) if n != 11 => "st",
        (2, n) if n != 12 => "nd",
        (3, n) if n != 13 => "rd",
        _ => "th",
    }
}

/// Said when a person of the team was told just now, or had been already.
pub fn handoff_told(lang: Option<&str>) -> &'static str {
    match lang.unwrap_or("es") {
        "en" => {
            "I've let someone on our team know, and they'll write to you in this chat as soon as they can."
        }
        "pt" => {
            "Avisei uma pessoa da nossa equipa, que lhe vai escrever por este chat assim que puder."
        }
        _ => {
            "He avisado a una persona del equipo y te escribirá por este mismo chat en cuanto pueda."
        }
    }
}

/// Said when nobody is on duty: the team is told when the office opens (`when`, from
/// [`opening`]).
pub fn handoff_after_hours(lang: Option<&str>, when: &str) -> String {
    match lang.unwrap_or("es") {
        "en" => format!(
            "Our office is closed right now. I've left word for the team, and someone will write to you in this chat {when}."
        ),
        "pt" => format!(
            "Neste momento o escritório está fechado. Deixei o pedido à equipa, e uma pessoa vai escrever-lhe por este chat {when}."
        ),
        _ => format!(
            "Ahora mismo la oficina está cerrada. He dejado el aviso al equipo y una persona te escribirá por este chat {when}."
        ),
    }
}

/// Said when no one on the team can be told from here (no staff set up for it): how to reach
/// the agency instead, when known.
pub fn handoff_unreachable(lang: Option<&str>, contact: Option<&str>) -> String {
    let (text, with) = match lang.unwrap_or("es") {
        "en" => (
            "I'm sorry, I can't pass this on to a person from this chat.",
            "You can reach the agency directly:",
        ),
        "pt" => (
            "Lamento, não consigo passar isto a uma pessoa a partir deste chat.",
            "Pode contactar a agência diretamente:",
        ),
        _ => (
            "Lo siento, desde este chat no puedo pasar tu petición a una persona.",
            "Puedes contactar directamente con la agencia:",
        ),
    };
    match contact {
        Some(contact) => format!("{text} {with} {contact}"),
        None => text.to_owned(),
    }
}

/// The acknowledgement of an opt-out (BAJA, STOP): what stops, what does not, how to undo it.
pub fn opted_out(lang: Option<&str>) -> &'static str {
    match lang.unwrap_or("es") {
        "en" => {
            "Done: we won't send you reminders, alerts or news here any more. If you write to us, we'll still answer. To get them again, send START."
        }
        "pt" => {
            "Feito: não voltará a receber lembretes, avisos nem novidades nossas por aqui. Se nos escrever, continuamos a responder. Para voltar a recebê-los, escreva VOLTAR."
        }
        _ => {
            "Hecho: no volverás a recibir recordatorios, avisos ni novedades nuestras por aquí. Si nos escribes, te seguiremos respondiendo. Para volver a recibirlos, escribe ALTA."
        }
    }
}

/// The acknowledgement of an opt-in (ALTA, START).
pub fn opted_in(lang: Option<&str>) -> &'static str {
    match lang.unwrap_or("es") {
        "en" => "Done: you'll get our reminders and alerts here again. To stop them, send STOP.",
        "pt" => {
            "Feito: volta a receber os nossos lembretes e avisos por aqui. Para os parar, escreva SAIR."
        }
        _ => {
            "Hecho: volverás a recibir nuestros recordatorios y avisos por aquí. Para dejar de recibirlos, escribe BAJA."
        }
    }
}
