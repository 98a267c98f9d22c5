//! Whether the routing corpora measure what they claim: a held-out line that is a near copy of
//! a line the router was tuned on (the prompts' examples, `train`, `dev_varied`) measures
//! memory, not routing; a keyword only held-out lines contain was tuned on them.
//!
//! Two lines are near copies when their character 3-grams or their words overlap by a Jaccard
//! index of at least [`NEAR_COPY`], after the router's own normalisation (lower case, no
//! accents, words only). Pairs are found by prefix filtering: two sets that similar must share
//! one of the rarest grams of each, so only those pairs are compared.

use std::collections::{HashMap, HashSet};

use super::keywords::tokens;

/// The Jaccard index from which two lines count as one.
pub const NEAR_COPY: f64 = 0.8;

/// Lines of fewer words are left out: «ok», «hola, buenas tardes» or «gracias, hasta luego» are
/// everyone's, written the same by any two writers, and never routed.
pub const MIN_WORDS: usize = 4;

/// A held-out line too close to a tuning line.
#[derive(Debug, Clone, PartialEq)]
pub struct NearCopy {
    /// Indices into the two lists compared.
    pub held_out: usize,
    pub tuning: usize,
    /// `chars` (3-grams) or `words`, and the index.
    pub measure: &'static str,
    pub jaccard: f64,
}

/// Every pair of a `held_out` line and a `tuning` line that are near copies, by either measure;
/// lines of fewer than [`MIN_WORDS`] words aside.
pub fn near_copies(held_out: &[&str], tuning: &[&str]) -> Vec<NearCopy> {
    let long = |text: &str| tokens(text).len() >= MIN_WORDS;
    let mut found = Vec::new();
    for (measure, grams) in [
        ("words", words as fn(&str) -> HashSet<String>),
        ("chars", trigrams),
    ] {
        let sets = |lines: &[&str]| -> Vec<HashSet<String>> {
            lines
                .iter()
                .map(|t| if long(t) { grams(t) } else { HashSet::new() })
                .collect()
        };
        let (held, tuned) = (sets(held_out), sets(tuning));
        for (i, j, jaccard) in similar_pairs(&held, &tuned, NEAR_COPY) {
            if !found
                .iter()
                .any(|c: &NearCopy| c.held_out == i && c.tuning == j)
            {
                found.push(NearCopy {
                    held_out: i,
                    tuning: j,
                    measure,
                    jaccard,
                });
            }
        }
    }
    found.sort_by_key(|c| (c.held_out, c.tuning));
    found
}

/// The keywords (of `keywords`) that some `held_out` line contains and no `tuning` line does.
pub fn held_out_only<'k>(keywords: &[&'k str], held_out: &[&str], tuning: &[&str]) -> Vec<&'k str> {
    let held: Vec<Vec<String>> = held_out.iter().map(|t| tokens(t)).collect();
    let tuned: Vec<Vec<String>> = tuning.iter().map(|t| tokens(t)).collect();
    keywords
        .iter()
        .copied()
        .filter(|keyword| {
            let words = tokens(keyword);
            !words.is_empty()
                && held.iter().any(|line| contains(line, &words))
                && !tuned.iter().any(|line| contains(line, &words))
        })
        .collect()
}

/// Whether `line` holds `keyword`'s words in a row, a plural `-s`/`-es` allowed on each, as
/// the router's keywords match.
fn contains(line: &[String], keyword: &[String]) -> bool {
    let same = |word: &str, key: &str| {
        word == key
            || word
                .strip_prefix(key)
                .is_some_and(|rest| rest == "s" || rest == "es")
    };
    line.windows(keyword.len())
        .any(|window| window.iter().zip(keyword).all(|(w, k)| same(w, k)))
}

fn words(text: &str) -> HashSet<String> {
    tokens(text).into_iter().collect()
}

fn trigrams(text: &str) -> HashSet<String> {
    let chars: Vec<char> = format!(" {} ", tokens(text).join(" ")).chars().collect();
    chars.windows(3).map(|w| w.iter().collect()).collect()
}

/// `(i, j, jaccard)` for every `a[i]`, `b[j]` at least `threshold` alike.
fn similar_pairs(
    a: &[HashSet<String>],
    b: &[HashSet<String>],
    threshold: f64,
) -> Vec<(usize, usize, f64)> {
    // Rarest first: a prefix of rare grams is a short list of candidates.
    let mut frequency: HashMap<&str, usize> = HashMap::new();
    for set in a.iter().chain(b) {
        for gram in set {
            *frequency.entry(gram.as_str()).or_default() += 1;
        }
    }
    let ordered = |set: &HashSet<String>| -> Vec<String> {
        let mut grams: Vec<String> = set.iter().cloned().collect();
        grams.sort_by(|x, y| {
            frequency[x.as_str()]
                .cmp(&frequency[y.as_str()])
                .then_with(|| x.cmp(y))
        });
        grams
    };
    // Jaccard ≥ t needs |x ∩ y| ≥ t·|x|: one of x's first |x| − ⌈t·|x|⌉ + 1 grams is in y.
    let prefix = |len: usize| len - (threshold * len as f64).ceil() as usize + 1;
    let mut index: HashMap<String, Vec<usize>> = HashMap::new();
    for (j, set) in b.iter().enumerate() {
        let grams = ordered(set);
        for gram in grams.into_iter().take(prefix(set.len())) {
            index.entry(gram).or_default().push(j);
        }
    }
    let mut pairs = Vec::new();
    for (i, set) in a.iter().enumerate().filter(|(_, set)| !set.is_empty()) {
        let mut candidates: Vec<usize> = ordered(set)
            .iter()
            .take(prefix(set.len()))
            .filter_map(|gram| index.get(gram))
            .flatten()
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        for j in candidates {
            let shared = set.intersection(&b[j]).count();
            let jaccard = shared as f64 / (set.len() + b[j].len() - shared) as f64;
            if jaccard >= threshold {
                pairs.push((i, j, jaccard));
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_with_another_phone_number_or_accent_is_found_and_a_new_line_is_not() {
        let tuning = [
            "quiero ver el piso de ruzafa el jueves por la tarde, mi numero es 600111222",
            "hola buenas",
        ];
        let held_out = [
            "Quiero ver el piso de Ruzafa el jueves por la tarde, mi número es 600999888",
            "¿cuánto me costaría la hipoteca a 30 años?",
        ];
        let copies = near_copies(&held_out, &tuning);
        assert_eq!(copies.len(), 1, "{copies:?}");
        assert_eq!((copies[0].held_out, copies[0].tuning), (0, 0));
        assert!(copies[0].jaccard >= NEAR_COPY);
    }

    #[test]
    fn a_keyword_only_held_out_lines_hold_is_named() {
        let keywords = ["ahorros", "hipoteca", "cita"];
        let tuning = ["¿me sale la hipoteca?", "nada"];
        let held_out = ["tengo unos ahorros", "las hipotecas están caras"];
        assert_eq!(held_out_only(&keywords, &held_out, &tuning), ["ahorros"]);
    }
}
