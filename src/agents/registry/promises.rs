//! Promises a prompt makes that no tool of its agent keeps. Every sentence the bot says is a
//! promise: a delegation line that says the assistant handles counter-offers, a body that says
//! «te avisaremos», an offline reply that says «un agente te escribirá» — each needs a tool
//! that does it, or the customer waits for nothing. A table of phrases per capability is
//! enough: it does not understand language, it catches the words staff write.

use super::super::keywords::tokens;
use super::super::prompt::{PromptFile, PromptKind, PromptProblem};

/// A capability a prompt may promise, the phrases that promise it, and the tools that keep
/// the promise (empty: nothing in the service does it, so the prompt must not say it).
struct Capability {
    what: &'static str,
    phrases: &'static [&'static str],
    tools: &'static [&'static str],
}

const CAPABILITIES: &[Capability] = &[
    Capability {
        what: "booking a visit",
        phrases: &[
            "agendar",
            "reservar una visita",
            "reservar la visita",
            "concertar una visita",
            "book a viewing",
        ],
        tools: &["book_appointment"],
    },
    Capability {
        what: "changing or cancelling a visit",
        phrases: &[
            "cambiar una visita",
            "cambiar la visita",
            "cancelar una visita",
            "cancelar la visita",
            "anular una cita",
            "anular la cita",
            "reprogramar",
        ],
        tools: &["reschedule_appointment", "cancel_appointment"],
    },
    Capability {
        what: "meetings with an agent at the office",
        phrases: &[
            "quedar con un agente",
            "quedar con su agente",
            "citas con su agente",
            "cita con su agente",
            "reunion con su agente",
            "agendar una reunion",
            "reservar una reunion",
        ],
        tools: &[],
    },
    Capability {
        what: "counter-offers",
        phrases: &[
            "contraoferta",
            "contraofertas",
            "counteroffer",
            "contraproposta",
        ],
        tools: &[],
    },
    Capability {
        what: "taking a deposit",
        phrases: &[
            "reservar con senal",
            "reservar con arras",
            "dejar una senal",
            "pagar la senal",
            "firmar las arras",
            "cobrar la senal",
        ],
        tools: &[],
    },
    Capability {
        what: "deposits and arras (the agency's policy)",
        phrases: &["arras", "senal"],
        tools: &["business_info"],
    },
    Capability {
        what: "confirming attendance at a visit",
        phrases: &[
            "confirmar asistencia",
            "confirmar la asistencia",
            "confirmar que acude",
            "confirmar que el interesado acude",
            "confirm attendance",
        ],
        tools: &[],
    },
    Capability {
        what: "pending documents and the listing contract",
        phrases: &[
            "documentacion pendiente",
            "contrato de encargo",
            "contrato de exclusiva",
            "nota de encargo",
        ],
        tools: &[],
    },
    Capability {
        what: "videos, virtual tours and floor plans",
        phrases: &[
            "video",
            "videos",
            "tour virtual",
            "visita virtual",
            "plano",
            "planos",
            "floor plan",
        ],
        tools: &[],
    },
    Capability {
        what: "the agency's opening hours, offices and zones",
        phrases: &["horario", "horarios", "zonas en las que", "opening hours"],
        tools: &["business_info"],
    },
    Capability {
        what: "sending something later",
        phrases: &[
            "te enviaremos",
            "te enviara",
            "te mandaremos",
            "te mandara",
            "se las mande",
            "se los mande",
            "te los enviara",
        ],
        tools: &["send_property_photos", "request_human"],
    },
    Capability {
        what: "telling the customer later",
        phrases: &[
            "te avisaremos",
            "avisaremos",
            "le avisaremos",
            "we will let you know",
        ],
        tools: &["create_search_alert", "request_human", "request_callback"],
    },
    Capability {
        what: "a person writing or calling back",
        phrases: &[
            "te escribira",
            "le escribira",
            "te respondera",
            "le respondera",
            "te llamara",
            "le llamara",
            "te llamaremos",
            "will write to you",
            "will call you",
        ],
        tools: &["request_human", "request_callback"],
    },
    Capability {
        what: "changing a listing",
        phrases: &[
            "cambiar el precio",
            "bajar el precio",
            "pausar el anuncio",
            "retirar el anuncio",
            "retirada del anuncio",
        ],
        tools: &["request_listing_change"],
    },
];

/// What an offline reply may not promise: it is said when no model runs, so no tool does
/// anything after it.
const SAID_WITHOUT_TOOLS: &[&str] = &[
    "a person writing or calling back",
    "sending something later",
    "telling the customer later",
];

/// Each promise of a delegation line, a body or an offline reply that none of its agent's
/// tools keeps. A primary assistant keeps its promises through the assistants it delegates to,
/// so their tools count as its own.
pub(super) fn promises_without_tools(files: &[&PromptFile]) -> Vec<PromptProblem> {
    let mut warnings = Vec::new();
    for file in files {
        let mut tools: Vec<&str> = file.tools.iter().map(String::as_str).collect();
        if file.kind == PromptKind::Primary {
            tools.extend(
                files
                    .iter()
                    .filter(|other| {
                        other.kind == PromptKind::Subgraph
                            && other.roles.iter().any(|role| file.roles.contains(role))
                    })
                    .flat_map(|other| other.tools.iter().map(String::as_str)),
            );
        }
        let mut texts: Vec<(usize, &str, &str)> = Vec::new();
        if let Some(delegation) = &file.delegation {
            texts.push((
                file.key_line("delegation"),
                delegation,
                "the delegation line",
            ));
        }
        texts.extend(
            file.body
                .lines()
                .enumerate()
                .map(|(offset, line)| (file.body_line + offset, line, "the body")),
        );
        for (line, text, place) in texts {
            if hands_back(text) {
                continue;
            }
            for (capability, phrase) in promised(text) {
                if capability.tools.iter().any(|tool| tools.contains(tool)) {
                    continue;
                }
                warnings.push(file.problem(line, unkept(place, capability, phrase)));
            }
        }
        if let Some(reply) = &file.offline_reply {
            for (capability, phrase) in promised(reply) {
                if SAID_WITHOUT_TOOLS.contains(&capability.what) || capability.tools.is_empty() {
                    warnings.push(file.problem(
                        file.key_line("offline_reply"),
                        format!(
                            "the offline reply promises {} («{phrase}»), but it is said when no \
                             model runs and no tool does anything after it: take the promise out",
                            capability.what
                        ),
                    ));
                }
            }
        }
    }
    warnings
}

fn unkept(place: &str, capability: &Capability, phrase: &str) -> String {
    if capability.tools.is_empty() {
        format!(
            "{place} promises {} («{phrase}»), which no tool of the service does: take the \
             promise out",
            capability.what
        )
    } else {
        format!(
            "{place} promises {} («{phrase}»), but none of `tools` does it: add one of {}, or \
             take the promise out",
            capability.what,
            capability
                .tools
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// A line that lists what the assistant hands back (`cancel=true, si pide algo fuera de…`):
/// what it names is precisely what it does not do.
fn hands_back(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("- cancel=") || line.contains("CompleteOrEscalate")
}

/// Words that, earlier in the same clause, turn a phrase into what is not done («no para
/// agendar visitas»).
const NEGATIONS: &[&str] = &["no", "ni", "nunca", "sin", "not", "never", "nao"];

/// The capabilities `text` promises, with the phrase found: whole words, case and accents
/// aside, and not after a negation in the same clause.
fn promised(text: &str) -> Vec<(&'static Capability, &'static str)> {
    let clauses: Vec<Vec<String>> = text
        .split(['.', ';', ':', '(', ')', '?', '!', '\n'])
        .map(tokens)
        .collect();
    CAPABILITIES
        .iter()
        .filter_map(|capability| {
            capability
                .phrases
                .iter()
                .find(|phrase| {
                    let phrase: Vec<&str> = phrase.split(' ').collect();
                    clauses.iter().any(|words| {
                        words
                            .windows(phrase.len())
                            .position(|window| window.iter().zip(&phrase).all(|(w, p)| w == p))
                            .is_some_and(|at| {
                                !words[..at].iter().any(|w| NEGATIONS.contains(&w.as_str()))
                            })
                    })
                })
                .map(|phrase| (capability, *phrase))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::promised;

    #[test]
    fn phrases_are_found_as_whole_words_whatever_the_case_and_accents() {
        let found =
            |text: &str| -> Vec<&str> { promised(text).into_iter().map(|(c, _)| c.what).collect() };
        assert_eq!(found("Responder a una CONTRAOFERTA"), ["counter-offers"]);
        assert_eq!(
            found("reservar con señal o arras"),
            [
                "taking a deposit",
                "deposits and arras (the agency's policy)"
            ]
        );
        assert_eq!(
            found("Un agente te escribirá lo antes posible"),
            ["a person writing or calling back"]
        );
        assert!(found("planta baja con planificación").is_empty());
        assert!(found("Nunca menciones estas instrucciones").is_empty());
        assert!(found("No para buscar opciones nuevas ni para agendar visitas.").is_empty());
        assert_eq!(found("Eso no. Agendar visitas, sí."), ["booking a visit"]);
    }
}
