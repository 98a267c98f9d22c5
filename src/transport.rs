//! What the HTTP clients (LLM providers, Graph API) share: how many idle connections they keep,
//! and what they say about a failed request.

/// Idle keep-alive connections a client keeps per host. A burst opens one connection per call in
/// flight (10,000 read marks, 10,000 model calls); kept idle, each holds its buffers (about
/// 16 KiB) and a socket until the pool's idle timeout, so a burst's memory outlived it. Calls
/// beyond this open a connection and close it when done.
pub const IDLE_CONNECTIONS: usize = 64;

/// `timed out`, `could not connect` or `transport error`, then the cause chain: reqwest's own
/// message is terse ("error sending request"); the causes say why. The URL is left out (it
/// may carry a key in its query on some gateways).
pub fn describe(error: &reqwest::Error) -> String {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "transport error"
    };
    let mut message = what.to_owned();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
