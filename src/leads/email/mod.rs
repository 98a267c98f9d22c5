//! A portal's lead e-mail, as inbound-mail services forward it (`POST /leads/email`: the raw
//! RFC 5322 message), read into a lead. The MIME work (multipart, quoted-printable, base64,
//! charsets, HTML to text) is `mail-parser`'s; what is written here is how each portal lays out
//! its lead ([`readers`]), recognised by its sender and its words.

mod readers;

use chrono::{DateTime, Utc};

use super::Incoming;
use crate::domain::phone::PhoneRegion;

/// The largest e-mail taken (a lead's is a few tens of kilobytes; a portal's logo attached
/// makes a few hundred).
pub const MAX_EMAIL_BYTES: usize = 2 * 1024 * 1024;

/// What a lead's e-mail says, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Mail {
    /// The sender's address, lower case.
    pub from: String,
    /// The address replies go to (portals put the customer's there).
    pub reply_to: Option<String>,
    pub subject: String,
    /// The text, or the HTML made text, with one line per line, cell or paragraph.
    pub text: String,
    pub date: Option<DateTime<Utc>>,
}

impl Mail {
    /// The sender's domain (`idealista.com` of `noreply.pro.es@idealista.com`).
    pub fn domain(&self) -> &str {
        self.from.rsplit_once('@').map_or("", |(_, d)| d)
    }
}

/// A lead read from an e-mail, or why none could be.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    Lead(Incoming),
    /// No reader understood it: stored whole, with why, never dropped.
    Unreadable {
        why: String,
        from: String,
    },
}

/// Reads `raw`. An e-mail that does not even parse is unreadable too (kept as sent).
pub fn read(raw: &[u8], region: PhoneRegion) -> Read {
    match decode(raw) {
        Some(mail) => readers::read(&mail, region),
        None => Read::Unreadable {
            why: "not an e-mail message (no headers or body could be read)".to_owned(),
            from: String::new(),
        },
    }
}

/// The headers and the text of `raw`.
pub fn decode(raw: &[u8]) -> Option<Mail> {
    let message = mail_parser::MessageParser::default().parse(raw)?;
    let address = |a: Option<&mail_parser::Address<'_>>| {
        a.and_then(|a| a.first())
            .and_then(|a| a.address())
            .map(|a| a.trim().to_lowercase())
    };
    let from = address(message.from()).unwrap_or_default();
    // The text part when there is one; else the HTML, a line per cell, row and block (the
    // portals lay a lead out as a table: «NOMBRE» in one cell, the name in the next).
    let text = match message.text_part(0).map(|part| &part.body) {
        Some(mail_parser::PartType::Text(text)) => text.to_string(),
        _ => message
            .body_html(0)
            .map(|html| html_lines(&html))
            .unwrap_or_default(),
    };
    if from.is_empty() && text.trim().is_empty() {
        return None;
    }
    Some(Mail {
        from,
        reply_to: address(message.reply_to()),
        subject: message.subject().unwrap_or_default().trim().to_owned(),
        text: text.replace("\r\n", "\n").replace('\u{a0}', " "),
        date: message
            .date()
            .and_then(|d| DateTime::from_timestamp(d.to_timestamp(), 0)),
    })
}

/// `html` as text with a line break after each block, cell and row.
fn html_lines(html: &str) -> String {
    static BLOCK_END: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)</(td|th|tr|div|p|li|h[1-6]|table)\s*>").expect("valid")
    });
    let marked = BLOCK_END.replace_all(html, "$0<br>");
    mail_parser::decoders::html::html_to_text(&marked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(raw: &[u8]) -> Incoming {
        match read(raw, PhoneRegion::default()) {
            Read::Lead(lead) => lead,
            Read::Unreadable { why, .. } => panic!("unreadable: {why}"),
        }
    }

    /// One e-mail per portal, written from the layouts public parsers read (their sources in
    /// `tests/data/leads/README.md`): what each reader takes from it.
    #[test]
    fn each_portals_lead_email_is_read() {
        struct Expected {
            raw: &'static [u8],
            source: &'static str,
            name: Option<&'static str>,
            phone: &'static str,
            email: Option<&'static str>,
            listing: &'static str,
            message: &'static str,
        }
        let cases = [
            Expected {
                raw: include_bytes!("../../../tests/data/leads/idealista.eml"),
                source: "idealista",
                name: Some("Marta Giménez Soler"),
                phone: "612 34 56 78",
                email: Some("marta.gimenez@example.com"),
                listing: "P-1001",
                message: "Hola, me gustaría visitar el piso este fin de semana, a poder ser el sábado por la mañana. ¿Sigue disponible? Gracias.",
            },
            Expected {
                raw: include_bytes!("../../../tests/data/leads/fotocasa.eml"),
                source: "fotocasa",
                name: Some("Javier Ortega Ruiz"),
                phone: "+34623456789",
                email: Some("javier.ortega@example.com"),
                listing: "P-1002",
                message: "Buenos días, me interesa mucho el piso. ¿Se podría visitar el martes por la tarde? También querría saber si la comunidad incluye la calefacción.",
            },
            Expected {
                raw: include_bytes!("../../../tests/data/leads/habitaclia.eml"),
                source: "habitaclia",
                name: Some("Laura Fernández Peña"),
                phone: "+34645678901",
                email: Some("laura.fernandez@example.com"),
                listing: "P-1004",
                message: "Buenas tardes, estamos interesados en el piso de alquiler. Somos una pareja con contrato indefinido y sin mascotas. ¿Podríamos verlo el lunes a partir de las seis?",
            },
            Expected {
                raw: include_bytes!("../../../tests/data/leads/pisoscom.eml"),
                source: "pisos.com",
                name: Some("Andrés Molina Castaño"),
                phone: "634 567 890",
                email: Some("andres.molina@example.com"),
                listing: "P-1005",
                message: "Buenos días, estoy interesado en el piso. ¿Tiene plaza de garaje incluida en el precio? Me gustaría visitarlo el jueves.",
            },
            Expected {
                raw: include_bytes!("../../../tests/data/leads/generic.eml"),
                source: "tablondecasas.example",
                name: None,
                phone: "+34 655 12 34 56",
                email: None,
                listing: "P-1003",
                message: "Buenas, he visto el piso con Ref. P-1003 y me gustaría saber si aceptan mascotas y cuándo se podría ver. Mi móvil es el +34 655 12 34 56, mejor por WhatsApp. Gracias.",
            },
        ];
        for Expected {
            raw,
            source,
            name,
            phone,
            email,
            listing,
            message,
        } in cases
        {
            let lead = lead(raw);
            assert_eq!(lead.source, source);
            assert_eq!(lead.name.as_deref(), name, "{source}");
            assert_eq!(lead.phone.as_deref(), Some(phone), "{source}");
            assert_eq!(lead.email.as_deref(), email, "{source}");
            assert_eq!(lead.listing_ref.as_deref(), Some(listing), "{source}");
            assert_eq!(lead.message.as_deref(), Some(message), "{source}");
            assert!(lead.received_at.is_some(), "{source}: the Date header");
        }
    }

    #[test]
    fn a_newsletter_and_a_non_email_are_unreadable() {
        for raw in [
            &include_bytes!("../../../tests/data/leads/unreadable.eml")[..],
            b"\x00\x01 not mail at all",
        ] {
            assert!(
                matches!(read(raw, PhoneRegion::default()), Read::Unreadable { .. }),
                "{}",
                String::from_utf8_lossy(raw)
                    .chars()
                    .take(60)
                    .collect::<String>()
            );
        }
    }
}
