//! What the HTTP clients (LLM providers, Graph API) say about a failed request.

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
