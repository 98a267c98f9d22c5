//! Which language a customer writes in, so that every reply goes out in that language.
//!
//! WhatsApp messages to the agency are mostly tiny: "ok", "👍", "vale", "si", "gracias", "12:30",
//! "C/ Mayor 5", "q precio tiene". Statistical detectors are unreliable there: on the labelled
//! short messages of `tests/fixtures/lang/short_messages.tsv`, whatlang alone follows the
//! conversation's language right 51 % of the time and lingua alone 76 %. A wrong guess is costly:
//! a Spanish customer who types "ok" must not get the next reply in Italian. So
//! [`LanguageDetector`] reads a message in three layers:
//!
//! 1. **No evidence.** Emoji, numbers, times, prices, postcodes, listing references ("P-102"),
//!    URLs, e-mail addresses, street addresses ("Calle Serrano 45, 3ºB"), names ("Ana García"),
//!    laughter ("jajaja", "haha", "kkkk") and words no language owns ("ok", "super") say nothing
//!    about the language.
//! 2. **A lexicon** of the short words customers really write: greetings, thanks, agreement,
//!    WhatsApp abbreviations ("q", "xq", "tb", "vc", "obg", "thx"), function words and the
//!    agency's own vocabulary ("piso", "alquiler", "aluguel", "lloguer"). Each word spreads a
//!    weight over the languages it belongs to ("vale" → Spanish; "claro" → Spanish or Portuguese;
//!    "hola" → mostly Spanish, also Catalan), and a message's word weights are multiplied: the
//!    words agree on a language or the reading stays uncertain.
//! 3. **whatlang**, restricted to the served languages, reads the words the lexicon does not
//!    know. Its confidence joins the same product, damped when those words have few letters.
//!
//! The product, normalised, gives a probability per language. A text is *confidently* in a
//! language when that probability reaches `CONFIDENT` (0.6; see [`LanguageDetector::detect`]).
//!
//! [`LanguageDetector::follow`] then does what a human agent does with the conversation's known
//! language. A confident message with content (two or more words) switches the conversation.
//! A single word or a courtesy formula ("gracias", "thanks", "ok gracias", "bon dia") does not:
//! customers borrow those from the local language or from English. Neither does a reading in which
//! the previous language stays plausible, since Spanish, Catalan, Portuguese and Italian share many
//! short words. Such weak readings only set a conversation's language while it is still unknown.
//!
//! # Why whatlang and not lingua
//!
//! Both were measured under the same lexicon and rules. The ignored tests
//! `statistical_layer_comparison` and `lingua_memory` below reproduce the figures (release build,
//! 2-core box shared with other builds, hence the ranges):
//!
//! | statistical layer     | short_messages | held_out | RSS added          | 400-char reply |
//! |-----------------------|----------------|----------|--------------------|----------------|
//! | whatlang (chosen)     | 98.5 %         | 97.7 %   | ≈ 0.7 MB (lexicon) | 40–70 µs       |
//! | lingua, low accuracy  | 98.8 %         | 100 %    | ≈ 32 MB            | 120–140 µs     |
//! | lingua, high accuracy | 98.5 %         | 100 %    | ≈ 32 MB            | 270–300 µs     |
//!
//! A short message costs 0.5–1 µs when the lexicon knows all of its words, and about 10 µs with
//! whatlang reading unknown words (about 40 µs with lingua). Building the detector takes under a
//! millisecond (indexing the lexicon).
//!
//! The lexicon does the work on short texts, so the statistical layer only reads a few unknown
//! words, and whatlang reaches the target at a fiftieth of the memory. lingua 1.8 embeds its
//! models in the binary: about 4.5 MB of FSTs per language, so 32 MB more in a stripped binary
//! for these seven. Reading touches those pages whatever the mode (≈ 31 MB file-backed plus
//! ≈ 1.7 MB anonymous RSS), so the low-accuracy mode saves time but no memory, and preloading
//! costs nothing extra. lingua is therefore used by this module's tests only.

mod lexicon;
mod words;

use crate::guard::lang::lexicon::build_lexicon;
use crate::guard::lang::words::{fold, is_laughter, looks_like_street_address, squeeze, words};

use std::collections::HashMap;

/// The ISO 639-1 codes this module can detect: the languages its lexicon covers.
pub const SUPPORTED: [&str; 7] = ["es", "en", "pt", "fr", "de", "it", "ca"];

/// Whether `code` (ISO 639-1, any case) is one of [`SUPPORTED`].
pub fn is_supported(code: &str) -> bool {
    SUPPORTED
        .iter()
        .any(|supported| supported.eq_ignore_ascii_case(code.trim()))
}

/// whatlang's languages in the order of [`SUPPORTED`].
const WHATLANG: [whatlang::Lang; LANGUAGES] = [
    whatlang::Lang::Spa,
    whatlang::Lang::Eng,
    whatlang::Lang::Por,
    whatlang::Lang::Fra,
    whatlang::Lang::Deu,
    whatlang::Lang::Ita,
    whatlang::Lang::Cat,
];
const LANGUAGES: usize = SUPPORTED.len();

/// Probability a text must reach in one language to count as written in it. Texts that fall
/// short are truly ambiguous ones such as "esta disponible" (Spanish or Catalan) or "busco algo
/// por 800€" (Spanish or Portuguese); `follow` keeps the conversation's language for them.
const CONFIDENT: f64 = 0.6;
/// `follow` keeps the previous language while its probability is at least this share of the best
/// one's: two or three words seldom tell Spanish, Catalan, Portuguese and Italian apart.
const PLAUSIBLE_SHARE: f64 = 0.3;
/// Weight a lexicon word gives a language it does not belong to: small but not zero, so that one
/// borrowed word (an English "ok", a Spanish "gracias") cannot veto what the other words say.
const STRANGER: f64 = 0.05;
/// Floor of the statistical confidence in a language, for the same reason.
const STATISTICAL_FLOOR: f64 = 0.02;
/// Letters of unknown words at which the statistical reading counts fully. Below that it is
/// damped in proportion, because on one short word it is close to a coin toss.
const STATISTICAL_FULL_WEIGHT_LETTERS: f64 = 12.0;
/// Fewer unknown letters than this are not worth a statistical reading.
const STATISTICAL_MIN_LETTERS: usize = 3;

/// Detects the language of WhatsApp texts among the configured languages.
///
/// Build it once at start-up (under a millisecond in release: it indexes the lexicon) and share it
/// in an `Arc`. It holds no lock and no mutable state.
pub struct LanguageDetector {
    /// `served[i]`: whether `SUPPORTED[i]` is one of the configured languages.
    served: [bool; LANGUAGES],
    /// The languages a text is weighed against: the served ones. With a single served language,
    /// all supported ones, so that an English reply is not taken for Spanish.
    contenders: [bool; LANGUAGES],
    /// Lexicon entries by their exact lower-case spelling, accents included.
    exact: HashMap<String, Entry>,
    /// Lexicon entries by their accent-free spelling, for "gracies", "disponivel", "tambien".
    folded: HashMap<String, Entry>,
    statistical: Statistical,
}

/// The statistical reader of the words the lexicon does not know.
enum Statistical {
    Whatlang(whatlang::Detector),
    /// Only to compare against whatlang in the tests; see the module documentation.
    #[cfg(test)]
    Lingua(lingua::LanguageDetector),
}

/// What a lexicon word says about the text it is in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    /// Owned by no language: "ok", "super", "info".
    Neutral,
    /// A greeting, thanks, agreement or farewell: borrowed across languages, so weak evidence.
    Courtesy,
    /// Any other word.
    Content,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Share of the word's weight per supported language; sums to 1 (all zero when neutral).
    weights: [f64; LANGUAGES],
    role: Role,
}

/// How far a reading may move a conversation's known language.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Strength {
    /// Nothing in the text tells a language.
    Nothing,
    /// A single word or a courtesy formula: sets an unknown language, never overrides one.
    Weak,
    /// Two or more words with content.
    Strong,
}

/// The outcome of reading one text.
#[derive(Debug)]
struct Reading {
    /// Probability per supported language (zero for those not weighed).
    probabilities: [f64; LANGUAGES],
    strength: Strength,
}

impl Reading {
    fn nothing() -> Self {
        Reading {
            probabilities: [0.0; LANGUAGES],
            strength: Strength::Nothing,
        }
    }

    /// The most probable language, when it reaches [`CONFIDENT`].
    fn confident(&self) -> Option<usize> {
        if self.strength == Strength::Nothing {
            return None;
        }
        self.probabilities
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|&(_, probability)| probability >= CONFIDENT)
            .map(|(language, _)| language)
    }
}

impl LanguageDetector {
    /// `codes`: ISO 639-1 codes the business serves (e.g. ["es","en","pt","fr","de","it","ca"]);
    /// an unknown or unsupported code is an error naming it.
    pub fn new(codes: &[&str]) -> Result<Self, String> {
        let served = served_languages(codes)?;
        let contenders = contenders(served);
        let allowlist = (0..LANGUAGES)
            .filter(|&language| contenders[language])
            .map(|language| WHATLANG[language])
            .collect();
        Ok(Self::assemble(
            served,
            Statistical::Whatlang(whatlang::Detector::with_allowlist(allowlist)),
        ))
    }

    fn assemble(served: [bool; LANGUAGES], statistical: Statistical) -> Self {
        let (exact, folded) = build_lexicon();
        LanguageDetector {
            served,
            contenders: contenders(served),
            exact,
            folded,
            statistical,
        }
    }

    /// The ISO 639-1 code `text` is confidently written in, or `None` when the text is too short,
    /// has no letters, or the detection is not confident.
    ///
    /// A lone courtesy word counts ("gracias" is Spanish); words shared by several served
    /// languages ("si", "claro", "genial") and texts without language evidence ("ok", "👍",
    /// "12:30") do not. A language that is not served is never returned.
    pub fn detect(&self, text: &str) -> Option<&'static str> {
        self.read(text)
            .confident()
            .filter(|&language| self.served[language])
            .map(|language| SUPPORTED[language])
    }

    /// The conversation's language after the user wrote `text`: the detected language when
    /// confident, else `previous` (cloned); `None` only when both are unknown.
    ///
    /// Against a known `previous` language, "confident" asks more than [`Self::detect`]: the text
    /// must have content in two or more words ("gracias", "ok thanks", "bon dia" keep the
    /// conversation's language), and `previous` must have become implausible (a short text that
    /// reads as Portuguese but passably as Spanish does not move a Spanish conversation). When
    /// the conversation keeps its language, `previous` is returned as given ("es-ES" stays).
    pub fn follow(&self, text: &str, previous: Option<&str>) -> Option<String> {
        let reading = self.read(text);
        let Some(detected) = reading
            .confident()
            .filter(|&language| self.served[language])
        else {
            return previous.map(str::to_string);
        };
        let Some(previous) = previous else {
            return Some(SUPPORTED[detected].to_string());
        };
        if reading.strength == Strength::Weak {
            return Some(previous.to_string());
        }
        // "es", "ES" and "es-ES" all name Spanish.
        let primary = previous.trim().split(['-', '_']).next().unwrap_or_default();
        let previous_language = SUPPORTED
            .iter()
            .position(|code| code.eq_ignore_ascii_case(primary));
        if let Some(previous_language) = previous_language
            && (previous_language == detected
                || reading.probabilities[previous_language]
                    >= PLAUSIBLE_SHARE * reading.probabilities[detected])
        {
            return Some(previous.to_string());
        }
        Some(SUPPORTED[detected].to_string())
    }

    /// [`follow`](Self::follow), and `default` (the business's language) when the text says
    /// nothing and the conversation has no language yet: every message leaves the conversation
    /// with one, so no reply goes out in a language picked by chance.
    pub fn follow_or(&self, text: &str, previous: Option<&str>, default: &str) -> String {
        self.follow(text, previous)
            .unwrap_or_else(|| default.to_string())
    }

    /// Reads `text` through the three layers of the module documentation.
    fn read(&self, text: &str) -> Reading {
        if looks_like_street_address(text) {
            return Reading::nothing();
        }
        let words = words(text);
        let mut tally = Tally::new();
        let mut index = 0;
        while index < words.len() {
            // Two-word formulas first: "bon dia", "bom dia", "buenos días", "thank you".
            if let Some(next) = words.get(index + 1)
                && let Some(entry) = self.lookup(&format!("{}_{}", words[index].lower, next.lower))
            {
                tally.known(&entry);
                index += 2;
                continue;
            }
            let word = &words[index];
            index += 1;
            if is_laughter(&word.lower) {
                continue;
            }
            if let Some(entry) = self.lookup(&word.lower) {
                tally.known(&entry);
                continue;
            }
            match word.split() {
                Some(parts) => {
                    for part in parts {
                        match self.lookup(&part) {
                            Some(entry) => tally.known(&entry),
                            None => tally.unknown(&part, word.capitalized),
                        }
                    }
                }
                None => tally.unknown(&word.lower, word.capitalized),
            }
        }
        if tally.evidence_words == 0 {
            return Reading::nothing();
        }
        // "Ana García", "Marbella": names of people and places are no evidence.
        if tally.lexicon_words == 0 && tally.unknown.len() <= 3 && tally.unknown_capitalized {
            return Reading::nothing();
        }
        if tally.unknown_letters >= STATISTICAL_MIN_LETTERS {
            let damping = (tally.unknown_letters as f64 / STATISTICAL_FULL_WEIGHT_LETTERS).min(1.0);
            let confidences = self.statistical_confidences(&tally.unknown.join(" "));
            for (log_weight, confidence) in tally.log_weights.iter_mut().zip(confidences) {
                *log_weight += damping * confidence.max(STATISTICAL_FLOOR).ln();
            }
        } else if tally.lexicon_words == 0 {
            return Reading::nothing();
        }
        let strength = if tally.evidence_words == 1 || tally.only_courtesy {
            Strength::Weak
        } else {
            Strength::Strong
        };
        Reading {
            probabilities: self.normalize(tally.log_weights),
            strength,
        }
    }

    /// Turns log-weights into probabilities over the contending languages.
    fn normalize(&self, log_weights: [f64; LANGUAGES]) -> [f64; LANGUAGES] {
        let top = (0..LANGUAGES)
            .filter(|&language| self.contenders[language])
            .map(|language| log_weights[language])
            .fold(f64::NEG_INFINITY, f64::max);
        let mut probabilities = [0.0_f64; LANGUAGES];
        for language in 0..LANGUAGES {
            if self.contenders[language] {
                probabilities[language] = (log_weights[language] - top).exp();
            }
        }
        let total: f64 = probabilities.iter().sum();
        probabilities.map(|probability| probability / total)
    }

    fn lookup(&self, word: &str) -> Option<Entry> {
        if let Some(entry) = self.exact.get(word) {
            return Some(*entry);
        }
        let folded = fold(word);
        if let Some(entry) = self.folded.get(&folded) {
            return Some(*entry);
        }
        // "holaaa", "graciass", "okk", "siii".
        let squeezed = squeeze(&folded);
        if squeezed != folded {
            return self.folded.get(&squeezed).copied();
        }
        None
    }

    /// The statistical reader's confidence per supported language (zero for non-contenders).
    fn statistical_confidences(&self, text: &str) -> [f64; LANGUAGES] {
        let mut confidences = [0.0; LANGUAGES];
        match &self.statistical {
            Statistical::Whatlang(detector) => {
                // whatlang tells its best guess and a confidence in it: the rest is spread evenly.
                let contenders = self.contenders.iter().filter(|c| **c).count() as f64;
                let Some(info) = detector.detect(text) else {
                    return confidences;
                };
                let best = 1.0 / contenders + (1.0 - 1.0 / contenders) * info.confidence();
                for language in 0..LANGUAGES {
                    if self.contenders[language] {
                        confidences[language] = if WHATLANG[language] == info.lang() {
                            best
                        } else {
                            (1.0 - best) / (contenders - 1.0)
                        };
                    }
                }
            }
            #[cfg(test)]
            Statistical::Lingua(detector) => {
                for (language, confidence) in detector.compute_language_confidence_values(text) {
                    let index = tests::LINGUA
                        .iter()
                        .position(|candidate| *candidate == language)
                        .expect("lingua language of SUPPORTED");
                    confidences[index] = confidence;
                }
            }
        }
        confidences
    }
}

/// The served languages named by `codes`, or an error naming the first code that is not one.
fn served_languages(codes: &[&str]) -> Result<[bool; LANGUAGES], String> {
    if codes.is_empty() {
        return Err("no language codes configured".to_string());
    }
    let mut served = [false; LANGUAGES];
    for code in codes {
        let normalized = code.trim().to_ascii_lowercase();
        let Some(language) = SUPPORTED
            .iter()
            .position(|supported| *supported == normalized)
        else {
            return Err(format!(
                "unsupported language code {code:?} (supported: {})",
                SUPPORTED.join(", ")
            ));
        };
        served[language] = true;
    }
    Ok(served)
}

fn contenders(served: [bool; LANGUAGES]) -> [bool; LANGUAGES] {
    if served.iter().filter(|served| **served).count() > 1 {
        served
    } else {
        [true; LANGUAGES]
    }
}

/// What the words of a text have said so far.
struct Tally {
    /// Sum of the logarithms of the words' weights, per supported language.
    log_weights: [f64; LANGUAGES],
    /// Words (or formulas) that are not neutral, known or not.
    evidence_words: usize,
    /// Of those, the ones the lexicon knows.
    lexicon_words: usize,
    /// Whether every lexicon word so far is a courtesy word and no word is unknown.
    only_courtesy: bool,
    /// Words the lexicon does not know, for the statistical reader.
    unknown: Vec<String>,
    unknown_letters: usize,
    /// Whether every unknown word starts with a capital, as names do.
    unknown_capitalized: bool,
}

impl Tally {
    fn new() -> Self {
        Tally {
            log_weights: [0.0; LANGUAGES],
            evidence_words: 0,
            lexicon_words: 0,
            only_courtesy: true,
            unknown: Vec::new(),
            unknown_letters: 0,
            unknown_capitalized: true,
        }
    }

    fn known(&mut self, entry: &Entry) {
        if entry.role == Role::Neutral {
            return;
        }
        for (log_weight, weight) in self.log_weights.iter_mut().zip(entry.weights) {
            *log_weight += weight.max(STRANGER).ln();
        }
        self.evidence_words += 1;
        self.lexicon_words += 1;
        self.only_courtesy &= entry.role == Role::Courtesy;
    }

    fn unknown(&mut self, word: &str, capitalized: bool) {
        let letters = word.chars().filter(|c| c.is_alphabetic()).count();
        if letters == 0 {
            return;
        }
        self.evidence_words += 1;
        self.only_courtesy = false;
        self.unknown_letters += letters;
        self.unknown_capitalized &= capitalized;
        self.unknown.push(word.to_string());
    }
}

#[cfg(test)]
mod tests;
