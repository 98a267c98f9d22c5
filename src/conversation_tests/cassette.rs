//! Recorded model answers. `zaguan test --record` sends each model call to the configured
//! provider and keeps, per test, the request in a normal form (the call ids the engine makes up
//! renamed in order) and the answer as received. A plain run answers each call from the
//! recording, without a key or a network; a request that differs from every recorded one (the
//! prompt, a tool, the history changed) stops the test with a diff of the two, so the person who
//! edited a prompt sees what their edit changed and records again.
//!
//! A cassette is the YAML file beside the tests, `NAME.cassette.yaml`: the system prompts once
//! each (by a short hash), then each test's calls in order.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::{AgentName, ToolCall};
use crate::llm::{ChatMessage, Llm, LlmError, LlmRequest, LlmResponse, Usage};

/// The cassette of the tests in `test_file`.
pub fn path_for(test_file: &Path) -> PathBuf {
    let stem = test_file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("tests");
    test_file.with_file_name(format!("{stem}.cassette.yaml"))
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    pub agent: AgentName,
    /// The request in normal form ([`normal_form`]), the system prompt by its hash.
    pub request: String,
    pub answer: Answer,
}

/// A model's answer as received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
}

impl From<&LlmResponse> for Answer {
    fn from(response: &LlmResponse) -> Self {
        Answer {
            content: response.content.clone(),
            tool_calls: response.tool_calls.clone(),
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
        }
    }
}

impl From<&Answer> for LlmResponse {
    fn from(answer: &Answer) -> Self {
        LlmResponse {
            content: answer.content.clone(),
            tool_calls: answer.tool_calls.clone(),
            usage: Usage {
                input_tokens: answer.input_tokens,
                output_tokens: answer.output_tokens,
            },
        }
    }
}

/// A cassette file: the system prompts by hash, each test's calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cassette {
    #[serde(default)]
    pub prompts: BTreeMap<String, String>,
    #[serde(default)]
    pub tests: BTreeMap<String, Vec<Interaction>>,
}

const HEADER: &str = "# Model answers recorded by `zaguan test --record` for the tests beside this file; \
replayed by `zaguan test`.\n# Record again after changing a prompt: do not edit by hand.\n";

impl Cassette {
    /// The cassette at `path`; `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<Cassette>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_norway::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_norway::to_string(self).map_err(|e| e.to_string())?;
        std::fs::write(path, format!("{HEADER}{text}"))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Keeps `test`'s recording, and only the prompts some recording still uses.
    pub fn put(&mut self, test: &str, recording: Recording) {
        self.prompts.extend(recording.prompts);
        self.tests.insert(test.to_owned(), recording.interactions);
        let used: std::collections::HashSet<String> = self
            .tests
            .values()
            .flatten()
            .filter_map(|i| system_hash(&i.request).map(str::to_owned))
            .collect();
        self.prompts.retain(|hash, _| used.contains(hash));
    }
}

/// One test's calls as recorded, with the prompts they name.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    pub prompts: BTreeMap<String, String>,
    pub interactions: Vec<Interaction>,
}

fn hash(text: &str) -> String {
    use sha2::{Digest as _, Sha256};
    hex::encode(&Sha256::digest(text.as_bytes())[..6])
}

fn system_hash(request: &str) -> Option<&str> {
    request
        .lines()
        .find_map(|l| l.strip_prefix("system: "))
        .map(str::trim)
}

/// A request as text, the same on every run of the same conversation: the agent, the system
/// prompt's hash, the tools offered (names and a hash of their specs), then each message. Call
/// ids are renamed `call_1`, `call_2`… in order of appearance, since the engine makes some up.
pub fn normal_form(request: &LlmRequest) -> String {
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut rename = |id: &str| -> String {
        let next = ids.len() + 1;
        ids.entry(id.to_owned())
            .or_insert_with(|| format!("call_{next}"))
            .clone()
    };
    let mut out = String::new();
    let _ = writeln!(out, "agent: {}", request.agent);
    let _ = writeln!(out, "system: {}", hash(&request.system.text()));
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    let specs = serde_json::to_string(&*request.tools).unwrap_or_default();
    let _ = writeln!(out, "tools: {} ({})", names.join(", "), hash(&specs));
    for message in &request.messages {
        match message {
            ChatMessage::Human { content } => {
                let _ = writeln!(out, "--- human");
                let _ = writeln!(out, "{content}");
            }
            ChatMessage::Ai {
                content,
                tool_calls,
            } => {
                let _ = writeln!(out, "--- ai");
                if !content.is_empty() {
                    let _ = writeln!(out, "{content}");
                }
                for call in tool_calls {
                    let _ = writeln!(out, "-> [{}] {} {}", rename(&call.id), call.name, call.args);
                }
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                let _ = writeln!(out, "--- tool [{}]", rename(tool_call_id));
                let _ = writeln!(out, "{content}");
            }
        }
    }
    out
}

/// `request` (a normal form) with its system prompt written out, for a diff.
fn expanded(request: &str, prompts: &BTreeMap<String, String>) -> String {
    request
        .lines()
        .map(|line| match line.strip_prefix("system: ") {
            Some(hash) => match prompts.get(hash.trim()) {
                Some(text) => format!("system:\n{text}"),
                None => line.to_owned(),
            },
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The changed lines of `recorded` → `now`, with a little context: what a prompt edit did to a
/// request.
pub fn diff(recorded: &str, now: &str) -> String {
    let diff = similar::TextDiff::from_lines(recorded, now);
    let mut out = String::new();
    for group in diff.grouped_ops(2) {
        out.push_str("  @@\n");
        for op in group {
            for change in diff.iter_changes(&op) {
                let sign = match change.tag() {
                    similar::ChangeTag::Delete => "- ",
                    similar::ChangeTag::Insert => "+ ",
                    similar::ChangeTag::Equal => "  ",
                };
                let line = change.value().trim_end_matches('\n');
                let line: String = line.chars().take(200).collect();
                let _ = writeln!(out, "  {sign}{line}");
            }
        }
    }
    out
}

/// How the model calls of a test are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// From the recording.
    Replay,
    /// By the provider, and recorded.
    Record,
    /// By the provider, not recorded.
    Live,
}

/// Why a replayed test stopped: no recorded call matches.
#[derive(Debug, Clone)]
pub struct Mismatch {
    pub agent: AgentName,
    /// The recorded call it was expected to be, if any was left.
    pub diff: Option<String>,
    pub recorded: usize,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.diff {
            Some(diff) => write!(
                f,
                "the {} request differs from the recording (record again with `zaguan test --record` if the change is intended):\n{diff}",
                self.agent
            ),
            None => write!(
                f,
                "the {} call is beyond the recording ({} calls recorded): record again with `zaguan test --record`",
                self.agent, self.recorded
            ),
        }
    }
}

/// What a test's model calls did, for the runner.
#[derive(Debug, Default)]
struct Tape {
    recorded: Vec<(Interaction, bool)>,
    prompts: BTreeMap<String, String>,
    /// In record and live runs, every call made.
    made: Vec<Interaction>,
    mismatch: Option<Mismatch>,
    calls: usize,
}

/// The model of one test run: the recording, or the provider (recording or not).
pub struct CassetteLlm {
    mode: Mode,
    inner: Option<Arc<dyn Llm>>,
    tape: Mutex<Tape>,
}

impl CassetteLlm {
    /// Answers from `interactions` (with the `prompts` they name).
    pub fn replay(interactions: Vec<Interaction>, prompts: BTreeMap<String, String>) -> Self {
        Self {
            mode: Mode::Replay,
            inner: None,
            tape: Mutex::new(Tape {
                recorded: interactions.into_iter().map(|i| (i, false)).collect(),
                prompts,
                ..Tape::default()
            }),
        }
    }

    /// Asks `inner`; with [`Mode::Record`], keeps each call.
    pub fn provider(mode: Mode, inner: Arc<dyn Llm>) -> Self {
        Self {
            mode,
            inner: Some(inner),
            tape: Mutex::new(Tape::default()),
        }
    }

    fn tape(&self) -> std::sync::MutexGuard<'_, Tape> {
        self.tape.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first request that matched no recording, if any.
    pub fn mismatch(&self) -> Option<Mismatch> {
        self.tape().mismatch.clone()
    }

    /// Recorded calls a replay did not use: the conversation took a shorter way than when it
    /// was recorded.
    pub fn unused(&self) -> usize {
        self.tape()
            .recorded
            .iter()
            .filter(|(_, used)| !*used)
            .count()
    }

    /// Model calls made so far.
    pub fn calls(&self) -> usize {
        self.tape().calls
    }

    /// What a record run keeps.
    pub fn recording(&self) -> Recording {
        let tape = self.tape();
        Recording {
            prompts: tape.prompts.clone(),
            interactions: tape.made.clone(),
        }
    }
}

#[async_trait]
impl Llm for CassetteLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let form = normal_form(request);
        if self.mode == Mode::Replay {
            let mut tape = self.tape();
            tape.calls += 1;
            if tape.mismatch.is_some() {
                return Err(LlmError::Unexpected(anyhow::anyhow!(
                    "replay stopped at an earlier mismatch"
                )));
            }
            if let Some((interaction, used)) = tape
                .recorded
                .iter_mut()
                .find(|(i, used)| !*used && i.request == form)
            {
                *used = true;
                return Ok(LlmResponse::from(&interaction.answer));
            }
            // The recorded call this one was meant to be: the next unused one of the agent.
            let recorded = tape.recorded.len();
            let expected = tape
                .recorded
                .iter()
                .find(|(i, used)| !*used && i.agent == request.agent)
                .or_else(|| tape.recorded.iter().find(|(_, used)| !*used))
                .map(|(i, _)| i.request.clone());
            let mut prompts = tape.prompts.clone();
            let system = request.system.text().into_owned();
            prompts.insert(hash(&system), system);
            let diff = expected.map(|recorded_form| {
                diff(
                    &expanded(&recorded_form, &tape.prompts),
                    &expanded(&form, &prompts),
                )
            });
            tape.mismatch = Some(Mismatch {
                agent: request.agent.clone(),
                diff,
                recorded,
            });
            return Err(LlmError::Unexpected(anyhow::anyhow!(
                "the request matches no recorded call"
            )));
        }
        let inner = self
            .inner
            .as_ref()
            .ok_or_else(|| LlmError::Unexpected(anyhow::anyhow!("no provider")))?;
        let response = inner.complete(request).await?;
        let mut tape = self.tape();
        tape.calls += 1;
        if self.mode == Mode::Record {
            let system = request.system.text().into_owned();
            tape.prompts.insert(hash(&system), system);
            tape.made.push(Interaction {
                agent: request.agent.clone(),
                request: form,
                answer: Answer::from(&response),
            });
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolSpec;

    fn request(call_id: &str) -> LlmRequest {
        LlmRequest {
            agent: "primary_assistant".into(),
            conversation: None,
            system: "Eres el asistente.".into(),
            messages: vec![
                ChatMessage::human("Hola"),
                ChatMessage::Ai {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: call_id.into(),
                        name: "ToPropertyAssistant".into(),
                        args: serde_json::json!({"query": "piso"}).into(),
                    }],
                },
                ChatMessage::tool(call_id, "ok"),
            ],
            tools: Arc::from(vec![ToolSpec {
                name: "ToPropertyAssistant".into(),
                description: "d".into(),
                parameters: serde_json::json!({}),
            }]),
        }
    }

    #[test]
    fn call_ids_the_engine_makes_up_do_not_change_the_normal_form() {
        assert_eq!(
            normal_form(&request("call_18f2a_1")),
            normal_form(&request("call_99ab_7"))
        );
        assert!(normal_form(&request("x")).contains("-> [call_1] ToPropertyAssistant"));
    }

    #[tokio::test]
    async fn a_replay_answers_the_recorded_call_and_diffs_a_changed_one() {
        let recorded = request("a");
        let interactions = vec![Interaction {
            agent: recorded.agent.clone(),
            request: normal_form(&recorded),
            answer: Answer {
                content: "Hola, ¿qué buscas?".into(),
                ..Answer::from(&LlmResponse::default())
            },
        }];
        let system = recorded.system.text().into_owned();
        let prompts = BTreeMap::from([(hash(&system), system)]);
        let replay = CassetteLlm::replay(interactions.clone(), prompts.clone());
        let answer = replay.complete(&request("b")).await.unwrap();
        assert_eq!(answer.content, "Hola, ¿qué buscas?");
        assert!(replay.mismatch().is_none());

        let mut edited = request("c");
        edited.system = "Eres el asistente de la agencia.".into();
        let replay = CassetteLlm::replay(interactions, prompts);
        assert!(replay.complete(&edited).await.is_err());
        let mismatch = replay.mismatch().unwrap().to_string();
        assert!(mismatch.contains("- Eres el asistente."), "{mismatch}");
        assert!(
            mismatch.contains("+ Eres el asistente de la agencia."),
            "{mismatch}"
        );
    }
}
