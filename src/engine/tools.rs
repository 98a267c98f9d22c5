//! The tool contract and the tool node: every tool has a name, a JSON schema, and an async
//! `run`; the registry has an explicit unknown case; every run has a time limit, and every
//! outcome — success, bad arguments, failure, timeout, unknown tool — becomes the text of the
//! tool message the model reads, never a crash.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

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
    /// The customer's language (ISO 639-1), when known: data written in several languages
    /// (a feed's descriptions) is given in theirs.
    pub lang: Option<String>,
    /// Whether the contact asked for no proactive messages (`users.opted_out_at`): a tool that
    /// promises one (a saved search's alerts) says it will not come.
    pub opted_out: bool,
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
            opted_out: false,
            lang: None,
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

/// A tool whose arguments are one type. The JSON schema the model sees is derived from that
/// type ([`schema_of`]), and the arguments are decoded from the model's JSON in one place,
/// before [`confirm`](TypedTool::confirm) or [`call`](TypedTool::call): every such tool is a
/// [`Tool`].
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    /// What the model sends; its doc comments are not shown, its `schemars` descriptions are.
    type Args: DeserializeOwned + JsonSchema + Send + Sync;
    /// The name the model calls it by (what prompt files list).
    const NAME: &'static str;
    /// See [`Tool::writes`].
    const WRITES: bool = false;
    /// See [`Tool::roles`].
    const ROLES: &'static [Role] = ALL_ROLES;
    /// Whether the user confirms before it runs: [`confirm`](TypedTool::confirm) says what to.
    const CONFIRMS: bool = false;

    /// What the model reads to decide when to call it.
    fn description(&self) -> String;

    /// For a tool that [`CONFIRMS`](TypedTool::CONFIRMS): checks `args` and says in one line
    /// what running it will do (see [`Tool::confirmation`]).
    async fn confirm(
        &self,
        _args: &Self::Args,
        _context: &ToolContext,
    ) -> Result<String, ToolError> {
        Err(ToolError::Failed(format!(
            "{} asks no confirmation",
            Self::NAME
        )))
    }

    /// Runs it (see [`Tool::run`]).
    async fn call(&self, args: Self::Args, context: &ToolContext) -> Result<ToolOutput, ToolError>;
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.to_owned(),
            description: self.description(),
            parameters: schema_of::<T::Args>(),
        }
    }

    fn writes(&self) -> bool {
        T::WRITES
    }

    fn roles(&self) -> &'static [Role] {
        T::ROLES
    }

    async fn confirmation(
        &self,
        args: &serde_json::Value,
        context: &ToolContext,
    ) -> Option<Result<String, ToolError>> {
        if !T::CONFIRMS {
            return None;
        }
        Some(match decode::<T::Args>(args.clone()) {
            Ok(args) => self.confirm(&args, context).await,
            Err(error) => Err(error),
        })
    }

    async fn run(
        &self,
        args: serde_json::Value,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.call(decode(args)?, context).await
    }
}

/// The arguments of a tool that takes none: `{}`, and whatever else the model adds is ignored.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The model's arguments as `T`; no arguments at all count as `{}`.
pub fn decode<T: DeserializeOwned>(args: serde_json::Value) -> Result<T, ToolError> {
    let args = if args.is_null() {
        serde_json::json!({})
    } else {
        args
    };
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}

/// The JSON schema of a tool's arguments, as the model is shown it: every subschema inline, an
/// optional field simply not required (no `null` type), and none of what the model has no use
/// for (`$schema`, titles, number formats, defaults).
pub fn schema_of<T: JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft07()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(root) = schema.as_object_mut() {
        for key in ["title", "description", "definitions", "$defs"] {
            root.remove(key);
        }
        // A tool without arguments still lists none, as the chat APIs expect.
        if !root.contains_key("properties") {
            root.insert("properties".to_owned(), serde_json::json!({}));
        }
    }
    simplify(&mut schema);
    in_written_order(&mut schema);
    schema
}

/// The order the keys of a schema are written in: the hand-written schemas' order, so the JSON
/// the model is sent is the same, byte for byte (recorded conversations hash it).
const KEY_ORDER: [&str; 9] = [
    "type",
    "properties",
    "items",
    "enum",
    "minimum",
    "maximum",
    "description",
    "required",
    "additionalProperties",
];

/// See [`KEY_ORDER`]: reorders a schema's keys, and its `required` by the properties' order.
fn in_written_order(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let Value::Object(object) = schema else {
        return;
    };
    if let (Some(Value::Object(properties)), Some(Value::Array(required))) =
        (object.get("properties"), object.get("required"))
    {
        let mut ordered: Vec<Value> = required.clone();
        let position = |name: &Value| {
            name.as_str()
                .and_then(|name| properties.keys().position(|key| key == name))
                .unwrap_or(usize::MAX)
        };
        ordered.sort_by_key(position);
        object.insert("required".to_owned(), Value::Array(ordered));
    }
    let mut entries: Vec<(String, Value)> = std::mem::take(object).into_iter().collect();
    entries.sort_by_key(|(key, _)| {
        KEY_ORDER
            .iter()
            .position(|known| known == key)
            .unwrap_or(KEY_ORDER.len())
    });
    for (key, mut value) in entries {
        if key == "properties" {
            if let Value::Object(properties) = &mut value {
                properties.values_mut().for_each(in_written_order);
            }
        } else if key == "items" {
            in_written_order(&mut value);
        }
        object.insert(key, value);
    }
}

/// See [`schema_of`]: one schema and, recursively, those of its properties and items.
fn simplify(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    // `Option<T>`: `T` or null. Here: `T`, not required.
    if let Some(Value::Array(types)) = object.get("type") {
        let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        object.insert(
            "type".to_owned(),
            match <[Value; 1]>::try_from(types) {
                Ok([one]) => one,
                Err(many) => Value::Array(many),
            },
        );
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(options)) = object.get(key) else {
            continue;
        };
        let options: Vec<Value> = options
            .iter()
            .filter(|option| option.get("type").is_none_or(|t| t != "null"))
            .cloned()
            .collect();
        object.remove(key);
        if let [Value::Object(only)] = options.as_slice() {
            // The one option left is the schema; what the field says of itself wins.
            for (name, value) in only {
                object.entry(name.clone()).or_insert_with(|| value.clone());
            }
        } else if options.iter().all(|option| option.get("const").is_some()) {
            // Unit variants with doc comments: one `const` each, read as an `enum`.
            object.insert("type".to_owned(), Value::from("string"));
            object.insert(
                "enum".to_owned(),
                options
                    .iter()
                    .map(|option| option["const"].clone())
                    .collect(),
            );
        } else {
            object.insert(key.to_owned(), Value::Array(options));
        }
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(simplify);
    }
    if let Some(items) = object.get_mut("items") {
        simplify(items);
    }
    // Last, so none comes back with a merged option.
    for key in ["format", "default", "title"] {
        object.remove(key);
    }
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
    /// Each tool's spec, made once when it is added (a typed tool derives its schema).
    specs: BTreeMap<String, ToolSpec>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, tool: impl Tool) -> Self {
        let spec = tool.spec();
        self.tools.insert(spec.name.clone(), Arc::new(tool));
        self.specs.insert(spec.name.clone(), spec);
        self
    }

    pub fn names(&self) -> BTreeSet<String> {
        self.tools.keys().cloned().collect()
    }

    pub fn spec(&self, name: &str) -> Option<ToolSpec> {
        self.specs.get(name).cloned()
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
        let outcome = tokio::time::timeout(
            timeout,
            tool.run(serde_json::Value::clone(&call.args), &context),
        )
        .await;
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
            args: args.into(),
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
