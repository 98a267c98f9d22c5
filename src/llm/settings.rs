//! Which models are spoken to, where, and with what bounds: the LLM layer's part of the
//! configuration (`config/mod.rs` reads it from the environment).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::CallPolicy;

/// The models and their endpoints.
#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub primary: LlmSpec,
    pub fallback: LlmSpec,
    pub openai_api_key: Option<SecretString>,
    pub openai_base_url: Url,
    pub anthropic_api_key: Option<SecretString>,
    pub anthropic_base_url: Url,
    /// Timeout, concurrency and breaker of the fallback chain.
    pub policy: CallPolicy,
    /// Most tokens one Anthropic answer may use (its API requires a bound).
    pub max_tokens: u32,
    /// The model that transcribes voice notes (`LLM_TRANSCRIBE=openai:MODEL`, spoken to at
    /// `OPENAI_BASE_URL` with `OPENAI_API_KEY`); `None`: voice notes get the polite answer.
    pub transcribe: Option<String>,
    /// Bounds each media download and each transcription call.
    pub transcribe_timeout: Duration,
    /// HTTP/2 to the models (`LLM_HTTP2`).
    pub http2: super::http::Http2,
}

/// Which wire format a model is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProvider {
    /// Any OpenAI-compatible Chat Completions server.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

/// `provider:model`, e.g. `openai:gpt-4.1-mini`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmSpec {
    pub provider: LlmProvider,
    pub model: String,
}

impl FromStr for LlmSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (provider, model) = s
            .split_once(':')
            .ok_or_else(|| format!("expected `provider:model`, got `{s}`"))?;
        let provider = match provider {
            "openai" => LlmProvider::OpenAi,
            "anthropic" => LlmProvider::Anthropic,
            other => {
                return Err(format!(
                    "unknown provider `{other}` (expected `openai` or `anthropic`)"
                ));
            }
        };
        let model = model.trim();
        if model.is_empty() {
            return Err(format!("model name missing in `{s}`"));
        }
        Ok(Self {
            provider,
            model: model.to_owned(),
        })
    }
}

impl fmt::Display for LlmSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let provider = match self.provider {
            LlmProvider::OpenAi => "openai",
            LlmProvider::Anthropic => "anthropic",
        };
        write!(f, "{provider}:{}", self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_specs_parse_both_providers() {
        let spec: LlmSpec = "anthropic:claude-3-5-haiku".parse().unwrap();
        assert_eq!(spec.provider, LlmProvider::Anthropic);
        assert_eq!(spec.model, "claude-3-5-haiku");
        assert!("openai:".parse::<LlmSpec>().is_err());
        // Model names may contain colons (Ollama tags).
        let spec: LlmSpec = "openai:llama3:8b".parse().unwrap();
        assert_eq!(spec.model, "llama3:8b");
    }
}
