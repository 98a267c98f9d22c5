//! The keyword fast path: each agent's prompt lists `keywords`, the Spanish words and phrases
//! customers write when they want it ("cita", "ver el piso", "hipoteca"). When a WhatsApp message
//! names the keywords of exactly one agent the user can reach, the engine enters that agent
//! directly and saves an LLM round trip; when it names none or several, the LLM decides as usual.
//!
//! This module is only the matcher: pure, no I/O, and cheap enough to run on every message. Both
//! keywords and messages are reduced to lowercase, accent-free word [`tokens`], so "AGENDAR",
//! "Euríbor" and "interes" written without its accent all match. A keyword matches whole words
//! only ("cita" is not in "solicitar"), with one allowance for plurals on the message side
//! ("citas", "hipotecas", "intereses").
//!
//! A long keyword says more than a short one it contains: "¿Cómo fue la visita?" is about the visit
//! already made (`visit_tracker_assistant`, "cómo fue la visita"), not about booking one
//! (`appointment_assistant`, "visita"). So a match lying inside a longer match of another agent
//! is dropped before counting agents.

use std::collections::{BTreeSet, HashMap};

use unicode_normalization::char::{decompose_canonical, is_combining_mark};

/// How much of a message is scanned, in chars. The fast path runs on every message and must
/// stay bounded; a message this long is not a one-line request, and the LLM reads it anyway. A
/// word cut by the limit is cut short and does not match.
const MAX_SCANNED_CHARS: usize = 2_000;

/// Keywords of every agent, normalised once at load.
#[derive(Debug, Clone, Default)]
pub struct KeywordIndex {
    /// Agent names, sorted and distinct: an agent's index orders agents by name.
    agents: Vec<String>,
    keywords: Vec<Keyword>,
    /// Keyword indices by the keyword's first word, so a message is scanned in one pass.
    by_first_word: HashMap<String, Vec<usize>>,
    /// Words in the longest keyword: how far back a match containing another can start.
    longest: usize,
}

/// One keyword of one agent, as word tokens.
#[derive(Debug, Clone)]
struct Keyword {
    agent: usize,
    words: Vec<String>,
}

/// A keyword found in a message: its agent and the message words `start..end` it covers.
#[derive(Debug, Clone, Copy)]
struct Match {
    agent: usize,
    start: usize,
    end: usize,
}

impl Match {
    fn len(&self) -> usize {
        self.end - self.start
    }
}

impl KeywordIndex {
    /// `entries`: (agent name, its keywords). Empty keywords (after normalisation) are ignored.
    pub fn new<'a, I, K>(entries: I) -> Self
    where
        I: IntoIterator<Item = (&'a str, K)>,
        K: IntoIterator<Item = &'a String>,
    {
        // Sorted and deduplicated, so a keyword listed twice matches once.
        let mut pairs = BTreeSet::new();
        for (agent, keywords) in entries {
            for keyword in keywords {
                let words = tokens(keyword);
                if !words.is_empty() {
                    pairs.insert((agent, words));
                }
            }
        }
        let agents: Vec<String> = pairs
            .iter()
            .map(|(agent, _)| agent.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();

        let mut index = KeywordIndex {
            agents,
            ..KeywordIndex::default()
        };
        for (agent, words) in pairs {
            let agent = index
                .agents
                .binary_search_by(|name| name.as_str().cmp(agent))
                .expect("every agent of a keyword is listed");
            index.longest = index.longest.max(words.len());
            index
                .by_first_word
                .entry(words[0].clone())
                .or_default()
                .push(index.keywords.len());
            index.keywords.push(Keyword { agent, words });
        }
        index
    }

    /// The distinct agents whose keywords occur in `text`, sorted by name, after dropping every
    /// match that lies inside a longer match of another agent ("cómo fue la visita" hides
    /// "visita").
    pub fn matches(&self, text: &str) -> Vec<&str> {
        self.matched_agents(text, |_| true)
            .into_iter()
            .map(|agent| self.agents[agent].as_str())
            .collect()
    }

    /// The one agent among those `reachable` accepts whose keywords `text` matches, or `None`
    /// when none or several do (ambiguity: let the LLM decide).
    ///
    /// Unreachable agents are set aside before longer matches hide shorter ones: a keyword of an
    /// agent the user may not enter must not hide the agent they may. So the answer can be an
    /// agent that [`matches`](Self::matches), which sees every agent, leaves out.
    pub fn route(&self, text: &str, reachable: impl Fn(&str) -> bool) -> Option<&str> {
        match self.matched_agents(text, reachable).as_slice() {
            &[agent] => Some(self.agents[agent].as_str()),
            _ => None,
        }
    }

    /// Every keyword match that no longer match of another agent hides: its agent and the
    /// index of its first word among the text's [`tokens`], in order of position.
    pub fn found(&self, text: &str) -> Vec<(&str, usize)> {
        let found = self.found_matches(text, |_| true);
        found
            .iter()
            .filter(|m| !self.is_hidden(m, &found))
            .map(|m| (self.agents[m.agent].as_str(), m.start))
            .collect()
    }

    /// Indices of the agents `reachable` accepts that keep a match once longer matches of other
    /// agents have hidden the shorter ones inside them; sorted and distinct.
    fn matched_agents(&self, text: &str, reachable: impl Fn(&str) -> bool) -> Vec<usize> {
        let found = self.found_matches(text, reachable);
        let mut agents: Vec<usize> = found
            .iter()
            .filter(|m| !self.is_hidden(m, &found))
            .map(|m| m.agent)
            .collect();
        agents.sort_unstable();
        agents.dedup();
        agents
    }

    /// Every match of a keyword of an agent `reachable` accepts, in order of `start`.
    fn found_matches(&self, text: &str, reachable: impl Fn(&str) -> bool) -> Vec<Match> {
        if self.keywords.is_empty() {
            return Vec::new();
        }
        let words = Words::of(text.chars().take(MAX_SCANNED_CHARS));

        // In order of `start`, which `is_hidden` relies on.
        let mut found = Vec::new();
        for start in 0..words.len() {
            for stem in stems(words.get(start)) {
                let Some(candidates) = self.by_first_word.get(stem) else {
                    continue;
                };
                for &keyword in candidates {
                    let Keyword { agent, words: kw } = &self.keywords[keyword];
                    let end = start + kw.len();
                    if end <= words.len()
                        && (start + 1..end)
                            .zip(&kw[1..])
                            .all(|(i, word)| is_form_of(words.get(i), word))
                        && reachable(&self.agents[*agent])
                    {
                        found.push(Match {
                            agent: *agent,
                            start,
                            end,
                        });
                    }
                }
            }
        }
        found
    }

    /// Whether `m` lies inside a strictly longer match of another agent. `found` is sorted by
    /// `start`, and a match containing `m` starts at most `longest` words before `m` ends, so
    /// only that window is looked at: bounded work even for a message repeating a keyword.
    fn is_hidden(&self, m: &Match, found: &[Match]) -> bool {
        let from = found.partition_point(|o| o.start < m.end.saturating_sub(self.longest));
        let to = found.partition_point(|o| o.start <= m.start);
        found[from..to]
            .iter()
            .any(|o| o.agent != m.agent && o.end >= m.end && o.len() > m.len())
    }
}

/// Lowercased, accent-folded word tokens (NFD, combining marks dropped, so "Según"→"segun",
/// "ñ"→"n"); a token is a maximal run of alphanumeric chars; everything else separates.
pub fn tokens(text: &str) -> Vec<String> {
    let words = Words::of(text.chars());
    (0..words.len()).map(|i| words.get(i).to_string()).collect()
}

/// The word tokens of a text in one buffer: tokenising a message allocates twice, not once per
/// word.
struct Words {
    /// The tokens back to back.
    text: String,
    /// Where each token ends in `text`; it starts where the previous one ends.
    ends: Vec<usize>,
}

impl Words {
    fn of(chars: impl Iterator<Item = char>) -> Self {
        let mut words = Words {
            text: String::new(),
            ends: Vec::new(),
        };
        for c in chars {
            if c.is_ascii() {
                // Most of every message: no case mapping tables, nothing to decompose.
                if c.is_ascii_alphanumeric() {
                    words.text.push(c.to_ascii_lowercase());
                } else {
                    words.end_word();
                }
            } else {
                for lower in c.to_lowercase() {
                    decompose_canonical(lower, |c| words.push(c));
                }
            }
        }
        words.end_word();
        words
    }

    /// Adds one lowercase, decomposed char.
    fn push(&mut self, c: char) {
        if is_combining_mark(c) {
            // An accent of the letter before it ("é" is "e" + U+0301): dropped, the word goes on.
        } else if c.is_alphanumeric() {
            self.text.push(c);
        } else {
            self.end_word();
        }
    }

    fn end_word(&mut self) {
        if self.text.len() > self.ends.last().copied().unwrap_or(0) {
            self.ends.push(self.text.len());
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// The keyword words a message word can be a form of: itself, and itself without a plural "s"
/// or "es" ("visitas" → "visita", "intereses" → "interes").
fn stems(word: &str) -> impl Iterator<Item = &str> {
    [Some(word), word.strip_suffix('s'), word.strip_suffix("es")]
        .into_iter()
        .flatten()
        .filter(|stem| !stem.is_empty())
}

/// Whether the message word `word` is the keyword word `keyword` or its plural.
fn is_form_of(word: &str, keyword: &str) -> bool {
    word.strip_prefix(keyword)
        .is_some_and(|rest| matches!(rest, "" | "s" | "es"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keyword lists of the prompts folder.
    const AGENTS: &[(&str, &[&str])] = &[
        (
            "appointment_assistant",
            &[
                "cita",
                "visita",
                "agendar",
                "quedar",
                "ver la propiedad",
                "ver el piso",
                "cancelar cita",
                "cambiar cita",
            ],
        ),
        (
            "mortgage_loan_assistant",
            &[
                "hipoteca",
                "préstamo",
                "financiación",
                "cuota",
                "entrada",
                "banco",
                "interés",
                "euríbor",
            ],
        ),
        (
            "owner_info_assistant",
            &[
                "mi piso",
                "mi casa",
                "cómo va la venta",
                "ofertas recibidas",
                "bajar el precio",
                "propietario",
                "encargo",
                "documentación",
            ],
        ),
        (
            "property_assistant",
            &[
                "precio",
                "metros",
                "habitaciones",
                "fotos",
                "referencia",
                "disponible",
                "garaje",
                "comunidad",
            ],
        ),
        (
            "prospect_offer_assistant",
            &[
                "oferta",
                "ofrecer",
                "contraoferta",
                "negociar",
                "rebaja",
                "reservar",
                "señal",
                "arras",
            ],
        ),
        (
            "searcher_assistant",
            &[
                "busco",
                "buscar",
                "qué tenéis",
                "alquilar",
                "comprar",
                "presupuesto",
                "zona",
                "avisadme",
            ],
        ),
        (
            "visit_tracker_assistant",
            &[
                "cómo fue la visita",
                "opinión",
                "qué te pareció",
                "confirmo",
                "cuántas visitas",
                "visitas recibidas",
            ],
        ),
    ];

    fn index_of(agents: &[(&str, &[&str])]) -> KeywordIndex {
        let owned: Vec<(&str, Vec<String>)> = agents
            .iter()
            .map(|(name, keywords)| (*name, keywords.iter().map(|k| k.to_string()).collect()))
            .collect();
        KeywordIndex::new(owned.iter().map(|(name, keywords)| (*name, keywords)))
    }

    fn index() -> KeywordIndex {
        index_of(AGENTS)
    }

    fn route_all<'a>(index: &'a KeywordIndex, text: &str) -> Option<&'a str> {
        index.route(text, |_| true)
    }

    /// What a prospect may reach: not the owner's own agent.
    fn prospect(agent: &str) -> bool {
        agent != "owner_info_assistant"
    }

    #[test]
    fn tokens_are_lowercase_accent_free_words() {
        assert_eq!(
            tokens("¿Según tú, el AÑO que viene? Euríbor+1,5%"),
            [
                "segun", "tu", "el", "ano", "que", "viene", "euribor", "1", "5"
            ]
        );
        assert_eq!(tokens("  ¡¡Hola!!  "), ["hola"]);
        assert!(tokens("").is_empty());
        assert!(tokens("👍🏼🙏 ... ?!").is_empty());
        // Already decomposed input folds the same way.
        assert_eq!(tokens("Inte\u{0301}re\u{0301}s"), ["interes"]);
    }

    #[test]
    fn accents_and_case_do_not_matter() {
        let index = index();
        for text in [
            "Quiero AGENDAR una visita",
            "quiero agendar una visita",
            "Quiero Agéndar una visíta",
        ] {
            assert_eq!(
                route_all(&index, text),
                Some("appointment_assistant"),
                "{text}"
            );
        }
        for text in [
            "¿Cuánto me saldría la cuota de la hipoteca?",
            "Hipoteca",
            "que interés me darían",
            "que interes me darian",
            "¿Cómo está el Euríbor?",
            "EURIBOR",
            "necesito financiacion",
        ] {
            assert_eq!(
                route_all(&index, text),
                Some("mortgage_loan_assistant"),
                "{text}"
            );
        }
    }

    #[test]
    fn keywords_match_whole_words_and_plurals() {
        let index = index();
        assert_eq!(route_all(&index, "Quiero solicitar información"), None);
        assert_eq!(route_all(&index, "Me han citado mañana"), None);
        assert_eq!(
            route_all(&index, "¿Tenéis citas libres el jueves?"),
            Some("appointment_assistant")
        );
        assert_eq!(
            route_all(&index, "Comparando hipotecas de varios bancos"),
            Some("mortgage_loan_assistant")
        );
        assert_eq!(
            route_all(&index, "¿Los intereses son fijos?"),
            Some("mortgage_loan_assistant")
        );
        // The plural allowance is for the message only: "fotos" is not matched by "foto".
        assert_eq!(route_all(&index, "mándame una foto"), None);
        assert_eq!(
            route_all(&index, "mándame fotos"),
            Some("property_assistant")
        );
    }

    #[test]
    fn multi_word_keywords_match_across_punctuation() {
        let index = index();
        assert_eq!(
            route_all(&index, "¿Podría ver el piso?"),
            Some("appointment_assistant")
        );
        assert_eq!(
            route_all(&index, "me gustaría VER... el piso!!"),
            Some("appointment_assistant")
        );
        assert_eq!(
            route_all(&index, "¿Qué tenéis en el centro?"),
            Some("searcher_assistant")
        );
        // Every word must be there, in order.
        assert_eq!(route_all(&index, "el piso lo quiero ver"), None);
        // A plural of each word counts.
        assert_eq!(
            route_all(&index, "¿puedo ver las propiedades?"),
            Some("appointment_assistant")
        );
    }

    #[test]
    fn a_longer_match_of_another_agent_hides_a_shorter_one() {
        let index = index();
        assert_eq!(
            index.matches("¿Cómo fue la visita de ayer?"),
            ["visit_tracker_assistant"]
        );
        assert_eq!(
            route_all(&index, "¿Cómo fue la visita de ayer?"),
            Some("visit_tracker_assistant")
        );
        assert_eq!(
            route_all(&index, "¿Cuántas visitas recibidas lleva?"),
            Some("visit_tracker_assistant")
        );
        assert_eq!(
            route_all(&index, "Quiero bajar el precio"),
            Some("owner_info_assistant")
        );
        // Only what lies inside is hidden: another "visita" elsewhere still counts.
        assert_eq!(
            index.matches("¿Cómo fue la visita? Quiero otra visita"),
            ["appointment_assistant", "visit_tracker_assistant"]
        );
    }

    #[test]
    fn equal_matches_of_two_agents_are_ambiguous() {
        let index = index_of(&[("a_assistant", &["cita"]), ("b_assistant", &["Cita"])]);
        assert_eq!(index.matches("una cita"), ["a_assistant", "b_assistant"]);
        assert_eq!(route_all(&index, "una cita"), None);
    }

    #[test]
    fn several_agents_let_the_llm_decide() {
        let index = index();
        let text = "quiero agendar una visita, ¿qué tal fue la anterior? opinión";
        assert_eq!(
            index.matches(text),
            ["appointment_assistant", "visit_tracker_assistant"]
        );
        assert_eq!(route_all(&index, text), None);
        assert_eq!(
            route_all(&index, "¿Cuál es el precio y la cuota de la hipoteca?"),
            None
        );
    }

    #[test]
    fn no_match_routes_nowhere() {
        let index = index();
        for text in [
            "hola",
            "Buenas tardes, ¿quién eres?",
            "",
            "   ",
            "👍",
            "🏠🏠🏠",
        ] {
            assert!(index.matches(text).is_empty(), "{text:?}");
            assert_eq!(route_all(&index, text), None, "{text:?}");
        }
        assert_eq!(route_all(&index, "👍 cita"), Some("appointment_assistant"));
    }

    #[test]
    fn unreachable_agents_neither_route_nor_hide() {
        let index = index();
        let text = "Quiero bajar el precio de mi casa";
        assert_eq!(route_all(&index, text), Some("owner_info_assistant"));
        // For a prospect the owner's "bajar el precio" does not hide "precio".
        assert_eq!(index.route(text, prospect), Some("property_assistant"));
        assert_eq!(
            index.route("¿Ofertas recibidas?", prospect),
            Some("prospect_offer_assistant")
        );
        assert_eq!(index.route("¿Cómo va la venta?", prospect), None);
        // Unreachable agents do not make a message ambiguous either.
        assert_eq!(
            index.route("Quiero ver el piso, es mi casa ideal", |agent| {
                agent != "owner_info_assistant"
            }),
            Some("appointment_assistant")
        );
        assert_eq!(index.route("Quiero agendar una visita", |_| false), None);
    }

    #[test]
    fn empty_index_and_empty_keywords_match_nothing() {
        let empty = KeywordIndex::default();
        assert!(empty.matches("cita").is_empty());
        assert_eq!(route_all(&empty, "cita"), None);

        let blank = index_of(&[("a_assistant", &["", "¿?", "  ", "👍"])]);
        assert!(blank.matches("¿? 👍").is_empty());
        assert_eq!(route_all(&blank, ""), None);
    }

    #[test]
    fn only_the_first_chars_are_scanned() {
        let index = index();
        // 2,000 two-byte chars: the cut is in chars, never inside one.
        let head = "é".repeat(MAX_SCANNED_CHARS - 5);
        assert_eq!(
            route_all(&index, &format!("{head} cita")),
            Some("appointment_assistant")
        );
        assert_eq!(route_all(&index, &format!("{head}é cita")), None);
        assert_eq!(route_all(&index, &format!("{head}ññ hipoteca")), None);
        assert_eq!(
            route_all(&index, &format!("hipoteca {}", "ñ".repeat(5_000))),
            Some("mortgage_loan_assistant")
        );
        let emoji = "🏠".repeat(MAX_SCANNED_CHARS + 1);
        assert!(index.matches(&emoji).is_empty());
    }

    #[test]
    fn a_repeated_keyword_is_one_agent() {
        let index = index();
        let text = "cita ".repeat(400);
        assert_eq!(index.matches(&text), ["appointment_assistant"]);
        assert_eq!(route_all(&index, &text), Some("appointment_assistant"));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Words the keywords are made of, and some that are not, so that random sentences match.
        const WORDS: &[&str] = &[
            "cita",
            "citas",
            "visita",
            "visitas",
            "cómo",
            "fue",
            "la",
            "el",
            "ver",
            "piso",
            "mi",
            "casa",
            "hipoteca",
            "Interés",
            "bajar",
            "precio",
            "ofertas",
            "recibidas",
            "cuántas",
            "opinión",
            "qué",
            "te",
            "pareció",
            "hola",
            "solicitar",
            "¿",
            "?",
            "👍",
        ];

        fn sentence() -> impl Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(WORDS), 0..16)
                .prop_map(|words| words.join(" "))
        }

        proptest! {
            #[test]
            fn matches_never_panics_on_arbitrary_text(text in any::<String>()) {
                let index = index();
                let matched = index.matches(&text);
                let routed = route_all(&index, &text);
                prop_assert!(routed.is_none() || matched.contains(&routed.unwrap()));
            }

            #[test]
            fn route_is_the_single_match(text in sentence(), reachable in any::<u8>()) {
                let index = index();
                let matched = index.matches(&text);
                let expected = match matched.as_slice() {
                    [agent] => Some(*agent),
                    _ => None,
                };
                prop_assert_eq!(route_all(&index, &text), expected);

                // With some agents unreachable, the answer is still a reachable agent whose
                // keywords the text holds.
                let allowed = |agent: &str| {
                    let i = AGENTS.iter().position(|(name, _)| *name == agent).unwrap();
                    reachable & (1 << i) != 0
                };
                if let Some(agent) = index.route(&text, allowed) {
                    prop_assert!(allowed(agent));
                    let entry = AGENTS.iter().find(|(name, _)| *name == agent).unwrap();
                    let alone = index_of(std::slice::from_ref(entry));
                    prop_assert_eq!(alone.matches(&text), [agent]);
                }
            }
        }
    }
}
