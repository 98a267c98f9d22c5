//! Usage accounting: the policy hands one record per LLM call (tokens, latency, outcome) to a
//! [`CallLog`] without waiting; what keeps them (`runtime::UsageRecorder`, writing to the
//! store) is not this layer's business.

use crate::domain::LlmCall;

/// Where the policy reports calls; must not block.
pub trait CallLog: Send + Sync + 'static {
    fn record(&self, call: LlmCall);
}
