//! A message's words as the detector reads them: split, folded, squeezed; laughter and street
//! addresses recognised.

/// A word of a text: its spelling as written and in lower case.
pub(super) struct Word {
    pub(super) lower: String,
    pub(super) capitalized: bool,
}

impl Word {
    /// The parts of a word with an apostrophe, for when the lexicon does not know it whole
    /// ("d'acord", "c'est" and "i'm" it knows): an elided article and the rest ("l'" +
    /// "appartement", "m'" + "interessa"), or an English stem and its clitic ("we" + "'d").
    pub(super) fn split(&self) -> Option<[String; 2]> {
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
pub(super) fn words(text: &str) -> Vec<Word> {
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

pub(super) fn push_word(words: &mut Vec<Word>, original: &str) {
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

pub(super) fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '’' | '‘' | '´' | '`')
}

/// "C/ Mayor 5", "Calle Serrano 45, 3ºB", "Avda. de la Constitución 12": a street address is
/// written in the local language whatever the customer's language is.
pub(super) fn looks_like_street_address(text: &str) -> bool {
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
pub(super) fn is_laughter(word: &str) -> bool {
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
pub(super) fn fold(word: &str) -> String {
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
pub(super) fn squeeze(word: &str) -> String {
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
