//! The message as the router reads it: its words, what a negation covers, its clauses, and the
//! hashed features the model and the nearest-example search share.

use super::{FastRouter, MAX_WORDS};
use crate::agents::keywords::tokens;

/// Words after which the next few words are negated.
pub(super) const NEGATIONS: &[&str] = &[
    "no", "nunca", "ni", "tampoco", "jamas", "not", "never", "nao", "nem", "nope",
];
/// English contractions end in a "t" token once the apostrophe splits them ("don't").
pub(super) const CONTRACTED: &[&str] =
    &["don", "doesn", "didn", "won", "isn", "aren", "can", "wasn"];

impl FastRouter {
    /// The message's features, unit length, sorted by hash and merged; and the agents its
    /// keywords name outside a negation, sorted and distinct.
    pub(super) fn features(&self, text: &str) -> (Vec<(u64, f32)>, Vec<&str>) {
        let words = tokens(text);
        let words = &words[..words.len().min(MAX_WORDS)];
        let params = &self.params;
        let negated = negated_words(words, params.negation_scope);
        let mut features = Vec::with_capacity(words.len() * 16);
        for (i, word) in words.iter().enumerate() {
            if negated[i] {
                features.push((hash(b'~', &[word]), params.word));
                continue;
            }
            features.push((hash(b'w', &[word]), params.word));
            let chars: Vec<char> = format!("<{word}>").chars().collect();
            for n in params.min_gram..=params.max_gram {
                for gram in chars.windows(n) {
                    let gram: String = gram.iter().collect();
                    features.push((hash(b'g', &[&gram]), params.ngram));
                }
            }
        }
        for pair in words.windows(2) {
            features.push((hash(b'p', &[&pair[0], &pair[1]]), params.pair));
        }
        let text: String = words.join(" ");
        let mut keyword_agents = Vec::new();
        for (agent, start) in self.keywords.found(&text) {
            let tag = if negated[start] {
                b'!'
            } else {
                keyword_agents.push(agent);
                b'k'
            };
            features.push((hash(tag, &[agent]), params.keyword));
        }
        keyword_agents.sort_unstable();
        keyword_agents.dedup();

        features.sort_unstable_by_key(|(feature, _)| *feature);
        let mut merged: Vec<(u64, f32)> = Vec::with_capacity(features.len());
        for (feature, value) in features {
            match merged.last_mut() {
                Some((last, total)) if *last == feature => *total += value,
                _ => merged.push((feature, value)),
            }
        }
        let norm = merged.iter().map(|(_, v)| v * v).sum::<f32>().sqrt();
        for (_, value) in &mut merged {
            *value /= norm;
        }
        (merged, keyword_agents)
    }
}

/// How sure the router must be of a new sentence's best subgraph to count it as a request of
/// its own; a clause a cue opened needs only [`Params::second_request`](super::Params).
pub(super) const CLAUSE_CONFIDENCE: f32 = 0.5;

/// Words that acknowledge before a message carries on («vale, y…», «ok and…», «tá, e…»).
const ACKNOWLEDGEMENTS: &[&str] = &[
    "vale", "ok", "okay", "oki", "dale", "bueno", "bien", "perfecto", "genial", "ah", "ahh", "oye",
    "pues", "ya", "si", "sale", "ta", "beleza", "certo", "entendi", "right", "sure", "great",
    "cool", "oh", "well", "hmm", "mmm", "eh",
];
/// Words that open a message carrying on from the one before («y el de la playa?», «and the
/// other one?», «e em Benimaclet?», «entonces cuánto…»).
const CONTINUATIONS: &[&str] = &[
    "y", "e", "and", "entonces", "then", "entao", "tb", "tambien",
];

/// Openings that announce another matter rather than carry on («y otra cosa», «y de paso»).
const ANOTHER_MATTER: &[&[&str]] = &[
    &["y", "otra", "cosa"],
    &["y", "de", "paso"],
    &["y", "tambien"],
    &["y", "tb"],
    &["y", "ademas"],
    &["and", "also"],
    &["and", "another", "thing"],
    &["e", "outra", "coisa"],
    &["e", "tambem"],
];

/// Whether the message opens, after any acknowledgement, by carrying on from the one before,
/// not by announcing another matter.
pub(super) fn continues(text: &str) -> bool {
    let words = tokens(text);
    let Some(start) = words
        .iter()
        .position(|word| !ACKNOWLEDGEMENTS.contains(&word.as_str()))
    else {
        return false;
    };
    let opening = &words[start..];
    CONTINUATIONS.contains(&opening[0].as_str())
        && !ANOTHER_MATTER.iter().any(|cue| opens_with(opening, cue))
}

/// Whether `words` open with the words of `cue`.
fn opens_with(words: &[String], cue: &[&str]) -> bool {
    words.len() >= cue.len() && cue.iter().zip(words).all(|(c, w)| *c == w.as_str())
}

/// Words that open a second request in the same message («… y de paso …», «… and also …»).
pub(super) const CLAUSE_CUES: &[&[&str]] = &[
    &["y", "tambien"],
    &["y", "tb"],
    &["y", "de", "paso"],
    &["de", "paso"],
    &["ademas"],
    &["otra", "cosa"],
    &["y", "que", "me"],
    &["y", "saber"],
    &["y", "cuanto"],
    &["and", "also"],
    &["also"],
    &["and", "how"],
    &["and", "what"],
    &["e", "tambem"],
    &["tambem"],
    &["e", "saber"],
    &["e", "quanto"],
    &["pero", "antes"],
    &["but", "first"],
];

/// One clause of a message: its words, and whether a [`CLAUSE_CUES`] cue opened it (an
/// announced second request, read with a lower bar than a new sentence).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Clause {
    pub text: String,
    pub cued: bool,
}

/// Words that set one part of a message against another («me gustó, pero…»): where its
/// context ends and its request starts.
const CONTRASTS: &[&[&str]] = &[
    &["pero"],
    &["aunque"],
    &["but"],
    &["although"],
    &["mas"],
    &["porem"],
    &["agora"],
    &["now"],
    &["ahora"],
];

/// Words that join two requests in one breath («cuántas visitas tuvo y me buscás uno más
/// chico»): a part they open is read on its own too.
const JOINS: &[&[&str]] = &[&["y"], &["e"], &["and"], &["o"], &["ou"], &["or"]];

/// The message cut into clauses at sentence ends and at [`CLAUSE_CUES`], each as its words.
pub(super) fn clauses(text: &str) -> Vec<Clause> {
    cut(text, &['.', '?', '!', ';', '\n'], &[CLAUSE_CUES])
}

/// The message cut finer than [`clauses`]: at commas and at [`CONTRASTS`] too, so that the
/// context a customer gives before a request («el banco ya me aprobó la hipoteca, ¿puedo ir a
/// verlo otra vez?») stands apart from it.
pub(super) fn segments(text: &str) -> Vec<Clause> {
    cut(
        text,
        &['.', '?', '!', ';', ',', '\n'],
        &[CLAUSE_CUES, CONTRASTS, JOINS],
    )
}

fn cut(text: &str, stops: &[char], cues: &[&[&[&str]]]) -> Vec<Clause> {
    let mut clauses = Vec::new();
    for sentence in text.split(stops) {
        let words = tokens(sentence);
        let (mut start, mut cued) = (0, false);
        let mut i = 0;
        while i < words.len() {
            let cue = cues
                .iter()
                .copied()
                .flatten()
                .find(|cue| opens_with(&words[i..], cue));
            match cue {
                Some(cue) if i > start => {
                    clauses.push(Clause {
                        text: words[start..i].join(" "),
                        cued,
                    });
                    start = i + cue.len();
                    cued = true;
                    i = start;
                }
                _ => i += 1,
            }
        }
        if start < words.len() {
            clauses.push(Clause {
                text: words[start..].join(" "),
                cued,
            });
        }
    }
    clauses.retain(|clause| clause.text.split(' ').count() >= 2);
    clauses
}

/// Which words a negation covers: the `scope` words after a negation word.
pub(super) fn negated_words(words: &[String], scope: usize) -> Vec<bool> {
    let mut negated = vec![false; words.len()];
    let mut left = 0;
    for (i, word) in words.iter().enumerate() {
        let cue = NEGATIONS.contains(&word.as_str())
            || (word == "t" && i > 0 && CONTRACTED.contains(&words[i - 1].as_str()));
        if cue {
            left = scope;
        } else if left > 0 {
            negated[i] = true;
            left -= 1;
        }
    }
    negated
}

/// FNV-1a over a feature's kind and parts: stable across processes and versions.
pub(super) fn hash(kind: u8, parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |byte: u8| {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    };
    eat(kind);
    for part in parts {
        for byte in part.bytes() {
            eat(byte);
        }
        eat(0);
    }
    hash
}
