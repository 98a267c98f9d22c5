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

/// A word of a text: its spelling as written and in lower case.
struct Word {
    lower: String,
    capitalized: bool,
}

impl Word {
    /// The parts of a word with an apostrophe, for when the lexicon does not know it whole
    /// ("d'acord", "c'est" and "i'm" it knows): an elided article and the rest ("l'" +
    /// "appartement", "m'" + "interessa"), or an English stem and its clitic ("we" + "'d").
    fn split(&self) -> Option<[String; 2]> {
        const ENGLISH_CLITICS: [&str; 6] = ["m", "re", "ll", "ve", "d", "t"];
        let apostrophe = self.lower.find('\'')?;
        let tail = &self.lower[apostrophe + 1..];
        if apostrophe == 0 || tail.is_empty() {
            return None;
        }
        Some(if ENGLISH_CLITICS.contains(&tail) {
            [self.lower[..apostrophe].to_string(), format!("'{tail}")]
        } else {
            [self.lower[..=apostrophe].to_string(), tail.to_string()]
        })
    }
}

/// Splits `text` into words of letters (apostrophes inside words kept), skipping URLs, e-mail
/// addresses and every token with a digit ("12:30", "3ºB", "P-102", "10am", "800€", "14h").
fn words(text: &str) -> Vec<Word> {
    let mut words = Vec::new();
    for token in text.split_whitespace() {
        if token.contains("://")
            || token.starts_with("www.")
            || token.contains('@')
            || token.chars().any(char::is_numeric)
        {
            continue;
        }
        let mut start = None;
        for (offset, c) in token.char_indices() {
            let inside = c.is_alphabetic() || is_apostrophe(c);
            match (inside, start) {
                (true, None) => start = Some(offset),
                (false, Some(from)) => {
                    push_word(&mut words, &token[from..offset]);
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(from) = start {
            push_word(&mut words, &token[from..]);
        }
    }
    words
}

fn push_word(words: &mut Vec<Word>, original: &str) {
    let original = original.trim_matches(is_apostrophe);
    if original.is_empty() {
        return;
    }
    let lower: String = original
        .chars()
        .map(|c| if is_apostrophe(c) { '\'' } else { c })
        .flat_map(char::to_lowercase)
        .collect();
    let capitalized = original.chars().next().is_some_and(char::is_uppercase);
    words.push(Word { lower, capitalized });
}

fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '’' | '‘' | '´' | '`')
}

/// "C/ Mayor 5", "Calle Serrano 45, 3ºB", "Avda. de la Constitución 12": a street address is
/// written in the local language whatever the customer's language is.
fn looks_like_street_address(text: &str) -> bool {
    const STREET_TYPES: &str = "c cl calle avda av avenida plaza pza pl paseo pº ctra carretera \
        carrer rua ronda camino urb urbanización urbanizacion travesía";
    if !text.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    let Some(first) = text.split_whitespace().next() else {
        return false;
    };
    let first = first.trim_end_matches(['.', ',', '/']).to_lowercase();
    first.starts_with("c/")
        || STREET_TYPES
            .split_whitespace()
            .any(|street| street == first)
}

/// "jaja", "jajajaj", "jeje", "jsjs", "haha", "hehe", "kkkk", "rsrs", "xd", "lol": laughter in
/// any language.
fn is_laughter(word: &str) -> bool {
    let count = |wanted: char| word.chars().filter(|&c| c == wanted).count();
    let only = |allowed: &str| word.chars().all(|c| allowed.contains(c));
    (only("jaeiou") && count('j') >= 2)
        || (only("js") && word.len() >= 4)
        || (only("hae") && count('h') >= 2 && word.len() >= 4)
        || (only("k") && word.len() >= 3)
        || (only("rs") && word.starts_with("rs") && word.len() >= 4)
        || (word.starts_with("xd") && only("xd"))
        || matches!(word, "lol" | "lool" | "lmao")
}

/// `word` without accents: "gràcies" → "gracies", "disponível" → "disponivel".
fn fold(word: &str) -> String {
    word.chars()
        .map(|c| match c {
            'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => 'a',
            'ç' => 'c',
            'è' | 'é' | 'ê' | 'ë' => 'e',
            'ì' | 'í' | 'î' | 'ï' => 'i',
            'ñ' => 'n',
            'ò' | 'ó' | 'ô' | 'õ' | 'ö' => 'o',
            'ù' | 'ú' | 'û' | 'ü' => 'u',
            'ý' | 'ÿ' => 'y',
            other => other,
        })
        .collect()
}

/// `word` with each run of a repeated letter reduced to one: "holaaa" → "hola", "okk" → "ok".
fn squeeze(word: &str) -> String {
    let mut squeezed = String::with_capacity(word.len());
    let mut last = None;
    for c in word.chars() {
        if Some(c) != last {
            squeezed.push(c);
        }
        last = Some(c);
    }
    squeezed
}

/// Words that carry no evidence of a language (laughter is recognised by [`is_laughter`]).
const NEUTRAL: &str = "ok okay okey oki okis okk k kk super top ciao chao info wifi whatsapp \
    wsp email mail link pdf a ah ahh oh eh ey hey mmm mm hmm uf uff buf pff wow guau ups oops \
    yay bravo ole olé parking";

/// The lexicon: languages (with relative weights when a word leans to one, e.g. "es:3 ca:1"),
/// role, and words in lower case with their accents. "a_b" is a two-word formula. Words shared
/// by several served languages list all of them, so they do not push the reading to any one.
const LEXICON: &[(&str, Role, &str)] = &[
    // Spanish.
    (
        "es",
        Role::Courtesy,
        "buenas buenos buen bueno buena gracias grasias grax muchas muchísimas vale venga porfa \
         porfis xfa xfavor perfecto perfecta estupendo estupenda dale adiós saludos saludo \
         hasta luego guapa guapo igualmente encantado tranqui noches noche vaya disculpa \
         disculpe perdona perdone perdón besos besitos navidad buen_día buenos_días \
         buenas_tardes buenas_noches de_acuerdo un_saludo hasta_luego hasta_mañana \
         muchas_gracias mil_gracias feliz_navidad qué_tal",
    ),
    ("es:3 ca:1", Role::Courtesy, "hola holi holis holaa"),
    ("es pt", Role::Courtesy, "claro entendido de_nada por_favor"),
    ("pt es", Role::Courtesy, "ola"),
    (
        "es",
        Role::Content,
        "los las unos unas y pero cuando cuándo cuanto cuánto cuanta cuánta cuantas cuántas \
         cuantos cuántos cuál cual cuales dónde donde quién quien qué xq tmb también hay tiene \
         tienen tengo tenemos tienes hace hacer hacemos puedo puede puedes pueden podría \
         podríamos podéis quiero quieres queremos quisiera estoy estás están soy ya yo mis sus \
         muy mucho mucha más allí ahí ahora hoy ayer mañana después temprano lunes martes \
         miércoles jueves viernes llego llegamos llegar voy verlo llamar llamo llamada \
         llámame escribir escribo escríbeme sigue siguen todavía aún lejos precio alquiler \
         alquilar pisos habitación habitaciones baño baños cocina terraza garaje trastero \
         fianza nómina llaves ubicación dirección anuncio inmueble vivienda ático gastos \
         comunidad mascotas perro perros amueblado barato barrio venta cita firmar firmamos \
         puerta siento interesa interesado interesada mejor ningún ninguna alguien usted \
         ustedes vosotros contestáis mandáis pasas viene vienes lo_siento ibi casero nos_vemos \
         cuesta cuestan más_info mas_info eres palabra palabras empezando empezar empieza \
         repite repetir dime dame instrucciones",
    ),
    ("es:4 pt:1", Role::Content, "piso"),
    ("es:2 pt:1", Role::Content, "q"),
    ("es:2 pt:1 ca:1", Role::Content, "esta"),
    ("es:2 ca:1 de:1", Role::Content, "es"),
    ("es:3 fr:1", Role::Content, "y"),
    ("pt:2 es:1", Role::Content, "consigo preciso"),
    (
        "es pt",
        Role::Content,
        "por para porque pq tb como cómo podemos necesito necesitamos busco buscamos está \
         estamos somos ser nos os mas menos algo nada todo antes tarde tardes semana horas \
         domingo sábado vamos ir ver mandar mando mandas contrato gato vender apartamento \
         feliz dias días sobre vi esperar",
    ),
    (
        "es pt ca",
        Role::Content,
        "aquí aqui hora dia día cerca hipoteca fotos foto visitar enviar comprar oferta marcar \
         espera",
    ),
    ("es ca", Role::Content, "el ascensor mes"),
    ("es it", Role::Content, "lo mi su con poco uno viene"),
    ("es fr", Role::Content, "bien libre chalet"),
    ("es fr ca", Role::Content, "en disponible son venir les"),
    ("es it ca", Role::Content, "del al una"),
    ("es fr it", Role::Content, "le"),
    ("es it pt", Role::Content, "caro centro momento italiano"),
    ("es en", Role::Content, "he"),
    ("es fr ca it", Role::Content, "un"),
    ("es it ca fr", Role::Courtesy, "si sí genial"),
    ("es pt it ca", Role::Content, "casa visita o"),
    ("es pt fr it ca", Role::Content, "de me te se tu"),
    ("es fr it ca", Role::Content, "la"),
    ("es pt it", Role::Content, "da"),
    // English.
    (
        "en",
        Role::Courtesy,
        "hi hello hiya thanks thank thx ty tks tnx cheers please pls plz bye goodbye morning \
         evening afternoon night great perfect sure yes yeah yep yup nope sorry fine cool \
         awesome welcome brilliant lovely thank_you good_morning good_evening good_afternoon \
         good_night see_you no_worries all_good hi_there ok_thanks",
    ),
    (
        "en",
        Role::Content,
        "the and or is are was were be been it its it's i'm im i'll i've i'd you you're your u \
         ur we we're we'd we'll our they them this that these those what what's whats when \
         where how which who why can could would will should don't dont can't cant won't \
         didn't doesn't isn't aren't does did have has had get got there here some any many \
         much more still also just not anymore about with without for of from at by my she \
         his her him if than then now today tomorrow tonight yesterday week late early \
         outside inside flat apartment house rent price bedroom bedrooms bathroom bathrooms \
         bed beds pets allowed furnished deposit bills include included viewing view visit \
         offer sign location send call looking look buy sell beach near budget around \
         interested available speak english make like let check wife husband boiler broken \
         running photos pictures kitchen cost costs good nice time see want need know right \
         minutes instead 's 'm 're 'll 've 'd 't there's let's that's",
    ),
    ("en:4 ca:1", Role::Content, "i us"),
    ("en:3 pt:1", Role::Content, "to do"),
    ("en:2 de:1 it:1", Role::Content, "so"),
    ("en de it", Role::Content, "in"),
    ("en de", Role::Content, "an am"),
    ("en fr ca", Role::Content, "on"),
    ("en pt", Role::Content, "as"),
    ("en it", Role::Content, "come"),
    ("en fr", Role::Courtesy, "pardon"),
    // Portuguese.
    (
        "pt",
        Role::Courtesy,
        "olá oi oie obrigado obrigada obg obgd brigado brigada valeu blz beleza tchau bom boa \
         boas noite perfeito ótimo otimo show beijos abraço abraços combinado tá_bom tudo_bem \
         bom_dia boa_tarde boa_noite muito_obrigado muito_obrigada com_certeza",
    ),
    ("pt it", Role::Courtesy, "certo salve certamente"),
    (
        "pt",
        Role::Content,
        "você voce vc vcs vocês não nao sim tem têm tenho temos ainda disponível quero queremos \
         gostaria pode podem fica onde quantos quantas quais mais muito muita muitos muitas \
         também agora amanhã hoje ontem então isso esse essa eu ele ela nós né pra pro com na \
         nas um uma ao aos é estou tô tá vou vai chegando chegar chego aluguel aluguer garagem \
         varanda animais imóvel agendar fala falar português informações informação tudo bem \
         mas_não quanto_é custa custam",
    ),
    ("pt:3 it:1", Role::Content, "quarto quartos"),
    ("pt it", Role::Content, "posso quanto quando e interesse"),
    ("pt ca", Role::Content, "qual em"),
    ("pt fr", Role::Content, "à"),
    ("pt de", Role::Content, "das"),
    ("es pt ca", Role::Content, "dos"),
    ("es pt fr ca", Role::Content, "que"),
    ("pt it ca", Role::Content, "interessa"),
    // French.
    (
        "fr",
        Role::Courtesy,
        "bonjour bonsoir salut merci coucou oui ouais d'accord parfait désolé désolée excusez \
         bisous cordialement volontiers svp stp merci_beaucoup au_revoir à_bientôt \
         avec_plaisir bien_sûr bonne_journée bonne_soirée",
    ),
    (
        "fr",
        Role::Content,
        "je j' j'ai suis est c'est c' vous nous pas des du une avec pour dans sur ce cette ces \
         ça mais très bonne demain aujourd'hui appartement maison loyer visiter toujours \
         combien parlez français quel quelle quand où ou peut peux pouvez qu' intéressé \
         intéressée au aux voir elle chambre chambres salle soir s'il plaît coûte coûtent",
    ),
    ("fr:3 ca:1", Role::Courtesy, "merci"),
    ("fr it", Role::Content, "il non parle qui"),
    ("fr:2 it:1", Role::Content, "visite"),
    ("fr it ca", Role::Content, "l' d' s'"),
    ("fr ca", Role::Content, "m' t' n' et"),
    // German.
    (
        "de",
        Role::Courtesy,
        "hallo servus moin danke dank vielen schönen bitte nein tschüss tschüs genau gerne \
         perfekt prima klar guten_tag guten_morgen guten_abend vielen_dank danke_schön \
         alles_klar bis_morgen bis_dann",
    ),
    ("de:3 ca:1", Role::Courtesy, "ja"),
    (
        "de",
        Role::Content,
        "ich du sie wir ihr ist sind bin die der und nicht noch frei wohnung miete wie viel \
         kostet können kann wann wo später komme kommen sprechen deutsch mit für auf eine ein \
         einen einem gibt haben habe hat morgen heute zimmer balkon haus besichtigen \
         besichtigung termin zu im mir mich dich uns euch schon auch aber oder wenn dann ob bei \
         nach von vom zum zur über gut gute",
    ),
    ("de pt", Role::Content, "um"),
    // Italian.
    (
        "it",
        Role::Courtesy,
        "buongiorno buonasera buonanotte grazie prego perfetto va_bene grazie_mille a_presto \
         a_domani buona_giornata buona_serata benissimo ottimo bene scusa scusi arrivederci \
         d'accordo volentieri",
    ),
    (
        "it",
        Role::Content,
        "gli di della delle dei degli dello nel nella che è sono sei siamo ho hai abbiamo \
         ancora disponibile affitto quante quanti vederlo vedere domani oggi interessato \
         interessata appartamento camera camere bagno dove anche molto tutto adesso allora \
         all' dell' un' nell' quest' c'è mille costano",
    ),
    ("it ca", Role::Content, "per costa però"),
    // Catalan.
    (
        "ca",
        Role::Courtesy,
        "bona bones gràcies moltes perfecte adéu adeu sisplau val vinga entesos bon_dia \
         bona_tarda bona_nit moltes_gràcies fins_ara fins_demà molt_bé d'acord",
    ),
    ("ca fr", Role::Courtesy, "bon"),
    (
        "ca",
        Role::Content,
        "els amb què perquè també molt molta més està estic és són sóc tinc teniu tenen vull \
         volem puc podeu podem pot fer veure demà avui ahir aquest aquesta això allò quan \
         quant quants quantes pis lloguer habitació habitacions preu carrer ens setmana \
         dilluns dimarts dimecres dijous divendres dissabte diumenge tarda vostè vosaltres \
         hi_ha fins",
    ),
];

/// Builds the exact and accent-free lookup tables from [`LEXICON`] and [`NEUTRAL`]. A spelling
/// listed under several languages merges their weights.
fn build_lexicon() -> (HashMap<String, Entry>, HashMap<String, Entry>) {
    let mut exact: HashMap<String, Entry> = HashMap::new();
    let mut folded: HashMap<String, Entry> = HashMap::new();
    let neutral = Entry {
        weights: [0.0; LANGUAGES],
        role: Role::Neutral,
    };
    for word in NEUTRAL.split_whitespace() {
        exact.insert(word.to_string(), neutral);
        folded.insert(fold(word), neutral);
    }
    for (languages, role, words) in LEXICON {
        let mut weights = [0.0; LANGUAGES];
        for language in languages.split_whitespace() {
            let (code, weight) = match language.split_once(':') {
                Some((code, weight)) => (code, weight.parse::<f64>().unwrap_or(1.0)),
                None => (language, 1.0),
            };
            if let Some(index) = SUPPORTED.iter().position(|supported| *supported == code) {
                weights[index] = weight;
            }
        }
        let total: f64 = weights.iter().sum();
        let entry = Entry {
            weights: weights.map(|weight| weight / total),
            role: *role,
        };
        for word in words.split_whitespace() {
            merge(&mut exact, word.to_string(), entry);
            merge(&mut folded, fold(word), entry);
        }
    }
    (exact, folded)
}

/// Adds `entry` to `table` under `word`, averaging the weights with any entry already there; the
/// merged word is a courtesy word only if both are.
fn merge(table: &mut HashMap<String, Entry>, word: String, entry: Entry) {
    match table.get_mut(&word) {
        None => {
            table.insert(word, entry);
        }
        Some(existing) if existing.role == Role::Neutral => {}
        Some(existing) => {
            for (weight, added) in existing.weights.iter_mut().zip(entry.weights) {
                *weight = (*weight + added) / 2.0;
            }
            if entry.role == Role::Content {
                existing.role = Role::Content;
            }
        }
    }
}

#[cfg(test)]
mod tests;
