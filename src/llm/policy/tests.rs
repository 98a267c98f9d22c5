use super::*;
use crate::domain::{CallOutcome, LlmCall};
use crate::llm::ScriptedLlm;
use crate::llm::call_log::CallLog;

fn request() -> LlmRequest {
    LlmRequest {
        agent: "primary_assistant".into(),
        conversation: Some("34600000001".into()),
        messages: vec![crate::llm::ChatMessage::human("hola")],
        ..LlmRequest::default()
    }
}

/// `openai:primary`, then `anthropic:fallback`.
fn chain_of(primary: Arc<dyn Llm>, fallback: Arc<dyn Llm>, policy: CallPolicy) -> FallbackChain {
    FallbackChain::new(
        vec![
            ("openai:primary".into(), primary),
            ("anthropic:fallback".into(), fallback),
        ],
        policy,
    )
}

fn two_providers(
    primary: ScriptedLlm,
    fallback: ScriptedLlm,
) -> (FallbackChain, [Arc<ScriptedLlm>; 2]) {
    let (primary, fallback) = (Arc::new(primary), Arc::new(fallback));
    let chain = chain_of(primary.clone(), fallback.clone(), CallPolicy::default());
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
async fn a_refused_request_falls_back_and_counts_in_the_breaker() {
    let primary = Arc::new(RefusingLlm);
    let fallback = Arc::new((0..3).fold(ScriptedLlm::new(), |s, _| {
        s.says("primary_assistant", "respaldo")
    }));
    let policy = CallPolicy {
        breaker_failures: 2,
        ..CallPolicy::default()
    };
    let chain = chain_of(primary, fallback.clone(), policy);
    assert_eq!(answer(&chain).await, "respaldo");
    assert!(chain.open_breakers().is_empty());
    assert_eq!(answer(&chain).await, "respaldo");
    assert_eq!(chain.open_breakers(), ["openai:primary"]);
    assert_eq!(fallback.requests().len(), 2);
}

#[tokio::test]
async fn a_refusal_everywhere_is_returned() {
    let chain = chain_of(
        Arc::new(RefusingLlm),
        Arc::new(RefusingLlm),
        CallPolicy::default(),
    );
    assert!(matches!(
        chain.complete(&request()).await,
        Err(LlmError::Rejected { status: 400, .. })
    ));
}

struct RefusingLlm;

#[async_trait]
impl Llm for RefusingLlm {
    async fn complete(&self, _: &LlmRequest) -> Result<LlmResponse, LlmError> {
        Err(LlmError::Rejected {
            status: 400,
            message: "HTTP 400: invalid tool schema".into(),
        })
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
    let empty = FallbackChain::new(Vec::new(), CallPolicy::default());
    assert!(matches!(
        empty.complete(&request()).await,
        Err(LlmError::Unavailable(_))
    ));
}

/// A call log keeping what it is given.
#[derive(Default)]
struct Calls(std::sync::Mutex<Vec<LlmCall>>);

impl CallLog for Calls {
    fn record(&self, call: LlmCall) {
        self.0.lock().unwrap().push(call);
    }
}

#[tokio::test(start_paused = true)]
async fn a_hung_primary_times_out_and_falls_back() {
    let policy = CallPolicy {
        timeout: Duration::from_secs(5),
        ..CallPolicy::default()
    };
    let (primary, fallback) = (
        Arc::new(ScriptedLlm::new().stalls()),
        Arc::new(ScriptedLlm::new().says("primary_assistant", "respaldo")),
    );
    let calls = Arc::new(Calls::default());
    let chain = chain_of(primary, fallback, policy).with_call_log(calls.clone());
    let started = Instant::now();
    assert_eq!(
        chain.complete(&request()).await.unwrap().content,
        "respaldo"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let calls = calls.0.lock().unwrap();
    let seen: Vec<_> = calls
        .iter()
        .map(|c| (c.provider.as_str(), c.model.as_str(), c.outcome))
        .collect();
    assert_eq!(
        seen,
        [
            ("openai", "primary", CallOutcome::Timeout),
            ("anthropic", "fallback", CallOutcome::Ok)
        ]
    );
    assert_eq!(calls[0].latency, Duration::from_secs(5));
    assert_eq!(calls[0].conversation.as_deref(), Some("34600000001"));
    assert!(
        calls[0]
            .error
            .as_deref()
            .unwrap()
            .contains("no answer within")
    );
}

async fn answer(chain: &FallbackChain) -> String {
    chain.complete(&request()).await.unwrap().content
}

#[tokio::test(start_paused = true)]
async fn the_breaker_skips_a_failing_primary_then_probes_it() {
    let policy = CallPolicy {
        breaker_failures: 2,
        breaker_cooldown: Duration::from_secs(30),
        ..CallPolicy::default()
    };
    let primary = Arc::new(
        ScriptedLlm::new()
            .fails("HTTP 503")
            .fails("HTTP 503")
            // The probe after the first cool-down fails; the next one succeeds.
            .fails("HTTP 503")
            .says("primary_assistant", "de vuelta"),
    );
    let fallback = Arc::new((0..5).fold(ScriptedLlm::new(), |s, _| {
        s.says("primary_assistant", "respaldo")
    }));
    let chain = chain_of(primary.clone(), fallback.clone(), policy);
    // Two failures open the breaker.
    assert_eq!(answer(&chain).await, "respaldo");
    assert_eq!(answer(&chain).await, "respaldo");
    assert_eq!(chain.open_breakers(), ["openai:primary"]);
    // Open: the primary is not even asked.
    assert_eq!(answer(&chain).await, "respaldo");
    assert_eq!(primary.requests().len(), 2);
    // After the cool-down one probe goes through; it fails: open again.
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(answer(&chain).await, "respaldo");
    assert_eq!(primary.requests().len(), 3);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(answer(&chain).await, "respaldo");
    assert_eq!(primary.requests().len(), 3, "still cooling down");
    // The next probe succeeds: closed, the primary answers again.
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(answer(&chain).await, "de vuelta");
    assert!(chain.open_breakers().is_empty());
    assert_eq!(fallback.requests().len(), 5);
}

#[tokio::test(start_paused = true)]
async fn only_one_probe_goes_through_while_the_breaker_is_half_open() {
    let policy = CallPolicy {
        timeout: Duration::from_secs(5),
        breaker_failures: 1,
        breaker_cooldown: Duration::from_secs(30),
        ..CallPolicy::default()
    };
    let primary = Arc::new(ScriptedLlm::new().fails("HTTP 500").stalls());
    let fallback = Arc::new((0..3).fold(ScriptedLlm::new(), |s, _| {
        s.says("primary_assistant", "respaldo")
    }));
    let chain = Arc::new(chain_of(primary.clone(), fallback.clone(), policy));
    assert_eq!(
        chain.complete(&request()).await.unwrap().content,
        "respaldo"
    );
    tokio::time::advance(Duration::from_secs(31)).await;
    // The probe hangs; a concurrent call meanwhile goes straight to the fallback.
    let probe = tokio::spawn({
        let chain = chain.clone();
        async move { chain.complete(&request()).await.unwrap().content }
    });
    tokio::task::yield_now().await;
    assert_eq!(primary.requests().len(), 2, "the probe is in flight");
    assert_eq!(
        chain.complete(&request()).await.unwrap().content,
        "respaldo"
    );
    assert_eq!(primary.requests().len(), 2, "no second probe");
    assert_eq!(
        probe.await.unwrap(),
        "respaldo",
        "the probe timed out and fell back"
    );
}

#[tokio::test(start_paused = true)]
async fn calls_beyond_the_concurrency_bound_wait_for_a_slot_then_fall_back() {
    let policy = CallPolicy {
        timeout: Duration::from_secs(5),
        max_concurrency: 1,
        ..CallPolicy::default()
    };
    let primary = Arc::new(ScriptedLlm::new().stalls());
    let fallback = Arc::new((0..2).fold(ScriptedLlm::new(), |s, _| {
        s.says("primary_assistant", "respaldo")
    }));
    let chain = Arc::new(chain_of(primary.clone(), fallback.clone(), policy));
    let first = tokio::spawn({
        let chain = chain.clone();
        async move { chain.complete(&request()).await.unwrap().content }
    });
    tokio::task::yield_now().await;
    // The one slot is taken by the hung call: this one never reaches the primary.
    assert_eq!(
        chain.complete(&request()).await.unwrap().content,
        "respaldo"
    );
    assert_eq!(primary.requests().len(), 1);
    assert_eq!(first.await.unwrap(), "respaldo");
    // Waiting for a slot is our load, not the provider's failure: one timeout, breaker closed.
    assert!(chain.open_breakers().is_empty());
}
