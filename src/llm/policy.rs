//! The seed's agent_invoke policy around the providers: ask the primary model, ask again once
//! when it answers nothing, and fall back to the next model when it is unavailable (timeout,
//! connection, 429, 5xx, garbage) or empty twice — but not when our request was refused (4xx). A wrapper around the `Llm` trait, so every provider gets it the same way.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Llm, LlmError, LlmRequest, LlmResponse};

/// Providers tried in order; each is named for logs and metrics (`openai:gpt-4.1-mini`).
pub struct FallbackChain {
    providers: Vec<(String, Arc<dyn Llm>)>,
}

impl FallbackChain {
    pub fn new(providers: Vec<(String, Arc<dyn Llm>)>) -> Self {
        Self { providers }
    }
}

fn is_empty_answer(response: &LlmResponse) -> bool {
    response.content.trim().is_empty() && response.tool_calls.is_empty()
}

#[async_trait]
impl Llm for FallbackChain {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let mut last_error = LlmError::Unavailable("no LLM provider configured".to_owned());
        for (position, (name, llm)) in self.providers.iter().enumerate() {
            if position > 0 {
                tracing::warn!(llm.provider = %name, "falling back: {last_error}");
                metrics::counter!("zaguan_llm_fallbacks_total", "to" => name.clone()).increment(1);
            }
            // An empty answer is asked once more before the next provider is tried.
            for attempt in 1..=2 {
                let started = std::time::Instant::now();
                let outcome = llm.complete(request).await;
                let label = match &outcome {
                    Ok(r) if is_empty_answer(r) => "empty",
                    Ok(_) => "ok",
                    Err(LlmError::Unavailable(_)) => "unavailable",
                    Err(LlmError::Rejected(_)) => "rejected",
                    Err(LlmError::Unexpected(_)) => "error",
                };
                metrics::counter!("zaguan_llm_calls_total", "provider" => name.clone(), "outcome" => label)
                    .increment(1);
                metrics::histogram!("zaguan_llm_call_duration_seconds", "provider" => name.clone())
                    .record(started.elapsed().as_secs_f64());
                match outcome {
                    Ok(response) if !is_empty_answer(&response) => {
                        let usage = response.usage;
                        metrics::counter!("zaguan_llm_tokens_total", "provider" => name.clone(), "kind" => "input")
                            .increment(usage.input_tokens);
                        metrics::counter!("zaguan_llm_tokens_total", "provider" => name.clone(), "kind" => "output")
                            .increment(usage.output_tokens);
                        return Ok(response);
                    }
                    Ok(_) => {
                        last_error = LlmError::Unavailable(format!("{name} answered nothing"));
                        if attempt == 1 {
                            tracing::info!(llm.provider = %name, "empty answer, asking once more");
                        }
                    }
                    Err(LlmError::Rejected(why)) => {
                        // Our request was refused: another model would likely refuse it too,
                        // and the fault is ours to see in the logs.
                        tracing::error!(llm.provider = %name, "request refused, no fallback: {why}");
                        return Err(LlmError::Rejected(why));
                    }
                    Err(error) => {
                        last_error = error;
                        break;
                    }
                }
            }
        }
        Err(last_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ScriptedLlm;

    fn request() -> LlmRequest {
        LlmRequest {
            agent: "primary_assistant".into(),
            system: String::new(),
            messages: vec![crate::llm::ChatMessage::human("hola")],
            tools: Vec::new(),
        }
    }

    fn two_providers(
        primary: ScriptedLlm,
        fallback: ScriptedLlm,
    ) -> (FallbackChain, [Arc<ScriptedLlm>; 2]) {
        let (primary, fallback) = (Arc::new(primary), Arc::new(fallback));
        let chain = FallbackChain::new(vec![
            ("openai:primary".into(), primary.clone() as Arc<dyn Llm>),
            (
                "anthropic:fallback".into(),
                fallback.clone() as Arc<dyn Llm>,
            ),
        ]);
        (chain, [primary, fallback])
    }

    #[tokio::test]
    async fn the_primary_answers_when_it_can() {
        let (chain, [primary, fallback]) = two_providers(
            ScriptedLlm::new().says("primary_assistant", "hola"),
            ScriptedLlm::new(),
        );
        assert_eq!(chain.complete(&request()).await.unwrap().content, "hola");
        assert_eq!(
            (primary.requests().len(), fallback.requests().len()),
            (1, 0)
        );
    }

    #[tokio::test]
    async fn a_failing_primary_falls_back() {
        let (chain, [_, fallback]) = two_providers(
            ScriptedLlm::new().fails("HTTP 503"),
            ScriptedLlm::new().says("primary_assistant", "desde el respaldo"),
        );
        assert_eq!(
            chain.complete(&request()).await.unwrap().content,
            "desde el respaldo"
        );
        assert_eq!(fallback.requests().len(), 1);
    }

    #[tokio::test]
    async fn an_empty_answer_is_asked_again_once_then_falls_back() {
        let (chain, [primary, _]) = two_providers(
            ScriptedLlm::new()
                .says("primary_assistant", "")
                .says("primary_assistant", "ok"),
            ScriptedLlm::new(),
        );
        assert_eq!(chain.complete(&request()).await.unwrap().content, "ok");
        assert_eq!(primary.requests().len(), 2);

        let (chain, [primary, fallback]) = two_providers(
            ScriptedLlm::new()
                .says("primary_assistant", " ")
                .says("primary_assistant", ""),
            ScriptedLlm::new().says("primary_assistant", "respaldo"),
        );
        assert_eq!(
            chain.complete(&request()).await.unwrap().content,
            "respaldo"
        );
        assert_eq!(
            (primary.requests().len(), fallback.requests().len()),
            (2, 1)
        );
    }

    #[tokio::test]
    async fn a_refused_request_does_not_fall_back() {
        let primary = Arc::new(RefusingLlm);
        let fallback = Arc::new(ScriptedLlm::new().says("primary_assistant", "no debería"));
        let chain = FallbackChain::new(vec![
            ("openai:primary".into(), primary as Arc<dyn Llm>),
            (
                "anthropic:fallback".into(),
                fallback.clone() as Arc<dyn Llm>,
            ),
        ]);
        assert!(matches!(
            chain.complete(&request()).await,
            Err(LlmError::Rejected(_))
        ));
        assert!(fallback.requests().is_empty());
    }

    struct RefusingLlm;

    #[async_trait]
    impl Llm for RefusingLlm {
        async fn complete(&self, _: &LlmRequest) -> Result<LlmResponse, LlmError> {
            Err(LlmError::Rejected("HTTP 400: invalid tool schema".into()))
        }
    }

    #[tokio::test]
    async fn when_every_provider_fails_the_last_error_is_returned() {
        let (chain, _) = two_providers(
            ScriptedLlm::new().fails("down"),
            ScriptedLlm::new().fails("also down"),
        );
        let error = chain.complete(&request()).await.unwrap_err();
        assert!(error.to_string().contains("also down"), "{error}");
        let empty = FallbackChain::new(Vec::new());
        assert!(matches!(
            empty.complete(&request()).await,
            Err(LlmError::Unavailable(_))
        ));
    }
}
