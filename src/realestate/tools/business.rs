//! `business_info`: the agency's facts from its business file (`prompts/business.toml`) —
//! opening hours and whether it is open now, holidays, offices, zones, languages, policies,
//! contact — so the assistants answer «¿a qué hora abrís el sábado?» from data, never from
//! imagination. What the file does not say, the tool says is unknown.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::business::Business;
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};

/// The tool's name, for prompt files.
pub const BUSINESS_INFO: &str = "business_info";

/// Most upcoming holidays listed.
const HOLIDAYS_SHOWN: usize = 8;

/// What the model may ask about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    Hours,
    Offices,
    Zones,
    Policies,
    Contact,
    All,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InfoArgs {
    #[schemars(
        description = "De qué: hours (horario y festivos), offices, zones, policies, contact o all."
    )]
    topic: Option<Topic>,
}

pub struct BusinessInfo;

#[async_trait]
impl TypedTool for BusinessInfo {
    type Args = InfoArgs;
    const NAME: &'static str = BUSINESS_INFO;

    fn description(&self) -> String {
        "Datos de la agencia tal como constan: horario de apertura y si está \
         abierta ahora, festivos, oficinas (dirección y mapa), zonas en las que \
         trabaja, idiomas, políticas (señal o fianza, honorarios, documentos \
         para visitar) y contacto. Úsala antes de responder sobre cualquiera de \
         esas cosas; lo que no conste, no lo sabes."
            .into()
    }

    async fn call(&self, args: InfoArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let topic = args.topic.unwrap_or(Topic::All);
        Ok(facts(
            &context.business,
            topic,
            context.now,
            context.timezone,
            context.contact_line(),
        )
        .into())
    }
}

/// The facts on `topic`, as the tool message says them.
fn facts(
    business: &Business,
    topic: Topic,
    now: DateTime<Utc>,
    timezone: chrono_tz::Tz,
    contact: Option<String>,
) -> String {
    let wants = |t: Topic| topic == Topic::All || topic == t;
    let mut lines: Vec<String> = Vec::new();
    if let Some(name) = &business.name
        && topic == Topic::All
    {
        lines.push(format!("Agencia: {name}"));
    }
    if wants(Topic::Hours) {
        match &business.hours {
            None => lines.push(
                "Horario: no consta en los datos de la agencia (no lo inventes: dilo y ofrece el contacto)."
                    .into(),
            ),
            Some(hours) => {
                lines.push(format!("Horario de apertura (hora de {timezone}):"));
                lines.extend(Business::hours_lines(hours).into_iter().map(|l| format!("- {l}")));
                for season in &business.seasons {
                    lines.push(format!(
                        "Horario de {} (del {:02}/{:02} al {:02}/{:02}):",
                        season.name, season.from.1, season.from.0, season.to.1, season.to.0
                    ));
                    lines.extend(
                        Business::hours_lines(&season.hours)
                            .into_iter()
                            .map(|l| format!("- {l}")),
                    );
                }
                let schedule = business.schedule(hours, timezone);
                lines.push(match schedule.closes_at(now) {
                    Some(closes) => format!(
                        "Ahora mismo: abierta, hasta las {}.",
                        closes.with_timezone(&timezone).format("%H:%M")
                    ),
                    None => match schedule.next_open(now) {
                        Some(opens) => format!(
                            "Ahora mismo: cerrada; abre {}.",
                            crate::domain::phrases::opening(
                                Some("es"),
                                now.with_timezone(&timezone).naive_local(),
                                opens.with_timezone(&timezone).naive_local()
                            )
                        ),
                        None => "Ahora mismo: cerrada.".into(),
                    },
                });
            }
        }
        let today = now.with_timezone(&timezone).date_naive();
        let upcoming: Vec<String> = business
            .holidays
            .iter()
            .filter(|h| h.date >= today)
            .take(HOLIDAYS_SHOWN)
            .map(|h| format!("{} ({})", h.date.format("%d/%m/%Y"), h.name))
            .collect();
        if !upcoming.is_empty() {
            lines.push(format!("Festivos, cerrado: {}.", upcoming.join(", ")));
        }
    }
    if wants(Topic::Offices) {
        if business.offices.is_empty() {
            lines.push("Oficinas: no constan.".into());
        } else {
            lines.push("Oficinas:".into());
            for office in &business.offices {
                let mut line = format!("- {}: {}", office.name, office.address);
                if let Some(phone) = &office.phone {
                    line.push_str(&format!(" · tel. {phone}"));
                }
                if let Some(map) = &office.map {
                    line.push_str(&format!(" · mapa: {map}"));
                }
                if let Some(hours) = &office.hours {
                    line.push_str(&format!(
                        " · horario propio: {}",
                        Business::hours_lines(hours).join("; ")
                    ));
                }
                for season in &office.seasons {
                    line.push_str(&format!(
                        " · horario de {} (del {:02}/{:02} al {:02}/{:02}): {}",
                        season.name,
                        season.from.1,
                        season.from.0,
                        season.to.1,
                        season.to.0,
                        Business::hours_lines(&season.hours).join("; ")
                    ));
                }
                lines.push(line);
            }
        }
    }
    if wants(Topic::Zones) {
        if business.zones.is_empty() {
            lines.push("Zonas: no constan.".into());
        } else {
            let zones: Vec<String> = business
                .zones
                .iter()
                .map(|z| {
                    if z.areas.is_empty() {
                        z.city.clone()
                    } else {
                        format!("{} ({})", z.city, z.areas.join(", "))
                    }
                })
                .collect();
            lines.push(format!(
                "Zonas en las que trabaja (fuera de ellas, no): {}.",
                zones.join("; ")
            ));
        }
        if !business.languages.is_empty() {
            lines.push(format!(
                "Idiomas del equipo: {}.",
                business.languages.join(", ")
            ));
        }
    }
    if wants(Topic::Policies) {
        if business.policies.is_empty() {
            lines.push("Políticas: no constan.".into());
        } else {
            lines.push("Políticas:".into());
            lines.extend(
                business
                    .policies
                    .iter()
                    .map(|(topic, text)| format!("- {topic}: {text}")),
            );
        }
    }
    if wants(Topic::Contact) {
        match contact {
            Some(contact) => lines.push(format!("Contacto: {contact}")),
            None => lines.push("Contacto: no consta.".into()),
        }
        if let Some(website) = &business.website {
            lines.push(format!("Web: {website}"));
        }
    }
    lines.push(
        "Responde solo con lo que consta aquí; si algo no consta, dilo y ofrece pasarlo a una persona."
            .into(),
    );
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    fn madrid(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        chrono_tz::Europe::Madrid
            .with_ymd_and_hms(y, m, d, h, min, 0)
            .unwrap()
            .to_utc()
    }

    const FILE: &str = r#"
name = "Casas Ribera"
contact = ["Tel. 960 000 000"]
[hours]
monday = ["9:30-14:00", "16:30-20:00"]
friday = ["9:30-14:00"]
saturday = ["10:00-13:30"]
[[holidays]]
date = 2026-12-08
name = "Inmaculada"
[policies]
deposit = "Un mes de fianza."
"#;

    #[test]
    fn the_hours_say_the_week_whether_it_is_open_now_and_the_next_holidays() {
        let business = crate::business::parse(FILE).unwrap();
        // Friday 27 November 2026, 15:00: closed until Saturday 10:00.
        let said = facts(
            &business,
            Topic::Hours,
            madrid(2026, 11, 27, 15, 0),
            chrono_tz::Europe::Madrid,
            None,
        );
        assert!(said.contains("- sábado: 10:00–13:30"), "{said}");
        assert!(said.contains("- domingo: cerrado"), "{said}");
        assert!(
            said.contains("Ahora mismo: cerrada; abre mañana a partir de las 10:00."),
            "{said}"
        );
        assert!(said.contains("08/12/2026 (Inmaculada)"), "{said}");
        assert!(!said.contains("fianza"), "{said}");
        let open = facts(
            &business,
            Topic::Hours,
            madrid(2026, 11, 27, 10, 0),
            chrono_tz::Europe::Madrid,
            None,
        );
        assert!(
            open.contains("Ahora mismo: abierta, hasta las 14:00."),
            "{open}"
        );
    }

    #[test]
    fn what_the_file_does_not_say_is_said_to_be_unknown() {
        let said = facts(
            &Business::default(),
            Topic::All,
            Utc::now(),
            chrono_tz::Europe::Madrid,
            None,
        );
        for unknown in [
            "Horario: no consta",
            "Oficinas: no constan",
            "Zonas: no constan",
            "Políticas: no constan",
            "Contacto: no consta",
        ] {
            assert!(said.contains(unknown), "{said}");
        }
    }
}
