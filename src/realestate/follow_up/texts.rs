//! What the follow-ups say, in the business's language (guard_translator says it in each
//! contact's), and their buttons' titles, which it does not translate: in the contact's.

use crate::domain::WaId;
use crate::realestate::Notice;
use crate::store::ReplyButton;

/// The first words of an agent's notice, and the template's `change`.
pub fn change(notice: Notice) -> &'static str {
    match notice {
        Notice::Moved => "Visita cambiada",
        Notice::Cancelled => "Visita cancelada",
        _ => "Nueva visita",
    }
}

#[allow(clippy::too_many_arguments)]
pub fn agent_notice(
    change: &str,
    customer: &str,
    wa_id: &WaId,
    property_id: &str,
    title: &str,
    address: &str,
    when: &str,
    link: &str,
) -> String {
    let customer = if customer.is_empty() {
        "un cliente".to_owned()
    } else {
        customer.to_owned()
    };
    let address = if address.is_empty() {
        String::new()
    } else {
        format!(", {address}")
    };
    format!(
        "{change}: {customer} (+{}) · {property_id} {title}{address} · {when}. Conversación: {link}",
        wa_id.as_str()
    )
}

pub fn outcome_question(customer: &str, property_id: &str, title: &str, when: &str) -> String {
    let customer = if customer.is_empty() {
        "el cliente"
    } else {
        customer
    };
    format!(
        "¿Cómo fue la visita de {customer} a {property_id} {title} ({when})? Pulsa un botón para \
         anotarlo."
    )
}

pub fn outcome_buttons(appointment_id: &str, lang: Option<&str>) -> Vec<ReplyButton> {
    let (done, no_show, cancelled) = match lang.unwrap_or("es") {
        "en" => ("Done", "No-show", "Cancelled"),
        "pt" => ("Realizada", "Não compareceu", "Cancelada"),
        _ => ("Realizada", "No vino", "Cancelada"),
    };
    vec![
        ReplyButton::new(format!("visit:{appointment_id}:done"), done),
        ReplyButton::new(format!("visit:{appointment_id}:no_show"), no_show),
        ReplyButton::new(format!("visit:{appointment_id}:cancelled"), cancelled),
    ]
}

pub fn feedback_question(property_id: &str, title: &str) -> String {
    format!(
        "¡Gracias por venir a ver {property_id} {title}! ¿Qué te pareció? Pulsa un botón y, si \
         quieres, cuéntanos algo más."
    )
}

pub fn feedback_buttons(visit_id: &str, lang: Option<&str>) -> Vec<ReplyButton> {
    let (yes, no, again) = match lang.unwrap_or("es") {
        "en" => ("I'm interested", "Not for me", "See it again"),
        "pt" => ("Interessa-me", "Não me convence", "Quero voltar a ver"),
        // A reply button title has at most 20 characters (the template's quick reply says it in full).
        _ => ("Me interesa", "No me convence", "Verlo otra vez"),
    };
    vec![
        ReplyButton::new(format!("visit_feedback:{visit_id}:interested"), yes),
        ReplyButton::new(format!("visit_feedback:{visit_id}:not_interested"), no),
        ReplyButton::new(format!("visit_feedback:{visit_id}:again"), again),
    ]
}

pub fn no_show(property_id: &str, title: &str) -> String {
    format!(
        "Hoy te esperábamos para ver {property_id} {title} y no pudimos coincidir. ¿Quieres que \
         busquemos otro día y hora? Dime cuándo te viene bien."
    )
}

pub fn offer_received(
    to: &str,
    property_id: &str,
    title: &str,
    amount: &str,
    conditions: &str,
) -> String {
    let conditions = if conditions.is_empty() {
        String::new()
    } else {
        format!(" Condiciones: {conditions}.")
    };
    format!(
        "Hola {to}: hay una oferta de {amount} por {property_id} {title}.{conditions} ¿Qué \
         respondemos? Pulsa Aceptar, Rechazar o Contraoferta."
    )
}

pub fn offer_buttons(offer_id: &str, lang: Option<&str>) -> Vec<ReplyButton> {
    let (accept, reject, counter) = match lang.unwrap_or("es") {
        "en" => ("Accept", "Reject", "Counter-offer"),
        "pt" => ("Aceitar", "Rejeitar", "Contraproposta"),
        _ => ("Aceptar", "Rechazar", "Contraoferta"),
    };
    vec![
        ReplyButton::new(format!("offer:{offer_id}:accept"), accept),
        ReplyButton::new(format!("offer:{offer_id}:reject"), reject),
        ReplyButton::new(format!("offer:{offer_id}:counter"), counter),
    ]
}

pub fn counter_buttons(offer_id: &str, lang: Option<&str>) -> Vec<ReplyButton> {
    let accept = match lang.unwrap_or("es") {
        "en" => "Accept it",
        "pt" => "Aceitar",
        _ => "Aceptar",
    };
    vec![ReplyButton::new(
        format!("counter:{offer_id}:accept"),
        accept,
    )]
}

pub fn countered(property_id: &str, title: &str, offered: &str, counter: &str) -> String {
    format!(
        "El propietario ha respondido a tu oferta de {offered} por {property_id} {title} con \
         una contraoferta de {counter}. Si te encaja, pulsa Aceptar; si no, dime qué quieres \
         hacer."
    )
}

pub fn rejected(property_id: &str, title: &str, amount: &str) -> String {
    format!(
        "El propietario no ha aceptado tu oferta de {amount} por {property_id} {title}. Si \
         quieres, puedes hacer otra oferta o buscamos otras opciones."
    )
}

/// `agent`: the agent told of it, by name.
pub fn accepted(property_id: &str, title: &str, amount: &str, agent: Option<&str>) -> String {
    let next = match agent {
        Some(agent) => format!(" Se lo he comunicado a {agent} para los siguientes pasos."),
        None => String::new(),
    };
    format!(
        "¡Buenas noticias! Tu oferta de {amount} por {property_id} {title} está aceptada.{next}"
    )
}

pub fn accepted_to_agent(
    customer: &str,
    wa_id: &WaId,
    property_id: &str,
    title: &str,
    amount: &str,
    by: &str,
) -> String {
    let customer = if customer.is_empty() {
        "un cliente"
    } else {
        customer
    };
    format!(
        "Oferta aceptada: {customer} (+{}) · {property_id} {title} · {amount} (respondió \
         {by}). Marcar la propiedad como reservada lo haces tú.",
        wa_id.as_str()
    )
}

pub fn agenda_line(start: &str, place: &str, customer: &str, wa_id: &WaId) -> String {
    let customer = if customer.is_empty() {
        "un cliente"
    } else {
        customer
    };
    format!("{start} · {place} · {customer} (+{})", wa_id.as_str())
}

pub fn agenda(name: &str, lines: &[String]) -> String {
    let mut text = format!("Buenos días, {name}. Tus visitas de hoy:");
    for line in lines {
        text.push_str("\n- ");
        text.push_str(line);
    }
    text
}
