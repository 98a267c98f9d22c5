//! The fast path's router: which subgraph assistant a message belongs to, decided without an LLM,
//! or no decision at all. A wrong route is worse than none (the wrong assistant answers the
//! customer), so the router abstains whenever it is unsure and the primary assistant's LLM
//! decides as before.
//!
//! It is learned from what staff already edit: every prompt's `examples` (the primary agents'
//! examples teach what belongs to no subgraph: greetings, negations, two requests in one) and
//! the subgraphs' `keywords`. It is rebuilt whenever the prompts load, in a few milliseconds, and
//! needs no network and no model file.
//!
//! The model is a softmax (multinomial logistic) regression over sparse features of the message:
//! - words and word pairs, lowercase and without accents ([`tokens`]);
//! - character n-grams of each word, so typos and missing accents still look alike ("ipoteca",
//!   "hipotecas");
//! - each agent's keywords found in the message, longer ones hiding shorter ones inside them;
//! - negation: the words after "no", "nunca", "not", "não"… become negated words, and carry no
//!   n-grams, so «No quiero una cita» does not read as a request for an appointment.
//!
//! A route is taken only when the best class is a subgraph the user may reach and its
//! probability reaches [`Params::min_confidence`]. The figures it reaches are in `docs/prompts.md`
//! (`zaguan prompts eval`).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use super::keywords::{KeywordIndex, tokens};

/// The class of every primary agent's example: "no subgraph", so the router abstains.
const PRIMARY: usize = 0;

/// How much of a message is read, in words: a long message is not a one-line request.
const MAX_WORDS: usize = 80;

/// Words after which the next few words are negated.
const NEGATIONS: &[&str] = &[
    "no", "nunca", "ni", "tampoco", "jamas", "not", "never", "nao", "nem", "nope",
];
/// English contractions end in a "t" token once the apostrophe splits them ("don't").
const CONTRACTED: &[&str] = &["don", "doesn", "didn", "won", "isn", "aren", "can", "wasn"];

/// What the router is built with. [`Params::DEFAULT`] was chosen on the training split's
/// cross-validation (`cargo run --release --example route_tune`), never on the held-out corpus.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// How sure the router must be to route when the message's keywords name that agent and
    /// no other: the best class's probability.
    pub min_confidence: f32,
    /// How sure it must be otherwise; `None`: never without the keywords' agreement.
    pub sure_confidence: Option<f32>,
    /// How many words a negation reaches.
    pub negation_scope: usize,
    /// Feature weights by kind, before the vector is scaled to unit length.
    pub word: f32,
    pub pair: f32,
    pub ngram: f32,
    pub keyword: f32,
    /// Character n-grams from `min_gram` to `max_gram` chars (word boundaries included).
    pub min_gram: usize,
    pub max_gram: usize,
    /// Training: passes over the examples, learning rate and L2 penalty.
    pub epochs: usize,
    pub learning_rate: f32,
    pub l2: f32,
}

impl Params {
    pub const DEFAULT: Params = Params {
        min_confidence: 0.90,
        sure_confidence: None,
        negation_scope: 3,
        word: 1.0,
        pair: 0.6,
        ngram: 0.25,
        keyword: 1.2,
        min_gram: 3,
        max_gram: 5,
        epochs: 80,
        learning_rate: 0.8,
        l2: 1e-4,
    };
}

impl Default for Params {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What the router decided for one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'r> {
    /// Enter this subgraph agent.
    Route { agent: &'r str, confidence: f32 },
    /// Let the LLM decide, and why.
    Abstain(Abstention),
}

/// Why the router did not route.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Abstention {
    /// The message reads as the primary assistant's (a greeting, a negation, two requests…).
    Primary { confidence: f32 },
    /// The best subgraph is not sure enough.
    Unsure { confidence: f32 },
    /// The best subgraph is one the caller may not enter (its own, or not for the role).
    Unreachable,
    /// Nothing to read (no words), or nothing learned.
    Empty,
}

impl Decision<'_> {
    pub fn agent(&self) -> Option<&str> {
        match self {
            Decision::Route { agent, .. } => Some(agent),
            Decision::Abstain(_) => None,
        }
    }
}

/// The best class of a message and its probability, whatever the caller may reach.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading<'r> {
    /// `None`: the primary class.
    pub agent: Option<&'r str>,
    pub confidence: f32,
    /// Whether the message's keywords (outside a negation) name this agent and no other.
    pub keywords_agree: bool,
}

/// The learned router. Cheap to query (microseconds), rebuilt with every prompt set.
#[derive(Debug, Clone, Default)]
pub struct FastRouter {
    /// `classes[0]` is the primary class (empty name); then the subgraph agents, sorted.
    classes: Vec<String>,
    /// Feature hash → one weight per class.
    weights: HashMap<u64, Box<[f32]>>,
    bias: Vec<f32>,
    keywords: KeywordIndex,
    params: Params,
}

impl FastRouter {
    /// Learns from `subgraphs` (agent name, its examples and keywords) and `primary_examples`
    /// (the primary agents' examples). Deterministic: the same prompts give the same router.
    pub fn train<'a>(
        subgraphs: impl IntoIterator<Item = (&'a str, &'a [String], &'a [String])>,
        primary_examples: impl IntoIterator<Item = &'a String>,
    ) -> Self {
        Self::train_with(Params::DEFAULT, subgraphs, primary_examples)
    }

    /// [`train`](Self::train), or the router already learned from the same examples and
    /// keywords in this process: a prompt reload that leaves them alone (a body edit) and every
    /// engine built from the same prompts reuse the model instead of training it again.
    pub fn learned<'a>(
        subgraphs: &[(&'a str, &'a [String], &'a [String])],
        primary_examples: &[&'a String],
    ) -> Arc<Self> {
        /// Routers learned, newest last, by a hash of what they learned from.
        static LEARNED: Mutex<Vec<(u64, Arc<FastRouter>)>> = Mutex::new(Vec::new());
        const KEPT: usize = 4;

        let mut hasher = DefaultHasher::new();
        format!("{:?}", Params::DEFAULT).hash(&mut hasher);
        subgraphs.hash(&mut hasher);
        primary_examples.hash(&mut hasher);
        let key = hasher.finish();
        let cached = |learned: &Vec<(u64, Arc<FastRouter>)>| {
            learned
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, router)| router.clone())
        };
        let lock = || {
            LEARNED
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        };
        if let Some(router) = cached(&lock()) {
            return router;
        }
        // Trained outside the lock: two loads at once may both train, and agree.
        let router = Arc::new(Self::train(
            subgraphs.iter().copied(),
            primary_examples.iter().copied(),
        ));
        let mut learned = lock();
        if let Some(router) = cached(&learned) {
            return router;
        }
        learned.push((key, router.clone()));
        if learned.len() > KEPT {
            learned.remove(0);
        }
        router
    }

    /// [`train`](Self::train) with other parameters, to tune them.
    pub fn train_with<'a>(
        params: Params,
        subgraphs: impl IntoIterator<Item = (&'a str, &'a [String], &'a [String])>,
        primary_examples: impl IntoIterator<Item = &'a String>,
    ) -> Self {
        let subgraphs: Vec<_> = subgraphs.into_iter().collect();
        let keywords = KeywordIndex::new(
            subgraphs
                .iter()
                .map(|(name, _, keywords)| (*name, keywords.iter())),
        );
        let mut names: Vec<&str> = subgraphs.iter().map(|(name, ..)| *name).collect();
        names.sort_unstable();
        names.dedup();
        let mut classes = vec![String::new()];
        classes.extend(names.iter().map(|name| name.to_string()));

        let mut router = FastRouter {
            weights: HashMap::new(),
            bias: vec![0.0; classes.len()],
            classes,
            keywords,
            params,
        };
        let mut samples: Vec<(Vec<(u64, f32)>, usize)> = Vec::new();
        for example in primary_examples {
            samples.push((router.features(example).0, PRIMARY));
        }
        for (name, examples, keywords) in &subgraphs {
            let class = router.class_of(name).expect("listed above");
            for text in examples.iter().chain(keywords.iter()) {
                samples.push((router.features(text).0, class));
            }
        }
        samples.retain(|(features, _)| !features.is_empty());
        if samples.is_empty() {
            return router;
        }
        router.fit(&samples);
        router
    }

    fn class_of(&self, name: &str) -> Option<usize> {
        self.classes[1..]
            .binary_search_by(|class| class.as_str().cmp(name))
            .ok()
            .map(|i| i + 1)
    }

    /// Softmax regression by stochastic gradient descent, classes weighted to count equally.
    /// Trained over dense feature indices, then kept as a map from feature hash to weights.
    fn fit(&mut self, samples: &[(Vec<(u64, f32)>, usize)]) {
        let classes = self.classes.len();
        let mut index: HashMap<u64, usize> = HashMap::new();
        let dense: Vec<(Vec<(usize, f32)>, usize)> = samples
            .iter()
            .map(|(features, class)| {
                let features = features
                    .iter()
                    .map(|(feature, value)| {
                        let next = index.len();
                        (*index.entry(*feature).or_insert(next), *value)
                    })
                    .collect();
                (features, *class)
            })
            .collect();

        let mut counts = vec![0usize; classes];
        for (_, class) in &dense {
            counts[*class] += 1;
        }
        let present = counts.iter().filter(|&&n| n > 0).count() as f32;
        let balance: Vec<f32> = counts
            .iter()
            .map(|&n| {
                if n == 0 {
                    0.0
                } else {
                    dense.len() as f32 / (present * n as f32)
                }
            })
            .collect();

        let mut weights = vec![0.0f32; index.len() * classes];
        let mut order: Vec<usize> = (0..dense.len()).collect();
        // A fixed shuffle (a linear congruential generator): the same examples give the same
        // router on every instance.
        let mut seed: u64 = 0x5eed;
        let mut scores = vec![0.0f32; classes];
        for epoch in 0..self.params.epochs {
            for i in (1..order.len()).rev() {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                order.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let rate = self.params.learning_rate / (1.0 + epoch as f32 * 0.1);
            for &i in &order {
                let (features, class) = &dense[i];
                scores.copy_from_slice(&self.bias);
                for (feature, value) in features {
                    let row = &weights[feature * classes..][..classes];
                    for (score, weight) in scores.iter_mut().zip(row) {
                        *score += weight * value;
                    }
                }
                softmax(&mut scores);
                let weight = balance[*class];
                for (c, p) in scores.iter_mut().enumerate() {
                    *p = weight * (*p - if c == *class { 1.0 } else { 0.0 });
                    self.bias[c] -= rate * *p;
                }
                for (feature, value) in features {
                    let row = &mut weights[feature * classes..][..classes];
                    for (w, gradient) in row.iter_mut().zip(&scores) {
                        *w -= rate * (gradient * value + self.params.l2 * *w);
                    }
                }
            }
        }
        self.weights = index
            .into_iter()
            .map(|(feature, i)| (feature, weights[i * classes..][..classes].into()))
            .collect();
    }

    /// Class probabilities of a feature vector, into `out`.
    fn probabilities(&self, features: &[(u64, f32)], out: &mut [f32]) {
        out.copy_from_slice(&self.bias);
        for (feature, value) in features {
            if let Some(w) = self.weights.get(feature) {
                for (score, weight) in out.iter_mut().zip(w.iter()) {
                    *score += weight * value;
                }
            }
        }
        softmax(out);
    }

    /// Every class's probability for `text`, and the agents its keywords name; `None` with
    /// nothing to read or nothing learned.
    fn distribution<'t>(&'t self, text: &str) -> Option<(Vec<f32>, Vec<&'t str>)> {
        let (features, keyword_agents) = self.features(text);
        if features.is_empty() || self.classes.len() < 2 {
            return None;
        }
        let mut probabilities = vec![0.0; self.classes.len()];
        self.probabilities(&features, &mut probabilities);
        Some((probabilities, keyword_agents))
    }

    /// The probability that `text` belongs to one of the subgraphs `agents` accepts.
    pub fn probability(&self, text: &str, agents: impl Fn(&str) -> bool) -> f32 {
        let Some((probabilities, _)) = self.distribution(text) else {
            return 0.0;
        };
        self.classes
            .iter()
            .zip(&probabilities)
            .skip(1)
            .filter(|(class, _)| agents(class))
            .map(|(_, p)| p)
            .sum()
    }

    /// The best class of `text` and its probability.
    pub fn read(&self, text: &str) -> Option<Reading<'_>> {
        let (probabilities, keyword_agents) = self.distribution(text)?;
        let (best, confidence) =
            probabilities
                .iter()
                .copied()
                .enumerate()
                .fold(
                    (PRIMARY, f32::MIN),
                    |best, (c, p)| {
                        if p > best.1 { (c, p) } else { best }
                    },
                );
        let agent = (best != PRIMARY).then(|| self.classes[best].as_str());
        Some(Reading {
            agent,
            confidence,
            keywords_agree: agent.is_some_and(|agent| keyword_agents == [agent]),
        })
    }

    /// Routes `text` to the subgraph it belongs to when `reachable` accepts that agent and the
    /// router is sure enough; abstains otherwise.
    pub fn decide(&self, text: &str, reachable: impl Fn(&str) -> bool) -> Decision<'_> {
        let Some(reading) = self.read(text) else {
            return Decision::Abstain(Abstention::Empty);
        };
        let confidence = reading.confidence;
        let bar = if reading.keywords_agree {
            self.params.min_confidence
        } else {
            self.params.sure_confidence.unwrap_or(f32::INFINITY)
        };
        match reading.agent {
            None => Decision::Abstain(Abstention::Primary { confidence }),
            Some(agent) if !reachable(agent) => Decision::Abstain(Abstention::Unreachable),
            Some(_) if confidence < bar => Decision::Abstain(Abstention::Unsure { confidence }),
            Some(agent) => Decision::Route { agent, confidence },
        }
    }

    /// The message's features, unit length, sorted by hash and merged; and the agents its
    /// keywords name outside a negation, sorted and distinct.
    fn features(&self, text: &str) -> (Vec<(u64, f32)>, Vec<&str>) {
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

/// Scores to probabilities, in place.
fn softmax(scores: &mut [f32]) {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for score in scores.iter_mut() {
        *score = (*score - max).exp();
        sum += *score;
    }
    for score in scores.iter_mut() {
        *score /= sum;
    }
}

/// Which words a negation covers: the `scope` words after a negation word.
fn negated_words(words: &[String], scope: usize) -> Vec<bool> {
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
fn hash(kind: u8, parts: &[&str]) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn router() -> FastRouter {
        let appointments = strings(&[
            "quiero agendar una visita",
            "puedo ver el piso el jueves",
            "cambia mi cita de mañana",
            "cuando puedo ir a verlo",
        ]);
        let mortgages = strings(&[
            "cuanto me saldria la hipoteca",
            "que entrada necesito",
            "me financiais la compra",
            "cuota mensual a 30 años",
        ]);
        let primary = strings(&[
            "hola buenas",
            "gracias",
            "no quiero una cita",
            "quienes sois",
            "adios",
        ]);
        let appointment_keywords = strings(&["cita", "visita", "agendar"]);
        let mortgage_keywords = strings(&["hipoteca", "financiación", "cuota"]);
        FastRouter::train(
            [
                (
                    "appointment_assistant",
                    appointments.as_slice(),
                    appointment_keywords.as_slice(),
                ),
                (
                    "mortgage_loan_assistant",
                    mortgages.as_slice(),
                    mortgage_keywords.as_slice(),
                ),
            ],
            &primary,
        )
    }

    #[test]
    fn routes_what_it_learned_and_abstains_on_greetings() {
        let router = router();
        assert_eq!(
            router.decide("Quiero agendar una visita", |_| true).agent(),
            Some("appointment_assistant")
        );
        assert_eq!(
            router
                .decide("cuanto me saldria la hipoteca", |_| true)
                .agent(),
            Some("mortgage_loan_assistant")
        );
        assert!(matches!(
            router.decide("hola buenas", |_| true),
            Decision::Abstain(Abstention::Primary { .. })
        ));
    }

    #[test]
    fn a_negated_request_is_not_routed() {
        let router = router();
        assert_eq!(router.decide("No quiero una cita", |_| true).agent(), None);
    }

    #[test]
    fn an_unreachable_best_agent_abstains_rather_than_taking_the_next() {
        let router = router();
        assert_eq!(
            router.decide("Quiero agendar una visita", |agent| agent
                != "appointment_assistant"),
            Decision::Abstain(Abstention::Unreachable)
        );
    }

    #[test]
    fn nothing_to_read_or_nothing_learned_abstains() {
        let router = router();
        for text in ["", "👍", "   ", "?!"] {
            assert_eq!(
                router.decide(text, |_| true),
                Decision::Abstain(Abstention::Empty),
                "{text:?}"
            );
        }
        let empty = FastRouter::train([], &[]);
        assert_eq!(
            empty.decide("quiero una cita", |_| true),
            Decision::Abstain(Abstention::Empty)
        );
    }

    #[test]
    fn training_is_deterministic() {
        let (a, b) = (router(), router());
        for text in ["una cita el lunes", "hipoteca fija o variable", "hola"] {
            assert_eq!(a.read(text), b.read(text));
        }
    }

    #[test]
    fn negation_covers_the_next_words_only() {
        let words = strings(&["no", "quiero", "una", "cita", "sino", "info"]);
        assert_eq!(
            negated_words(&words, 3),
            [false, true, true, true, false, false]
        );
        let words = strings(&["i", "don", "t", "want", "a", "visit"]);
        assert_eq!(
            negated_words(&words, 3),
            [false, false, false, true, true, true]
        );
    }
}
