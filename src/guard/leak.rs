//! The leak guard: what the assistants say passes here before it reaches a customer, and the
//! graph's internals do not. A model sometimes narrates its plumbing ("Te paso con
//! ToAppointmentAssistant"), pastes a tool's JSON, quotes its own instructions, or relays a
//! stack trace from a failing tool; each of those is cut out, logged and counted. What is cut
//! is the sentence (or line, or block) carrying it, since half a sentence around a removed name
//! reads worse than none.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};

/// What kind of internal artefact was removed (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Leak {
    /// An agent, delegation or tool name, `CompleteOrEscalate`.
    InternalName,
    /// A JSON object or array: a tool's arguments or result.
    ToolPayload,
    /// A verbatim run of a system prompt.
    PromptExcerpt,
    /// A stack trace or panic message.
    StackTrace,
}

impl Leak {
    pub fn as_str(self) -> &'static str {
        match self {
            Leak::InternalName => "internal_name",
            Leak::ToolPayload => "tool_payload",
            Leak::PromptExcerpt => "prompt_excerpt",
            Leak::StackTrace => "stack_trace",
        }
    }
}

/// Words in a row shared with a system prompt that make an excerpt. Long enough that ordinary
/// Spanish phrases an assistant legitimately repeats ("¿en qué más te puedo ayudar?") stay.
const EXCERPT_WORDS: usize = 8;

/// The guard, built once from the names and prompts of the agent registry.
#[derive(Debug, Clone)]
pub struct LeakGuard {
    /// Sorted longest first, so `ToAppointmentAssistant` is found before `Appointment…`.
    names: Vec<String>,
    /// Hashes of every run of [`EXCERPT_WORDS`] words of the system prompts.
    prompt_runs: HashSet<u64>,
    hasher: std::collections::hash_map::RandomState,
}

/// A cleaned text and what was removed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleaned {
    pub text: String,
    pub leaks: Vec<Leak>,
}

impl LeakGuard {
    /// `names`: every name the model sees that a customer must not (agents, delegation tools,
    /// domain tools, `CompleteOrEscalate`). `prompts`: the system prompts' texts.
    pub fn new<'a>(
        names: impl IntoIterator<Item = String>,
        prompts: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut names: Vec<String> = names
            .into_iter()
            .filter(|n| n.chars().count() >= 4)
            .collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        names.dedup();
        let hasher = std::collections::hash_map::RandomState::new();
        let mut prompt_runs = HashSet::new();
        for prompt in prompts {
            let words = words(prompt);
            for run in words.windows(EXCERPT_WORDS) {
                prompt_runs.insert(hash_run(&hasher, run));
            }
        }
        Self {
            names,
            prompt_runs,
            hasher,
        }
    }

    /// `text` without its internal artefacts. Blocks (blank-line separated) that are JSON or a
    /// stack trace go whole; otherwise lines of a trace go, then sentences naming internals or
    /// quoting a prompt.
    pub fn clean(&self, text: &str) -> Cleaned {
        let mut leaks = Vec::new();
        let mut blocks = Vec::new();
        for block in blocks_of(text) {
            if let Some(leak) = whole_block_leak(block) {
                leaks.push(leak);
                continue;
            }
            let mut lines = Vec::new();
            for line in block.lines() {
                if is_trace_line(line) {
                    leaks.push(Leak::StackTrace);
                    continue;
                }
                let kept = self.clean_sentences(line, &mut leaks);
                if !kept.trim().is_empty() || line.trim().is_empty() {
                    lines.push(kept);
                }
            }
            let block = lines.join("\n");
            if !block.trim().is_empty() {
                blocks.push(block);
            }
        }
        if !leaks.is_empty() {
            for leak in &leaks {
                metrics::counter!("zaguan_leak_guard_total", "kind" => leak.as_str()).increment(1);
            }
            tracing::warn!(
                leaks = ?leaks,
                "internal artefacts removed from a reply before sending"
            );
        }
        Cleaned {
            text: blocks.join("\n\n").trim().to_owned(),
            leaks,
        }
    }

    /// The line without its sentences that name internals or quote a prompt.
    fn clean_sentences(&self, line: &str, leaks: &mut Vec<Leak>) -> String {
        let mut kept = String::with_capacity(line.len());
        for sentence in sentences(line) {
            if self.names.iter().any(|name| contains_word(sentence, name)) {
                leaks.push(Leak::InternalName);
            } else if self.quotes_a_prompt(sentence) {
                leaks.push(Leak::PromptExcerpt);
            } else if looks_like_inline_payload(sentence) {
                leaks.push(Leak::ToolPayload);
            } else {
                kept.push_str(sentence);
            }
        }
        kept.trim_end().to_owned()
    }

    fn quotes_a_prompt(&self, sentence: &str) -> bool {
        if self.prompt_runs.is_empty() {
            return false;
        }
        let words = words(sentence);
        words
            .windows(EXCERPT_WORDS)
            .any(|run| self.prompt_runs.contains(&hash_run(&self.hasher, run)))
    }
}

/// Blocks separated by blank lines, fenced code blocks kept whole.
fn blocks_of(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut start = 0;
    let mut in_fence = false;
    let mut offset = 0;
    let mut previous_blank = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
        }
        let blank = trimmed.is_empty() && !in_fence;
        if blank && !previous_blank && offset > start {
            blocks.push(&text[start..offset]);
        }
        if blank {
            start = offset + line.len();
        }
        previous_blank = blank;
        offset += line.len();
    }
    if start < text.len() {
        blocks.push(&text[start..]);
    }
    blocks
        .into_iter()
        .filter(|b| !b.trim().is_empty())
        .collect()
}

/// A block that is a JSON payload (bare or fenced) or a stack trace.
fn whole_block_leak(block: &str) -> Option<Leak> {
    let mut body = block.trim();
    if let Some(fenced) = body.strip_prefix("```") {
        // ```json … ``` : drop the info string and the closing fence.
        let fenced = fenced.split_once('\n').map_or("", |(_, rest)| rest);
        body = fenced.trim_end().trim_end_matches("```").trim();
    }
    if (body.starts_with('{') || body.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(body)
            .is_ok_and(|v| !v.as_array().is_some_and(Vec::is_empty))
    {
        return Some(Leak::ToolPayload);
    }
    let lines: Vec<&str> = body.lines().collect();
    let trace_lines = lines.iter().filter(|l| is_trace_line(l)).count();
    (trace_lines >= 2 && trace_lines * 2 >= lines.len()).then_some(Leak::StackTrace)
}

/// A line of a Rust, Python, Java or JavaScript error report.
fn is_trace_line(line: &str) -> bool {
    let line = line.trim();
    const MARKERS: [&str; 8] = [
        "panicked at",
        "stack backtrace:",
        "Traceback (most recent call last)",
        "note: run with `RUST_BACKTRACE",
        "Exception in thread",
        "thread 'main'",
        "Caused by:",
        "at async ",
    ];
    if MARKERS.iter().any(|m| line.contains(m)) {
        return true;
    }
    // `File "x.py", line 3, in f` · `at Foo.bar (Foo.java:12)` · `at f (file.js:3:9)` ·
    // `   0: zaguan::engine::turn` · `src/engine/turn.rs:120:5`
    (line.starts_with("File \"") && line.contains(", line "))
        || (line.starts_with("at ") && line.ends_with(')') && line.contains(':'))
        || has_source_location(line)
}

/// `name.rs:12:5`, `name.py:12`, `name.java:12`, `name.js:3:9`, `name.go:12`.
fn has_source_location(line: &str) -> bool {
    const EXTENSIONS: [&str; 6] = [".rs:", ".py:", ".java:", ".js:", ".ts:", ".go:"];
    EXTENSIONS.iter().any(|ext| {
        line.match_indices(ext).any(|(i, _)| {
            let before_is_name = line[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let after = &line[i + ext.len()..];
            before_is_name && after.chars().next().is_some_and(|c| c.is_ascii_digit())
        })
    })
}

/// A sentence carrying a JSON object like `{"query": "…"}` or `{'ref': 'P-1'}`.
fn looks_like_inline_payload(sentence: &str) -> bool {
    let Some(open) = sentence.find('{') else {
        return false;
    };
    let inside = &sentence[open..];
    (inside.contains("\":") || inside.contains("':")) && inside.contains('}')
}

/// Sentences of a line, each with its end punctuation and the space after it.
fn sentences(line: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?' | '…') {
            // Not inside a number ("450.000 €") or a URL ("calle.com").
            let next = chars.peek().map(|(_, n)| *n);
            if next.is_none_or(char::is_whitespace) {
                let mut end = i + c.len_utf8();
                while let Some((j, n)) = chars.peek().copied() {
                    if n.is_whitespace() {
                        end = j + n.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                sentences.push(&line[start..end]);
                start = end;
            }
        }
    }
    if start < line.len() {
        sentences.push(&line[start..]);
    }
    sentences
}

/// `name` in `text` as a whole word (not inside a longer identifier).
fn contains_word(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        let is_ident = |c: char| c.is_alphanumeric() || c == '_';
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Lowercase words, for comparing runs of a prompt with runs of a reply.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn hash_run(hasher: &std::collections::hash_map::RandomState, run: &[String]) -> u64 {
    let mut h = hasher.build_hasher();
    for word in run {
        h.write(word.as_bytes());
        h.write_u8(0);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> LeakGuard {
        LeakGuard::new(
            [
                "ToAppointmentAssistant",
                "CompleteOrEscalate",
                "appointment_assistant",
                "search_properties",
            ]
            .map(String::from),
            [
                "Eres el especialista en citas de Zaguan Inmobiliaria, agencia inmobiliaria. \
              Antes de reservar, cambiar o cancelar, resume la cita y pide confirmación explícita.",
            ],
        )
    }

    fn clean(text: &str) -> (String, Vec<Leak>) {
        let cleaned = guard().clean(text);
        (cleaned.text, cleaned.leaks)
    }

    #[test]
    fn a_clean_reply_is_untouched() {
        let reply = "¡Hola, Lucía! El piso de la calle Mayor cuesta 450.000 €.\n\n\
                     - 3 habitaciones\n- Terraza de 20 m²\n\n¿Quieres verlo el jueves? 🏡";
        assert_eq!(clean(reply), (reply.to_owned(), vec![]));
    }

    #[test]
    fn sentences_naming_internals_are_dropped() {
        let (text, leaks) =
            clean("Te paso con ToAppointmentAssistant. ¿Qué día te viene bien para la visita?");
        assert_eq!(text, "¿Qué día te viene bien para la visita?");
        assert_eq!(leaks, [Leak::InternalName]);
        let (text, _) = clean("Voy a llamar a CompleteOrEscalate.\nPerfecto, cita anotada.");
        assert_eq!(text, "Perfecto, cita anotada.");
        // Inside a longer word it is not a name.
        assert_eq!(clean("Busco search_properties_v2 nada").1, []);
    }

    #[test]
    fn json_payloads_are_dropped_bare_fenced_or_inline() {
        let (text, leaks) = clean(
            "Aquí tienes:\n\n{\"query\": \"pisos en Valencia\", \"max_price\": 300000}\n\n¿Te encaja?",
        );
        assert_eq!(text, "Aquí tienes:\n\n¿Te encaja?");
        assert_eq!(leaks, [Leak::ToolPayload]);
        let (text, _) = clean("Resultado:\n\n```json\n[{\"ref\": \"P-1\"}]\n```\n\nListo.");
        assert_eq!(text, "Resultado:\n\nListo.");
        let (text, leaks) = clean("Buscaré con {\"city\": \"Madrid\"} ahora. Dame un momento.");
        assert_eq!(
            (text.as_str(), leaks),
            ("Dame un momento.", vec![Leak::ToolPayload])
        );
    }

    #[test]
    fn stack_traces_are_dropped() {
        let (text, leaks) = clean(
            "Ha habido un problema.\n\nthread 'tokio-runtime-worker' panicked at src/engine/turn.rs:120:5:\n\
             called `Option::unwrap()` on a `None` value\nnote: run with `RUST_BACKTRACE=1`\n\n\
             Inténtalo más tarde.",
        );
        assert_eq!(text, "Ha habido un problema.\n\nInténtalo más tarde.");
        assert!(leaks.contains(&Leak::StackTrace), "{leaks:?}");
        let (text, _) = clean(
            "Error:\nTraceback (most recent call last):\n  File \"tools.py\", line 3, in search\nKeyError: 'city'",
        );
        assert_eq!(text, "", "a block that is mostly a trace goes whole");
    }

    #[test]
    fn a_verbatim_run_of_the_system_prompt_is_dropped_but_short_echoes_stay() {
        let (text, leaks) = clean(
            "Mis instrucciones dicen: antes de reservar, cambiar o cancelar, resume la cita y pide \
             confirmación explícita. ¿Confirmas el jueves?",
        );
        assert_eq!(text, "¿Confirmas el jueves?");
        assert_eq!(leaks, [Leak::PromptExcerpt]);
        assert_eq!(clean("Antes de reservar, resume la cita.").1, []);
    }

    #[test]
    fn numbers_and_urls_do_not_end_sentences() {
        assert_eq!(
            sentences("Cuesta 450.000 €. Mira www.zaguan.es ahora."),
            ["Cuesta 450.000 €. ", "Mira www.zaguan.es ahora."]
        );
    }

    #[test]
    fn everything_removed_leaves_nothing() {
        assert_eq!(clean("CompleteOrEscalate").0, "");
        assert_eq!(clean("{\"cancel\": true, \"reason\": \"done\"}").0, "");
    }
}
