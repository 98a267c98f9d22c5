//! How each portal lays out its lead e-mail (the layouts and their public sources are in
//! `tests/data/leads/README.md`):
//! - **Idealista** (`reply@idealista.com`, before `noreply.pro.es@idealista.com`): no labels; under
//!   «Tienes un nuevo mensaje que espera tu respuesta» come the name, «Ver perfil», the phone,
//!   the e-mail, and the message up to «Responder desde idealista»; the agency's reference is in
//!   the subject («con ref: P-1001») and the card («(Ref. P-1001)»), the ad's code after
//!   «Código del anuncio:».
//! - **Fotocasa and Habitaclia** (both from Fotocasa Pro, `cliente@fotocasa.pro`, told apart by
//!   the subject's «- De habitaclia»): «Nombre:», «Teléfono:», «Email:», «Mensaje:» and the
//!   message below it, values followed by their link in brackets; the reference after «con
//!   referencia». The footer's support number is not the customer's.
//! - **pisos.com** (`noreply@pisos.com`): «NOMBRE», «EMAIL», «TELÉFONO», «MENSAJE» each above its
//!   value, the message in quotes; the reference after «Ref:».
//! - **Anyone else**: a phone number and a listing reference anywhere in the text.
//!
//! An e-mail with no phone, e-mail or listing to be read is unreadable.

use std::sync::LazyLock;

use regex::Regex;

use super::{Mail, Read};
use crate::domain::phone::{PhoneRegion, wa_id_of};
use crate::leads::Incoming;
use crate::leads::input::looks_like_email;
use crate::realestate::offline::criteria::{fold, reference};

/// The agency's reference as a portal quotes it: «con ref: P-1001», «con referencia P-1002»,
/// «(Ref. P-1001)», «Ref: P-1005».
static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bref(?:erencia)?\b\s*[.:]?\s*([A-Z0-9][A-Z0-9/_-]{1,30}[A-Z0-9])")
        .expect("valid")
});
/// Idealista's code of the ad.
static AD_CODE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)c[oó]digo del anuncio\s*:?\s*(\d{5,15})").expect("valid"));
/// A link written after a value in a text part: « [tel:+34…]», « [mailto:…]».
static BRACKETED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s*\[[^\]]*\]").expect("valid"));

pub(super) fn read(mail: &Mail, region: PhoneRegion) -> Read {
    let lines = lines(&mail.text);
    let domain = mail.domain();
    let from = |d: &str| domain == d || domain.ends_with(&format!(".{d}"));
    let lead = if from("idealista.com") {
        idealista(mail, &lines, region)
    } else if from("fotocasa.pro") || from("fotocasa.es") {
        let habitaclia = fold(&mail.subject).contains("de habitaclia");
        labelled_layout(
            mail,
            &lines,
            region,
            if habitaclia { "habitaclia" } else { "fotocasa" },
        )
    } else if from("habitaclia.com") {
        labelled_layout(mail, &lines, region, "habitaclia")
    } else if from("pisos.com") {
        labelled_layout(mail, &lines, region, "pisos.com")
    } else {
        generic(mail, &lines, region)
    };
    match lead {
        Some(lead) => Read::Lead(lead),
        None => Read::Unreadable {
            why: format!(
                "no phone, e-mail or listing could be read (from {}, «{}»)",
                if mail.from.is_empty() {
                    "nobody"
                } else {
                    &mail.from
                },
                mail.subject.chars().take(80).collect::<String>()
            ),
            from: mail.from.clone(),
        },
    }
}

/// Idealista's layout, by position; its older one had labels, read as such.
fn idealista(mail: &Mail, lines: &[Line], region: PhoneRegion) -> Option<Incoming> {
    let start = lines
        .iter()
        .rposition(|l| l.folded.contains("nuevo mensaje que espera tu respuesta"));
    let end = lines
        .iter()
        .position(|l| l.folded.starts_with("responder desde idealista"));
    let mut lead = match (start, end) {
        (Some(start), Some(end)) if start < end => {
            let block: Vec<&Line> = lines[start + 1..end]
                .iter()
                .filter(|l| !l.text.is_empty())
                .collect();
            let phone = block
                .iter()
                .find(|l| is_phone(&l.text, region))
                .map(|l| l.text.clone());
            let email = block
                .iter()
                .find(|l| looks_like_email(&l.text))
                .map(|l| l.text.clone());
            let name = block
                .first()
                .filter(|l| !is_phone(&l.text, region) && !looks_like_email(&l.text))
                .map(|l| l.text.clone());
            let message: Vec<&str> = block
                .iter()
                .skip(1)
                .filter(|l| {
                    !is_phone(&l.text, region)
                        && !looks_like_email(&l.text)
                        && l.folded != "ver perfil"
                        && !l.folded.contains("lista de morosos")
                })
                .map(|l| l.text.as_str())
                .collect();
            Incoming {
                name,
                phone,
                email,
                message: Some(message.join("\n")).filter(|m| !m.is_empty()),
                ..Incoming::default()
            }
        }
        _ => labelled_fields(mail, lines, region),
    };
    lead.source = "idealista".to_owned();
    lead.name = lead.name.or_else(|| {
        let subject = mail.subject.strip_prefix("Nuevo mensaje de ")?;
        subject.split(" sobre ").next().map(str::to_owned)
    });
    lead.listing_ref =
        agency_reference(mail).or_else(|| AD_CODE.captures(&mail.text).map(|c| c[1].to_owned()));
    lead.received_at = mail.date;
    usable(lead)
}

/// The layouts that label each value (Fotocasa Pro, Habitaclia, pisos.com, Idealista before).
fn labelled_layout(
    mail: &Mail,
    lines: &[Line],
    region: PhoneRegion,
    source: &str,
) -> Option<Incoming> {
    let mut lead = labelled_fields(mail, lines, region);
    lead.source = source.to_owned();
    lead.listing_ref = agency_reference(mail);
    lead.received_at = mail.date;
    usable(lead)
}

fn labelled_fields(mail: &Mail, lines: &[Line], region: PhoneRegion) -> Incoming {
    let value = |labels: &[&str]| {
        labelled(lines, labels)
            .map(|v| clean(&v))
            .filter(|v| !v.is_empty())
    };
    let phone =
        value(&["telefono", "telf", "tel", "movil", "mi telefono"]).filter(|p| is_phone(p, region));
    let email = value(&["email", "e-mail", "correo electronico", "correo"])
        .filter(|e| looks_like_email(e))
        .or_else(|| {
            mail.reply_to
                .clone()
                .filter(|r| !r.ends_with(mail.domain()) && looks_like_email(r))
        });
    Incoming {
        name: value(&["nombre", "name"]),
        phone,
        email,
        message: labelled_block(lines, &["mensaje", "comentarios", "comentario", "message"])
            .map(|m| clean(&m))
            .filter(|m| !m.is_empty()),
        ..Incoming::default()
    }
}

/// A form or a small portal: a phone number and a listing reference anywhere in the text.
fn generic(mail: &Mail, lines: &[Line], region: PhoneRegion) -> Option<Incoming> {
    let phone = phone_in(&mail.text, region);
    let listing_ref = agency_reference(mail);
    if phone.is_none() && listing_ref.is_none() {
        return None;
    }
    let source = mail
        .domain()
        .trim_start_matches("www.")
        .trim_start_matches("mail.")
        .to_owned();
    let mut lead = labelled_fields(mail, lines, region);
    lead.source = if source.is_empty() {
        "email".to_owned()
    } else {
        source
    };
    lead.phone = lead.phone.or(phone);
    lead.listing_ref = listing_ref;
    lead.received_at = mail.date;
    lead.message = lead.message.or_else(|| {
        // The longest paragraph: the customer's words, not the form's frame around them.
        mail.text
            .split("\n\n")
            .map(str::trim)
            .filter(|p| !p.chars().all(|c| c == '-' || c.is_whitespace()))
            .max_by_key(|p| p.chars().count())
            .map(|p| p.trim_matches('-').trim().chars().take(1000).collect())
    });
    Some(lead)
}

/// A lead when something in it can be acted on.
fn usable(lead: Incoming) -> Option<Incoming> {
    (lead.phone.is_some() || lead.email.is_some() || lead.listing_ref.is_some()).then_some(lead)
}

/// The agency's own listing id if the e-mail names one («P-1001»), else the reference as the
/// portal quotes it; the subject first, where portals put it.
fn agency_reference(mail: &Mail) -> Option<String> {
    reference(&mail.subject)
        .or_else(|| reference(&mail.text))
        .or_else(|| QUOTED.captures(&mail.subject).map(|c| c[1].to_owned()))
        .or_else(|| QUOTED.captures(&mail.text).map(|c| c[1].to_owned()))
}

/// A value without its bracketed link, its quotes, or «No especificado».
fn clean(value: &str) -> String {
    let value = BRACKETED.replace_all(value, "");
    let value = value.trim().trim_matches(['“', '”', '"', '«', '»']).trim();
    if fold(value).trim_end_matches('.') == "no especificado" {
        String::new()
    } else {
        value.to_owned()
    }
}

fn is_phone(text: &str, region: PhoneRegion) -> bool {
    let text = BRACKETED.replace_all(text, "");
    let digits = text.chars().filter(char::is_ascii_digit).count();
    (9..=15).contains(&digits)
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || " +-().".contains(c))
        && wa_id_of(&text, region).is_ok()
}

/// A line of the text, as written and folded; blank lines are kept (a message ends at one).
struct Line {
    text: String,
    folded: String,
}

fn lines(text: &str) -> Vec<Line> {
    text.lines()
        .map(|l| l.trim().trim_matches(|c| c == '*' || c == '|').trim())
        .map(|l| Line {
            text: l.to_owned(),
            folded: fold(l),
        })
        .collect()
}

/// The value after the first of `labels`: on its line («Teléfono: 612 34 56 78») or, when the
/// line is the label alone («TELÉFONO», a table's cell), on the next line that is not blank.
fn labelled(lines: &[Line], labels: &[&str]) -> Option<String> {
    labelled_at(lines, labels).map(|(_, value)| value)
}

fn labelled_at(lines: &[Line], labels: &[&str]) -> Option<(usize, String)> {
    for label in labels {
        for (i, line) in lines.iter().enumerate() {
            let Some(rest) = line.folded.strip_prefix(label) else {
                continue;
            };
            let rest = rest.trim_start();
            let after = rest.strip_prefix(':').map(str::trim_start);
            if after.is_none() && !rest.is_empty() {
                continue;
            }
            if let Some(after) = after.filter(|a| !a.is_empty()) {
                return Some((i, tail(&line.text, after.chars().count())));
            }
            let next = lines
                .iter()
                .enumerate()
                .skip(i + 1)
                .find(|(_, l)| !l.text.is_empty())?;
            return Some((next.0, next.1.text.clone()));
        }
    }
    None
}

/// A value that runs over several lines (a message): from its label's value to the first
/// blank line, at most 20 lines.
fn labelled_block(lines: &[Line], labels: &[&str]) -> Option<String> {
    let (at, first) = labelled_at(lines, labels)?;
    let mut block = vec![first];
    block.extend(
        lines
            .iter()
            .skip(at + 1)
            .take(20)
            .take_while(|l| !l.text.is_empty())
            .map(|l| l.text.clone()),
    );
    Some(block.join("\n"))
}

/// The last `chars` characters of `text`, trimmed.
fn tail(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    text.chars()
        .skip(count.saturating_sub(chars))
        .collect::<String>()
        .trim()
        .to_owned()
}

/// The first phone number in `text` that is valid (in `region`, or international), as
/// written; digits run together with letters or slashes (a URL's, a date's) are not one.
fn phone_in(text: &str, region: PhoneRegion) -> Option<String> {
    let text = BRACKETED.replace_all(text, "");
    let mut candidate = String::new();
    let mut glued = false;
    let mut previous = ' ';
    let check = |candidate: &mut String, glued: bool| {
        let found = candidate
            .trim()
            .trim_end_matches(['-', '.', '(', ')', ' '])
            .to_owned();
        candidate.clear();
        (!glued && is_phone(&found, region)).then_some(found)
    };
    for c in text.chars() {
        let starts = candidate.is_empty();
        if c.is_ascii_digit() || (c == '+' && starts) || (!starts && " -.()".contains(c)) {
            if starts {
                glued = previous.is_alphanumeric() || "/_=".contains(previous);
            }
            candidate.push(c);
        } else {
            let glued_after = (c.is_alphanumeric() || "/_".contains(c))
                && candidate.ends_with(|d: char| d.is_ascii_digit());
            if !candidate.is_empty()
                && let Some(found) = check(&mut candidate, glued || glued_after)
            {
                return Some(found);
            }
        }
        previous = c;
    }
    check(&mut candidate, glued)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phone_in_free_text_is_found_and_a_url_or_a_date_is_not_one() {
        let region = PhoneRegion::default();
        assert_eq!(
            phone_in(
                "Mi móvil es el +34 655 12 34 56, mejor por WhatsApp",
                region
            ),
            Some("+34 655 12 34 56".to_owned())
        );
        assert_eq!(
            phone_in("Llamadme al 612 34 56 78 por la tarde (ref. 1003)", region),
            Some("612 34 56 78".to_owned())
        );
        assert_eq!(
            phone_in(
                "https://www.pisos.com/comprar/piso-65912345678_104871/",
                region
            ),
            None
        );
        assert_eq!(phone_in("Factura n.º 12 del 3 de diciembre", region), None);
    }

    #[test]
    fn values_lose_their_links_quotes_and_placeholders() {
        assert_eq!(clean("+34623456789 [tel:+34623456789]"), "+34623456789");
        assert_eq!(
            clean("“Hola, ¿sigue disponible?”"),
            "Hola, ¿sigue disponible?"
        );
        assert_eq!(clean("No especificado."), "");
    }
}
