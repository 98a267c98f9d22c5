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
mod tests;
