//! A stored conversation into a conversation test (`zaguan conversations export-test`, the
//! console's "Save as a test"): the customer's messages become steps, what the bot did becomes
//! each step's expectations (the assistant it ended with, the tools it called, the events it
//! wrote, the action it left waiting), and the model's answers kept in the history become the
//! cassette. Personal data is replaced consistently — the customer's names, phone numbers,
//! e-mail addresses and street addresses — and the number is swapped for a demo contact, so the
//! file can be committed. A conversation that went wrong becomes a test that fails until the
//! prompt is fixed.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use regex::Regex;
use serde_json::Value;

use super::cassette::{Cassette, CassetteLlm, Mode};
use super::runner::{self, Model, Outcome, Shared};
use super::spec;
use crate::domain::{MessageRole, Role, WaId};
use crate::llm::{Llm, LlmError, LlmRequest, LlmResponse};
use crate::realestate::demo::DEMO_CUSTOMERS;
use crate::store::{ConversationStore, EventStore, HistoryStore, InboxStore, UserStore};
use crate::store::{EventQuery, InboxEntry, StoredMessage};

/// A test written from a conversation, with its cassette.
pub struct Exported {
    pub name: String,
    /// The test file's text.
    pub yaml: String,
    pub cassette: Cassette,
    /// Whether the written test passes by replay now (a conversation that went wrong may not).
    pub passes: bool,
    /// What the replay said, when it does not pass.
    pub failures: Vec<String>,
}

/// Consistent replacements for what identifies the customer.
struct Scrubber {
    names: Vec<(Regex, String)>,
    phone: Regex,
    email: Regex,
    street: Regex,
    seen: Mutex<HashMap<String, String>>,
}

const PSEUDONYMS: [&str; 8] = [
    "Ana", "Pablo", "Lucía", "Diego", "Elena", "Marcos", "Sara", "Hugo",
];
const SURNAMES: [&str; 6] = ["García", "López", "Martín", "Sánchez", "Romero", "Navarro"];

impl Scrubber {
    fn new(names: &[String]) -> Self {
        let mut words: BTreeSet<String> = BTreeSet::new();
        for name in names {
            for word in name.split_whitespace() {
                let word = word.trim_matches(|c: char| !c.is_alphanumeric());
                if word.chars().count() >= 3 {
                    words.insert(word.to_owned());
                }
            }
        }
        let names = words
            .into_iter()
            .enumerate()
            .filter_map(|(i, word)| {
                let pattern = format!(r"(?i)\b{}\b", regex::escape(&word));
                let pool: &[&str] = if i == 0 { &PSEUDONYMS } else { &SURNAMES };
                let start = word.len() + i;
                let replacement = (0..pool.len())
                    .map(|k| pool[(start + k) % pool.len()])
                    .find(|p| !p.eq_ignore_ascii_case(&word))
                    .unwrap_or("Cliente");
                Some((Regex::new(&pattern).ok()?, replacement.to_owned()))
            })
            .collect();
        Self {
            names,
            phone: Regex::new(r"\+?\d(?:[\s.-]?\d){8,14}").expect("valid"),
            email: Regex::new(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+").expect("valid"),
            street: Regex::new(
                r"(?i)\b(?:calle|c/|avenida|avda\.?|plaza|paseo|camino|carrer|ronda|rua|street|road|avenue)\s+(?:de\s+(?:la\s+|los\s+|las\s+)?)?[\p{L}'.]+(?:\s+[\p{L}'.]+)?(?:,?\s*(?:n[ºo°]\s*)?\d+[a-zA-Z]?)?",
            )
            .expect("valid"),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// The same replacement for the same original, every time.
    fn replace(&self, original: &str, make: impl FnOnce(usize) -> String) -> String {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.len() + 1;
        seen.entry(original.to_owned())
            .or_insert_with(|| make(n))
            .clone()
    }

    fn text(&self, text: &str) -> String {
        let text = self
            .email
            .replace_all(text, |c: &regex::Captures<'_>| {
                self.replace(&c[0], |n| format!("cliente{n}@example.com"))
            })
            .into_owned();
        // A run of digits inside an id (`S-P1001-202603051200`, `wamid.…`) is not a number.
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for found in self.phone.find_iter(&text) {
            let before = text[..found.start()].chars().next_back();
            let after = text[found.end()..].chars().next();
            let inside =
                |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
            out.push_str(&text[at..found.start()]);
            if inside(before) || inside(after) {
                out.push_str(found.as_str());
            } else {
                out.push_str(&self.replace(found.as_str(), |n| format!("600 000 {n:03}")));
            }
            at = found.end();
        }
        out.push_str(&text[at..]);
        let text = out;
        let text = self
            .street
            .replace_all(&text, |c: &regex::Captures<'_>| {
                self.replace(&c[0], |n| format!("Calle Ejemplo {n}"))
            })
            .into_owned();
        let mut text = text;
        for (pattern, replacement) in &self.names {
            text = pattern
                .replace_all(&text, replacement.as_str())
                .into_owned();
        }
        text
    }

    fn value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// Names the customer gave in so many words («me llamo Ana Torres», «soy Ana», «my name is»).
fn stated_names(text: &str) -> Vec<String> {
    let pattern = Regex::new(
        r"(?i)\b(?:me llamo|mi nombre es|soy|my name is|i am|i'm|chamo-me|o meu nome é)\s+(\p{Lu}[\p{L}'-]+(?:\s+\p{Lu}[\p{L}'-]+){0,2})",
    )
    .expect("valid");
    pattern
        .captures_iter(text)
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_owned()))
        .collect()
}

/// A call id the engine made up (the fast path's delegations and leaves, confirmed and
/// declined actions), not the model's.
fn engine_made(call_id: &str) -> bool {
    if call_id.starts_with("call_confirmed_") {
        return true;
    }
    let Some(rest) = call_id.strip_prefix("call_") else {
        return false;
    };
    let mut parts = rest.split('_');
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some(a), Some(b), None) if !a.is_empty() && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_hexdigit())
            && b.bytes().all(|c| c.is_ascii_hexdigit())
    )
}

/// The history's model answers, per agent, in order: the "provider" a conversation is
/// recorded from.
struct HistoryLlm {
    answers: Mutex<HashMap<String, VecDeque<LlmResponse>>>,
}

#[async_trait]
impl Llm for HistoryLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(request.agent.as_str())
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| {
                LlmError::Unavailable(format!(
                    "the conversation's history has no more answers of {}",
                    request.agent
                ))
            })
    }
}

/// One customer message, as a step's YAML lines (without expectations).
fn step_lines(entry: &InboxEntry, transcript: Option<&str>, scrub: &Scrubber) -> Option<String> {
    let payload: Value = serde_json::from_str(&entry.payload).unwrap_or(Value::Null);
    let quoted = |text: &str| quote(&scrub.text(text));
    Some(match entry.kind.as_str() {
        "text" => format!(
            "  - user: {}\n",
            quoted(entry.text.as_deref().unwrap_or(""))
        ),
        "interactive" | "button" => {
            let reply = &payload["interactive"];
            if let Some(id) = reply["button_reply"]["id"].as_str() {
                let button = id.split(':').next().unwrap_or(id);
                format!("  - tap: {}\n", quote(button))
            } else if let Some(id) = reply["list_reply"]["id"].as_str() {
                format!("  - pick: {}\n", quote(id))
            } else {
                format!(
                    "  - user: {}\n",
                    quoted(entry.text.as_deref().unwrap_or(""))
                )
            }
        }
        "location" => {
            let location = &payload["location"];
            format!(
                "  - location: {{latitude: {}, longitude: {}}}\n",
                location["latitude"], location["longitude"]
            )
        }
        "audio" => format!("  - voice: {}\n", quoted(transcript.unwrap_or(""))),
        "reaction" => format!(
            "  - react: {}\n",
            quote(payload["reaction"]["emoji"].as_str().unwrap_or(""))
        ),
        _ => return None,
    })
}

fn quote(text: &str) -> String {
    serde_norway::to_string(&text)
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_else(|_| format!("{text:?}"))
}

/// What the bot did between one customer message and the next, as expectations.
fn expectations(
    replies: &[&StoredMessage],
    events: &[String],
    primaries: &BTreeSet<String>,
    subgraphs: &BTreeSet<String>,
) -> String {
    let mut out = String::new();
    let tools: Vec<&str> = {
        let mut seen = BTreeSet::new();
        replies
            .iter()
            .flat_map(|m| &m.message.tool_calls)
            .map(|c| c.name.as_str())
            .filter(|name| seen.insert(*name))
            .collect()
    };
    let last_agent = replies
        .iter()
        .rev()
        .filter(|m| m.message.role == MessageRole::Ai)
        .filter_map(|m| m.message.agent.as_deref())
        .find(|a| primaries.contains(*a) || subgraphs.contains(*a));
    if let Some(agent) = last_agent {
        let state = if subgraphs.contains(agent) {
            // Handing back with CompleteOrEscalate as the last word leaves the primary.
            let left = replies
                .iter()
                .rev()
                .find(|m| m.message.role == MessageRole::Ai && !m.message.tool_calls.is_empty())
                .is_some_and(|m| {
                    m.message
                        .tool_calls
                        .iter()
                        .any(|c| c.name == "CompleteOrEscalate")
                });
            if left { "primary" } else { agent }
        } else {
            "primary"
        };
        let _ = writeln!(out, "      dialog_state: {state}");
    }
    if !tools.is_empty() {
        let _ = writeln!(out, "      tool: [{}]", tools.join(", "));
    }
    if !events.is_empty() {
        let _ = writeln!(out, "      event: [{}]", events.join(", "));
    }
    // The step's last tool result asks for the customer's yes: the action waits.
    let last_tool = replies
        .iter()
        .rev()
        .find(|m| m.message.role == MessageRole::Tool);
    let waiting = last_tool.and_then(|last| {
        let content = &last.message.content;
        content
            .starts_with("Waiting for the user's confirmation")
            .then(|| {
                let id = last.message.tool_call_id.as_deref()?;
                replies.iter().find_map(|m| {
                    m.message
                        .tool_calls
                        .iter()
                        .find(|c| c.id == id)
                        .map(|c| c.name.clone())
                })
            })
            .flatten()
    });
    if let Some(tool) = waiting {
        let _ = writeln!(out, "      pending_action: {tool}");
    }
    if out.is_empty() {
        return out;
    }
    format!("    expect:\n{out}")
}

/// Writes `wa_id`'s conversation as a test named `name` (by default, after the number's last
/// digits), records its cassette from the history and replays it once.
pub async fn export(
    store: &(impl ConversationStore + HistoryStore + UserStore + EventStore + InboxStore + ?Sized),
    shared: &Shared,
    wa_id: &WaId,
    name: Option<String>,
) -> anyhow::Result<Exported> {
    let Some(conversation) = store.conversation(wa_id).await? else {
        anyhow::bail!("no conversation {}", wa_id.masked());
    };
    let messages = store.recent_messages(wa_id, 2000).await?;
    let Some(first) = messages
        .iter()
        .find(|m| m.message.role == MessageRole::Human)
    else {
        anyhow::bail!("{} has not written yet: nothing to test", wa_id.masked());
    };
    let user = store.user(wa_id).await?;
    let mut names: Vec<String> = user
        .as_ref()
        .and_then(|u| u.name.clone())
        .into_iter()
        .collect();
    for message in messages
        .iter()
        .filter(|m| m.message.role == MessageRole::Human)
    {
        names.extend(stated_names(&message.message.content));
    }
    let scrub = Scrubber::new(&names);
    let events = store
        .list_events(&EventQuery {
            wa_id: Some(wa_id.clone()),
            limit: 10_000,
            ..EventQuery::default()
        })
        .await?;

    let registry = &shared.registry;
    let primaries: BTreeSet<String> = registry
        .agents()
        .filter(|a| a.kind == crate::agents::AgentKind::Primary)
        .map(|a| a.name.to_string())
        .collect();
    let subgraphs: BTreeSet<String> = registry
        .agents()
        .filter(|a| a.kind == crate::agents::AgentKind::Subgraph)
        .map(|a| a.name.to_string())
        .collect();

    let name = name.unwrap_or_else(|| {
        let digits = wa_id.as_str();
        let tail = &digits[digits.len().saturating_sub(4)..];
        format!(
            "conversation …{tail}, exported {}",
            first.message.at.format("%Y-%m-%d")
        )
    });
    let role = conversation.role.unwrap_or(Role::Prospect);
    let mut yaml = String::new();
    let _ = writeln!(
        yaml,
        "# Exported from a stored conversation by `zaguan conversations export-test`; the\n\
         # customer's names, numbers and addresses are replaced. Edit the expectations to\n\
         # say what the bot should have done."
    );
    let _ = writeln!(yaml, "name: {}", quote(&name));
    if DEMO_CUSTOMERS.contains(&wa_id.as_str()) {
        let _ = writeln!(yaml, "wa_id: \"{}\"", wa_id.as_str());
    } else if role != Role::Prospect {
        let _ = writeln!(yaml, "role: {}", role.as_str());
    }
    if let Some(profile) = user.as_ref().and_then(|u| u.name.as_deref()) {
        let _ = writeln!(yaml, "profile_name: {}", quote(&scrub.text(profile)));
    }
    let _ = writeln!(yaml, "now: {}", first.message.at.to_rfc3339());
    let _ = writeln!(yaml, "steps:");

    let humans: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.message.role == MessageRole::Human)
        .map(|(i, _)| i)
        .collect();
    let mut last_at: Option<DateTime<Utc>> = None;
    let mut steps = 0;
    for (k, &i) in humans.iter().enumerate() {
        let human = &messages[i];
        let end = humans.get(k + 1).copied().unwrap_or(messages.len());
        let replies: Vec<&StoredMessage> = messages[i + 1..end].iter().collect();
        let until = messages.get(end).map(|m| m.message.at);
        if let Some(before) = last_at {
            let gap = human.message.at - before;
            if gap > chrono::Duration::hours(1) {
                let _ = writeln!(yaml, "  - wait: {}h", gap.num_hours());
            }
        }
        last_at = Some(human.message.at);
        let mut entries = Vec::new();
        for wamid in &human.message.wamids {
            if let Some(entry) = store.inbox_entry(wamid).await? {
                entries.push(entry);
            }
        }
        let transcripts: Vec<&str> = human
            .message
            .content
            .lines()
            .filter_map(|l| l.strip_prefix("(voice note) "))
            .collect();
        let mut voice = transcripts.into_iter();
        let lines: Vec<String> = if entries.is_empty() {
            vec![format!(
                "  - user: {}\n",
                quote(&scrub.text(&human.message.content))
            )]
        } else {
            entries
                .iter()
                .filter_map(|e| {
                    let transcript = (e.kind == "audio").then(|| voice.next()).flatten();
                    step_lines(e, transcript, &scrub)
                })
                .collect()
        };
        let step_events: Vec<String> = events
            .iter()
            .filter(|e| e.at >= human.message.at && until.is_none_or(|u| e.at < u))
            .map(|e| e.event.kind().to_owned())
            .collect();
        let count = lines.len();
        for (j, line) in lines.into_iter().enumerate() {
            yaml.push_str(&line);
            steps += 1;
            if j + 1 == count {
                yaml.push_str(&expectations(
                    &replies,
                    &step_events,
                    &primaries,
                    &subgraphs,
                ));
            }
        }
    }
    if steps == 0 {
        anyhow::bail!("nothing the customer sent can be replayed as a step");
    }

    // The history's model answers, scrubbed like the steps: the cassette's "provider".
    let mut answers: HashMap<String, VecDeque<LlmResponse>> = HashMap::new();
    for message in &messages {
        let m = &message.message;
        let Some(agent) = m.agent.as_deref() else {
            continue;
        };
        if m.role != MessageRole::Ai
            || !(primaries.contains(agent) || subgraphs.contains(agent))
            || m.tool_calls.iter().any(|c| engine_made(&c.id))
        {
            continue;
        }
        answers
            .entry(agent.to_owned())
            .or_default()
            .push_back(LlmResponse {
                content: scrub.text(&m.content),
                tool_calls: m
                    .tool_calls
                    .iter()
                    .map(|c| crate::domain::ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        args: scrub.value(&c.args).into(),
                    })
                    .collect(),
                usage: crate::llm::Usage::default(),
            });
    }
    let test = spec::parse(std::path::Path::new("exported.yaml"), &yaml)
        .map_err(|e| anyhow::anyhow!("the exported test does not read back: {e}"))?
        .tests
        .remove(0);
    let history = Arc::new(HistoryLlm {
        answers: Mutex::new(answers),
    });
    let recorder = Arc::new(CassetteLlm::provider(Mode::Record, history));
    runner::run(shared, &test, Model::Cassette(recorder.clone())).await;
    let mut cassette = Cassette::default();
    cassette.put(&test.name, recorder.recording());
    let replay = Arc::new(CassetteLlm::replay(
        cassette.tests[&test.name].clone(),
        cassette.prompts.clone(),
    ));
    let result = runner::run(shared, &test, Model::Cassette(replay)).await;
    Ok(Exported {
        name: test.name,
        yaml,
        cassette,
        passes: result.outcome == Outcome::Passed,
        failures: result.failures.iter().map(ToString::to_string).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_data_is_replaced_the_same_way_every_time() {
        let scrub = Scrubber::new(&["Ana Torres Vidal".to_owned()]);
        let once = scrub.text(
            "Soy Ana Torres, mi móvil es +34 611 222 333 y mi correo ana.torres@gmail.com; vivo \
             en la Calle de Alcalá 120.",
        );
        assert!(!once.contains("Torres"), "{once}");
        assert!(!once.contains("611 222 333"), "{once}");
        assert!(!once.contains("gmail"), "{once}");
        assert!(!once.contains("Alcalá 120"), "{once}");
        assert!(once.contains("Calle Ejemplo"), "{once}");
        let again = scrub.text("Llamadme al +34 611 222 333, soy Ana Torres");
        assert!(again.contains("600 000 00"), "{again}");
        let number = |t: &str| t.split("600 000 ").nth(1).map(|s| s[..3].to_owned());
        assert_eq!(
            number(&once),
            number(&again),
            "the same number, the same stand-in"
        );
        // Listing references, slots and prices are not personal data.
        let listing = "El P-1001 cuesta 731.000 €; hueco S-P1001-202603051200";
        assert_eq!(scrub.text(listing), listing);
    }

    #[test]
    fn names_said_in_so_many_words_are_found() {
        assert_eq!(
            stated_names("Hola, me llamo Ana Torres y busco piso"),
            ["Ana Torres"]
        );
        assert_eq!(stated_names("Hi, my name is John Smith"), ["John Smith"]);
    }

    #[test]
    fn the_engines_call_ids_are_told_from_the_models() {
        assert!(engine_made("call_18f2a3b4c5d6e7_1f"));
        assert!(engine_made("call_confirmed_a1b2c3d4e5f6"));
        assert!(!engine_made("call_Ab3xYz9QwErTy"));
        assert!(!engine_made("toolu_01A09q90qw90lq917835lq9"));
    }
}
