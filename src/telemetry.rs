//! Logs (tracing) and metrics (Prometheus text at `/metrics`).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

/// Installs the log subscriber: `RUST_LOG` filter (default `info`), JSON lines when
/// `ZAGUAN_LOG_FORMAT=json` (for log shippers), human-readable otherwise.
pub fn init_logs() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("ZAGUAN_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
}

/// The process-wide metrics recorder, installed on first use (the recorder is global, and
/// tests build many apps in one process).
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be set (a test harness); ours still renders its own.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

pub async fn render_metrics() -> String {
    metrics_handle().render()
}
