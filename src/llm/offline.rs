//! The LLM of offline mode: every call is unavailable, so each turn is served by the offline
//! engine from the agency's data (or, for an assistant it does not know, with the agent's
//! `offline_reply`). Used while no provider is configured.

use async_trait::async_trait;

use super::{Llm, LlmError, LlmRequest, LlmResponse};

#[derive(Debug, Default)]
pub struct OfflineLlm;

/// What [`OfflineLlm`] answers: a declared state, not a failure.
pub const OFFLINE_MODE: &str = "offline mode: no LLM provider";

#[async_trait]
impl Llm for OfflineLlm {
    async fn complete(&self, _request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        Err(LlmError::Unavailable(OFFLINE_MODE.to_owned()))
    }
}
