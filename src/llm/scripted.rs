//! A scripted LLM: answers from a list written by a test (or a demo), in order, and records
//! every request. The engine's scenario tests and benchmarks drive whole turns with it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::{Llm, LlmError, LlmRequest, LlmResponse};

use crate::domain::{AgentName, ToolCall};

/// One scripted answer, optionally checked against the agent that asks.
#[derive(Debug, Clone)]
struct Step {
    agent: Option<AgentName>,
    answer: Result<LlmResponse, String>,
    /// Never answers (a hung provider), for timeout tests.
    stall: bool,
}

#[derive(Default)]
pub struct ScriptedLlm {
    steps: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<LlmRequest>>,
    next_id: AtomicU64,
}

impl ScriptedLlm {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(self, agent: Option<&str>, answer: Result<LlmResponse, String>) -> Self {
        self.steps.lock().unwrap().push_back(Step {
            agent: agent.map(AgentName::from),
            answer,
            stall: false,
        });
        self
    }

    /// The next call never answers, like a provider that accepted the connection and hung.
    pub fn stalls(self) -> Self {
        self.steps.lock().unwrap().push_back(Step {
            agent: None,
            answer: Err("stalled".to_owned()),
            stall: true,
        });
        self
    }

    /// `agent` answers with text.
    pub fn says(self, agent: &str, text: &str) -> Self {
        self.push(
            Some(agent),
            Ok(LlmResponse {
                content: text.to_owned(),
                ..LlmResponse::default()
            }),
        )
    }

    /// `agent` calls one tool.
    pub fn calls(self, agent: &str, tool: &str, args: serde_json::Value) -> Self {
        self.calls_many(agent, &[(tool, args)])
    }

    /// `agent` calls several tools in one message.
    pub fn calls_many(self, agent: &str, calls: &[(&str, serde_json::Value)]) -> Self {
        let tool_calls = calls
            .iter()
            .map(|(name, args)| ToolCall {
                id: format!("call_{}", self.next_id.fetch_add(1, Ordering::Relaxed)),
                name: (*name).to_owned(),
                args: args.clone().into(),
            })
            .collect();
        self.push(
            Some(agent),
            Ok(LlmResponse {
                tool_calls,
                ..LlmResponse::default()
            }),
        )
    }

    /// The next call fails as an unavailable provider would.
    pub fn fails(self, why: &str) -> Self {
        self.push(None, Err(why.to_owned()))
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// Steps not used yet.
    pub fn remaining(&self) -> usize {
        self.steps.lock().unwrap().len()
    }
}

#[async_trait]
impl Llm for ScriptedLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        let step = self.steps.lock().unwrap().pop_front().ok_or_else(|| {
            LlmError::Unexpected(anyhow::anyhow!(
                "script exhausted: unexpected call from {}",
                request.agent
            ))
        })?;
        if let Some(agent) = &step.agent
            && *agent != request.agent
        {
            return Err(LlmError::Unexpected(anyhow::anyhow!(
                "script expected a call from {agent}, got one from {}",
                request.agent
            )));
        }
        if step.stall {
            std::future::pending::<()>().await;
        }
        step.answer.map_err(LlmError::Unavailable)
    }
}
