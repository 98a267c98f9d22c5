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
//! A route is taken only when the best class is a subgraph the user may reach, and one of two
//! opinions backs the model's:
//! - the message's keywords name that agent and no other, and its probability reaches
//!   [`Params::min_confidence`];
//! - or the keywords name no other agent, the learned example nearest to the message (cosine over
//!   the same features) is that agent's, and the probability reaches
//!   [`Params::neighbour_confidence`].
//!
//! Either way it abstains when the message's clauses (cut at sentence ends and at «y de paso»,
//! «and also»…) ask two different subgraphs for something (a clause a cue announced counts at a
//! lower bar: [`Params::second_request`]), and, while a subgraph holds the conversation, when
//! the message carries on from it («vale, y si ofrezco 200, cuánto baja?»). Those two were found
//! on messages written apart from the examples, in other styles (typos, other dialects, voice
//! notes: `tests/data/routing/dev_varied.jsonl`). The figures it reaches are in
//! `docs/prompts.md` (`zaguan prompts eval`).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

mod reading;
mod training;

use super::keywords::KeywordIndex;
use reading::{CLAUSE_CONFIDENCE, clauses, continues, segments};

/// The class of every primary agent's example: "no subgraph", so the router abstains.
const PRIMARY: usize = 0;

/// How much of a message is read, in words: a long message is not a one-line request.
const MAX_WORDS: usize = 80;

/// What the router is built with. [`Params::DEFAULT`] was chosen on the training split's
/// cross-validation (`cargo run --release --example route_tune`), never on the held-out corpus.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// How sure the router must be to route when the message's keywords name that agent and
    /// no other: the best class's probability.
    pub min_confidence: f32,
    /// How sure it must be when the keywords name no agent, if the learned example nearest to
    /// the message is of that agent and at least [`Params::min_neighbour`] alike (cosine).
    pub neighbour_confidence: f32,
    pub min_neighbour: f32,
    /// How sure the router must be of a clause's best subgraph to count it as a second request
    /// when a cue («y también», «de paso», «and also») opened it; the clause's own best class
    /// may still be the primary's. Chosen on `tests/data/routing/dev_varied.jsonl` (0.20–0.30
    /// are alike there), the file of other styles; the held-out files never chose it.
    pub second_request: f32,
    /// How sure the router may be of another subgraph in one part of the message (cut at commas
    /// and «pero» too, [`Reading::rival`]) and still route it.
    pub rival: f32,
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
        min_confidence: 0.95,
        neighbour_confidence: 0.80,
        min_neighbour: 0.40,
        second_request: 0.25,
        rival: 0.4,
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
    /// The message's clauses ask two different subgraphs for something.
    TwoRequests,
    /// The best subgraph is the one holding the conversation: it keeps it.
    Holder,
    /// A subgraph holds the conversation and the message carries on from it («y si ofrezco
    /// 200, cuánto baja?»): it keeps it.
    Continues,
    /// Nothing to read (no words), or nothing learned.
    Empty,
    /// The best subgraph needs something of the contact's situation they lack (the visit
    /// follow-up, a visit made).
    Situation { confidence: f32 },
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
    /// Whether the message's keywords (outside a negation) name another agent than this one:
    /// most often two requests in one message.
    pub keywords_conflict: bool,
    /// Whether the message's clauses, read one by one, ask for different subgraphs: two
    /// requests in one message, which the primary assistant answers.
    pub two_requests: bool,
    /// The cosine similarity of the nearest learned example of the best subgraph, when the
    /// nearest learned example of all is of that subgraph: a second opinion from the examples
    /// themselves, which a linear model alone does not give.
    pub neighbour: Option<f32>,
    /// The probability of the strongest other subgraph one part of the message (cut at commas
    /// and «pero» too) reads as: the context before a request, naming another assistant.
    pub rival: f32,
    /// Whether the message carries on from the one before («y el de la playa?»), which keeps
    /// it with a subgraph holding the conversation.
    pub continues: bool,
}

/// The learned router. Cheap to query (microseconds), rebuilt with every prompt set.
#[derive(Debug, Clone, Default)]
pub struct FastRouter {
    /// `classes[0]` is the primary class (empty name); then the subgraph agents, sorted.
    classes: Vec<String>,
    /// Feature hash → its row in `rows`: one weight per class. Rows in one vector, and the
    /// postings below in another, rather than a small allocation per feature: the router is
    /// held for the process's life, and it was about 9 MB of an idle service's heap.
    weights: HashMap<u64, u32>,
    rows: Vec<f32>,
    bias: Vec<f32>,
    keywords: KeywordIndex,
    /// Feature hash → the learned examples that have it, with its value there: the examples
    /// by their features, for the nearest one to a message.
    postings: HashMap<u64, (u32, u32)>,
    /// The postings' lists, end to end: `postings` holds each one's start and length.
    posting_lists: Vec<(u32, f32)>,
    /// The class of every learned example, by its index in `postings`.
    example_classes: Vec<u16>,
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
            rows: Vec::new(),
            bias: vec![0.0; classes.len()],
            classes,
            keywords,
            postings: HashMap::new(),
            posting_lists: Vec::new(),
            example_classes: Vec::new(),
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
        let mut postings: HashMap<u64, Vec<(u32, f32)>> = HashMap::new();
        for (i, (features, class)) in samples.iter().enumerate() {
            router.example_classes.push(*class as u16);
            for (feature, value) in features {
                postings
                    .entry(*feature)
                    .or_default()
                    .push((i as u32, *value));
            }
        }
        router
            .posting_lists
            .reserve_exact(postings.values().map(Vec::len).sum());
        router.postings.reserve(postings.len());
        for (feature, list) in postings {
            let start = router.posting_lists.len() as u32;
            router.posting_lists.extend_from_slice(&list);
            router.postings.insert(feature, (start, list.len() as u32));
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

    /// Class probabilities of a feature vector, into `out`.
    fn probabilities(&self, features: &[(u64, f32)], out: &mut [f32]) {
        out.copy_from_slice(&self.bias);
        for (feature, value) in features {
            if let Some(&row) = self.weights.get(feature) {
                let w = &self.rows[row as usize * out.len()..][..out.len()];
                for (score, weight) in out.iter_mut().zip(w) {
                    *score += weight * value;
                }
            }
        }
        softmax(out);
    }

    /// Every class's probability for `text`, the agents its keywords name and its features;
    /// `None` with nothing to read or nothing learned.
    fn distribution(&self, text: &str) -> Option<Distribution<'_>> {
        let (features, keyword_agents) = self.features(text);
        if features.is_empty() || self.classes.len() < 2 {
            return None;
        }
        let mut probabilities = vec![0.0; self.classes.len()];
        self.probabilities(&features, &mut probabilities);
        Some(Distribution {
            probabilities,
            keyword_agents,
            features,
        })
    }

    /// The learned example nearest to a feature vector (both unit length, so the dot product
    /// is the cosine): its class and similarity.
    fn nearest(&self, features: &[(u64, f32)]) -> Option<(usize, f32)> {
        let mut similarity = vec![0.0f32; self.example_classes.len()];
        for (feature, value) in features {
            let list = self.postings.get(feature).map_or(&[][..], |&(start, len)| {
                &self.posting_lists[start as usize..][..len as usize]
            });
            for (example, weight) in list {
                similarity[*example as usize] += value * weight;
            }
        }
        similarity
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(example, s)| (usize::from(self.example_classes[example]), *s))
    }

    /// The probability that `text` belongs to one of the subgraphs `agents` accepts.
    pub fn probability(&self, text: &str, agents: impl Fn(&str) -> bool) -> f32 {
        let Some(Distribution { probabilities, .. }) = self.distribution(text) else {
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
        self.read_for(text, |_| true)
    }

    /// The best class of `text` among the primary class and the subgraphs `open` accepts (those
    /// the sender's role reaches), with the probabilities of the others shared among them: an
    /// owner's «¿podéis cambiar las fotos?» is not half a prospect's question about a listing.
    pub fn read_for(&self, text: &str, open: impl Fn(&str) -> bool) -> Option<Reading<'_>> {
        let best = self.best(text, open)?;
        let agent = best.agent(self);
        Some(Reading {
            agent,
            confidence: best.confidence,
            keywords_agree: best.keywords_agree(agent),
            keywords_conflict: best.keywords_conflict(agent),
            two_requests: self.two_requests(text),
            neighbour: self.neighbour(&best),
            continues: continues(text),
            rival: self.rival(text, best.class),
        })
    }

    /// The best open class of `text`, what its keywords name and its features.
    fn best(&self, text: &str, open: impl Fn(&str) -> bool) -> Option<Best<'_>> {
        let Distribution {
            mut probabilities,
            mut keyword_agents,
            features,
        } = self.distribution(text)?;
        for (class, p) in self.classes.iter().zip(probabilities.iter_mut()).skip(1) {
            if !open(class) {
                *p = 0.0;
            }
        }
        let total: f32 = probabilities.iter().sum();
        keyword_agents.retain(|agent| open(agent));
        let (class, p) = argmax(&probabilities);
        Some(Best {
            class,
            confidence: p / total,
            keyword_agents,
            features,
        })
    }

    /// How alike the nearest learned example is, when it is of the best class, a subgraph.
    fn neighbour(&self, best: &Best<'_>) -> Option<f32> {
        self.nearest(&best.features)
            .filter(|(class, _)| *class == best.class && best.class != PRIMARY)
            .map(|(_, similarity)| similarity)
    }

    /// Whether two of the message's clauses read, each on its own, as requests for two
    /// different subgraphs («quiero ver el ático y que me digáis cuánto pagaría de hipoteca»).
    fn two_requests(&self, text: &str) -> bool {
        let clauses = clauses(text);
        if clauses.len() < 2 {
            return false;
        }
        let mut asked: Option<usize> = None;
        for clause in clauses {
            let Some(Distribution { probabilities, .. }) = self.distribution(&clause.text) else {
                continue;
            };
            // The clause's best subgraph, even when the primary class reads it better: a request
            // announced by «y también», «de paso»… and half-heard is still a second request.
            let (best, p) = argmax(&probabilities[1..]);
            let best = best + 1;
            let bar = if clause.cued {
                self.params.second_request
            } else {
                CLAUSE_CONFIDENCE
            };
            if p < bar {
                continue;
            }
            match asked {
                Some(other) if other != best => return true,
                _ => asked = Some(best),
            }
        }
        false
    }

    /// The probability of the strongest subgraph other than `class` that one of the message's
    /// [`segments`] reads as best (better than the primary class too); 0 for a message in one
    /// piece.
    fn rival(&self, text: &str, class: usize) -> f32 {
        let segments = segments(text);
        if segments.len() < 2 {
            return 0.0;
        }
        let mut rival = 0.0f32;
        for segment in segments {
            let Some(Distribution { probabilities, .. }) = self.distribution(&segment.text) else {
                continue;
            };
            // A part that reads best as no specialist's («por favor», «hola») is no rival.
            let (best, p) = argmax(&probabilities);
            if best != PRIMARY && best != class {
                rival = rival.max(p);
            }
        }
        rival
    }

    /// Routes `text` to the subgraph it belongs to when `open` accepts that agent (the sender's
    /// role reaches it), it is not `holder` (the subgraph holding the conversation), and the
    /// router is sure enough; abstains otherwise.
    pub fn decide(
        &self,
        text: &str,
        open: impl Fn(&str) -> bool,
        holder: Option<&str>,
    ) -> Decision<'_> {
        // The cheap opinions first: the nearest example and the clauses are read only when
        // they can still change the decision.
        let Some(best) = self.best(text, open) else {
            return Decision::Abstain(Abstention::Empty);
        };
        let confidence = best.confidence;
        let Some(agent) = best.agent(self) else {
            return Decision::Abstain(Abstention::Primary { confidence });
        };
        if holder == Some(agent) {
            return Decision::Abstain(Abstention::Holder);
        }
        let params = &self.params;
        if holder.is_some_and(|holder| self.class_of(holder).is_some()) && continues(text) {
            return Decision::Abstain(Abstention::Continues);
        }
        let sure = (best.keywords_agree(Some(agent)) && confidence >= params.min_confidence)
            || (!best.keywords_conflict(Some(agent))
                && confidence >= params.neighbour_confidence
                && self
                    .neighbour(&best)
                    .is_some_and(|alike| alike >= params.min_neighbour));
        if !sure {
            return Decision::Abstain(Abstention::Unsure { confidence });
        }
        if self.two_requests(text) || self.rival(text, best.class) >= params.rival {
            return Decision::Abstain(Abstention::TwoRequests);
        }
        Decision::Route { agent, confidence }
    }
}

/// What the model reads in a message.
struct Distribution<'r> {
    /// One per class, summing to 1.
    probabilities: Vec<f32>,
    /// The agents its keywords name outside a negation, sorted and distinct.
    keyword_agents: Vec<&'r str>,
    features: Vec<(u64, f32)>,
}

/// A message's best class, before the second opinions.
struct Best<'r> {
    class: usize,
    confidence: f32,
    /// The open agents its keywords name outside a negation, sorted and distinct.
    keyword_agents: Vec<&'r str>,
    features: Vec<(u64, f32)>,
}

impl<'r> Best<'r> {
    fn agent(&self, router: &'r FastRouter) -> Option<&'r str> {
        (self.class != PRIMARY).then(|| router.classes[self.class].as_str())
    }

    fn keywords_agree(&self, agent: Option<&str>) -> bool {
        agent.is_some_and(|agent| self.keyword_agents == [agent])
    }

    fn keywords_conflict(&self, agent: Option<&str>) -> bool {
        self.keyword_agents
            .iter()
            .any(|named| Some(*named) != agent)
    }
}

/// The index and value of the largest probability (the first of equals).
fn argmax(probabilities: &[f32]) -> (usize, f32) {
    probabilities
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, f32::MIN),
            |best, (c, p)| if p > best.1 { (c, p) } else { best },
        )
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

#[cfg(test)]
mod tests;
