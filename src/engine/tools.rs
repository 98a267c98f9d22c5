//! The tool contract and the tool node: every tool has a name, a JSON schema, and an async
//! `run`; the registry has an explicit unknown case; every run has a time limit, and every
//! outcome — success, bad arguments, failure, timeout, unknown tool — becomes the text of the
//! tool message the model reads, never a crash.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::business::Business;
use crate::domain::GeoPoint;
use crate::domain::Role;
use crate::domain::ToolCall;
use crate::domain::WaId;
use crate::llm::ToolSpec;
use crate::store::{Attachment, BusinessEvent};

/// Longest a tool may run before its call is answered with a timeout error.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(20);

/// Who a tool runs for: from the turn, never from the model's arguments.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub wa_id: WaId,
    pub role: Role,
    /// The last location the user shared on WhatsApp ("near me").
    pub location: Option<GeoPoint>,
    /// When the turn runs; tools compare dates with it.
    pub now: chrono::DateTime<chrono::Utc>,
    /// The business's time zone: dates are read and said in it.
    pub timezone: chrono_tz::Tz,
    /// The id of the call being run, the same when a step is replayed after a crash: what a
    /// tool that writes derives its records' ids from, so the replay writes nothing twice.
    pub call_id: String,
    /// The business file of the turn's prompt set.
    pub business: Arc<Business>,
    /// `ZAGUAN_BUSINESS_CONTACT`, used when the business file gives no contact lines.
    pub fallback_contact: Option<String>,
}

impl ToolContext {
    /// A context for `wa_id` at `now`, with no business file (tests and tools run by hand).
    pub fn new(wa_id: WaId, role: Role, now: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            wa_id,
            role,
            location: None,
            now,
            timezone: chrono_tz::Europe::Madrid,
            call_id: String::new(),
            business: Arc::default(),
            fallback_contact: None,
        }
    }

    /// How the customer reaches the agency's people: the business file's lines, else
    /// `ZAGUAN_BUSINESS_CONTACT`.
    pub fn contact_line(&self) -> Option<String> {
        self.business
            .contact_line()
            .or_else(|| self.fallback_contact.clone())
    }

    /// A short key unique to this call (a hex digest of its id): what record ids are made of.
    pub fn call_key(&self) -> String {
        use sha2::{Digest as _, Sha256};
        let digest = Sha256::new()
            .chain_update(self.wa_id.as_str().as_bytes())
            .chain_update(b":")
            .chain_update(self.call_id.as_bytes())
            .finalize();
        hex::encode(&digest[..8])
    }
}

/// Every role.
pub const ALL_ROLES: &[Role] = &[Role::Prospect, Role::Owner, Role::Agent];

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The model sent arguments that do not fit the schema; it can correct them.
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    /// The tool could not do its job; the model should tell the user or try something else.
    #[error("{0}")]
    Failed(String),
}

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;

    /// Whether running it changes data without asking the user first (`request_human`): its
    /// call is stored before it runs, so a replay after a crash has the same id.
    fn writes(&self) -> bool {
        false
    }

    /// The roles it runs for; for any other the call is answered with an error, whatever the
    /// model believes.
    fn roles(&self) -> &'static [Role] {
        ALL_ROLES
    }

    /// For tools that change data: checks `args` and says in one line what running it will
    /// do. The engine then asks the user to confirm and runs it only on their yes. `None`
    /// (the default): it runs at once.
    async fn confirmation(
        &self,
        _args: &serde_json::Value,
        _context: &ToolContext,
    ) -> Option<Result<String, ToolError>> {
        None
    }

    /// The tool message's text, what the customer is shown with the reply (photos, a list to
    /// tap) and what changed for the agency's CRM; a text alone converts with `.into()`.
    async fn run(
        &self,
        args: serde_json::Value,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// A tool call's outcome: the tool message's text, and what the customer is shown with the
/// turn's reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    pub text: String,
    pub attachments: Vec<Attachment>,
    /// What changed in the business, for the agency's CRM: written with the tool message.
    pub events: Vec<BusinessEvent>,
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        text.to_owned().into()
    }
}

impl ToolOutput {
    /// `text`, having done what `event` says.
    pub fn with_event(text: String, event: BusinessEvent) -> Self {
        Self {
            text,
            attachments: Vec::new(),
            events: vec![event],
        }
    }
}

/// The tools agents may list in their prompt files.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, tool: impl Tool) -> Self {
        self.tools.insert(tool.spec().name, Arc::new(tool));
        self
    }

    pub fn names(&self) -> BTreeSet<String> {
        self.tools.keys().cloned().collect()
    }

    pub fn spec(&self, name: &str) -> Option<ToolSpec> {
        self.tools.get(name).map(|t| t.spec())
    }

    /// Whether the tool `name` changes data as soon as it runs ([`Tool::writes`]).
    pub fn writes(&self, name: &str) -> bool {
        self.tools.get(name).is_some_and(|tool| tool.writes())
    }

    /// Whether `role` may run the tool `name` (an unknown tool: no).
    pub fn allows(&self, name: &str, role: Role) -> bool {
        self.tools
            .get(name)
            .is_some_and(|tool| tool.roles().contains(&role))
    }

    /// What the user must confirm before `call` runs: `None` for tools that run at once;
    /// `Some(Err(text))` when the arguments are already wrong (the text is the tool message).
    pub async fn confirmation(
        &self,
        call: &ToolCall,
        context: &ToolContext,
    ) -> Option<Result<String, String>> {
        let tool = self.tools.get(&call.name)?;
        let outcome = tool.confirmation(&call.args, context).await?;
        Some(outcome.map_err(|error| {
            tracing::warn!(tool = %call.name, "tool error before confirmation: {error}");
            format!("Error: {error}")
        }))
    }

    /// Runs one call within `timeout`; the result is the tool message.
    pub async fn run(
        &self,
        call: &ToolCall,
        context: &ToolContext,
        timeout: Duration,
    ) -> ToolOutput {
        let Some(tool) = self.tools.get(&call.name) else {
            return format!("Error: there is no tool named {}.", call.name).into();
        };
        let started = std::time::Instant::now();
        let context = ToolContext {
            call_id: call.id.clone(),
            ..context.clone()
        };
        let outcome = tokio::time::timeout(timeout, tool.run(call.args.clone(), &context)).await;
        let label = match &outcome {
            Ok(Ok(_)) => "ok",
            Ok(Err(ToolError::InvalidArgs(_))) => "invalid_args",
            Ok(Err(ToolError::Failed(_))) => "failed",
            Err(_) => "timeout",
        };
        metrics::counter!("zaguan_tool_calls_total", "tool" => call.name.clone(), "outcome" => label)
            .increment(1);
        metrics::histogram!("zaguan_tool_duration_seconds", "tool" => call.name.clone())
            .record(started.elapsed().as_secs_f64());
        match outcome {
            Ok(Ok(output)) => output,
            Ok(Err(error)) => {
                tracing::warn!(tool = %call.name, "tool error: {error}");
                format!("Error: {error}").into()
            }
            Err(_) => {
                tracing::warn!(tool = %call.name, ?timeout, "tool timed out");
                format!("Error: {} did not answer within {timeout:?}.", call.name).into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Slow;

    #[async_trait]
    impl Tool for Slow {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "lento".into(),
                description: "never answers in time".into(),
                parameters: serde_json::json!({"type": "object"}),
            }
        }

        async fn run(
            &self,
            args: serde_json::Value,
            _: &ToolContext,
        ) -> Result<ToolOutput, ToolError> {
            if args.get("bad").is_some() {
                return Err(ToolError::InvalidArgs("`bad` is not allowed".into()));
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok("too late".into())
        }
    }

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: name.into(),
            args,
        }
    }

    fn context() -> ToolContext {
        ToolContext::new(
            WaId::parse("34600111222").unwrap(),
            Role::Prospect,
            chrono::Utc::now(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_tool_that_hangs_is_answered_with_a_timeout_error() {
        let tools = ToolRegistry::new().with(Slow);
        let text = tools
            .run(
                &call("lento", serde_json::json!({})),
                &context(),
                TOOL_TIMEOUT,
            )
            .await;
        assert_eq!(text.text, "Error: lento did not answer within 20s.");
    }

    #[tokio::test]
    async fn bad_arguments_and_unknown_tools_become_error_messages() {
        let tools = ToolRegistry::new().with(Slow);
        let text = tools
            .run(
                &call("lento", serde_json::json!({"bad": 1})),
                &context(),
                TOOL_TIMEOUT,
            )
            .await;
        assert_eq!(text.text, "Error: invalid arguments: `bad` is not allowed");
        let text = tools
            .run(
                &call("nada", serde_json::json!({})),
                &context(),
                TOOL_TIMEOUT,
            )
            .await;
        assert_eq!(text.text, "Error: there is no tool named nada.");
    }
}
