//! Downloads of what the agency points Zaguan at (its listings feed, its agents' calendars):
//! bounded in time and size, so a slow or endless server costs a timeout, not the process.

use std::time::Duration;

/// The body at `url`, or why not. `named` is how errors call it: an agent's secret calendar
/// address must not reach logs, so a caller may name it otherwise.
pub async fn bounded(
    client: &reqwest::Client,
    url: &str,
    named: &str,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    use futures::StreamExt as _;
    let response = tokio::time::timeout(timeout, client.get(url).send())
        .await
        .map_err(|_| format!("no answer from {named} within {timeout:?}"))?
        .map_err(|e| format!("cannot fetch {named}: {}", e.without_url()))?;
    if !response.status().is_success() {
        return Err(format!("{named} answered {}", response.status()));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    let read = async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|e| format!("the download from {named} broke off: {}", e.without_url()))?;
            if body.len() + chunk.len() > max_bytes {
                return Err(format!("{named} is larger than {max_bytes} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(())
    };
    tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| format!("the download from {named} took over {timeout:?}"))??;
    Ok(body)
}
