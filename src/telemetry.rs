//! Logs (tracing) and metrics (Prometheus text at `/metrics`).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Installs the log subscriber: `RUST_LOG` filter (default `info`), JSON lines when
/// `ZAGUAN_LOG_FORMAT=json` (for log shippers), human-readable otherwise.
pub fn init_logs() {
    init_logs_at("info");
}

/// Like [`init_logs`], with `level` unless `RUST_LOG` says otherwise (`zaguan test` keeps its
/// report readable with `warn`).
pub fn init_logs_at(level: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let json = std::env::var("ZAGUAN_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    log_subscriber(filter, json, std::io::stderr).init();
}

/// Like [`init_logs`], appending to the file at `path` instead of stderr (`zaguan chat`).
pub fn init_logs_to_file(path: &std::path::Path) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("ZAGUAN_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    log_subscriber(filter, json, std::sync::Mutex::new(file)).init();
    Ok(())
}

/// The subscriber [`init_logs`] installs, writing to `writer` (tests capture it in memory).
/// In JSON, one object per line: the event's fields at the top level, `span` the innermost
/// span (a turn's carries `conversation.id`, masked) and `spans` all of them.
pub fn log_subscriber<W>(
    filter: EnvFilter,
    json: bool,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    if json {
        Box::new(builder.json().flatten_event(true).finish())
    } else {
        Box::new(builder.finish())
    }
}

/// The process-wide metrics recorder, installed on first use (the recorder is global, and
/// tests build many apps in one process). Durations and the transitions of a turn are
/// Prometheus histograms (buckets aggregate across instances, quantiles do not); every family
/// has its `# HELP`.
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS_BUCKETS)
            .and_then(|builder| {
                builder.set_buckets_for_metric(
                    Matcher::Full("zaguan_turn_transitions".to_owned()),
                    TRANSITIONS_BUCKETS,
                )
            })
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be set (a test harness); ours still renders its own.
        let _ = metrics::set_global_recorder(recorder);
        describe();
        handle
    })
}

pub async fn render_metrics() -> String {
    metrics_handle().render()
}

/// Upper bounds of the `*_seconds` histograms: turns, LLM and tool calls, rate-limit waits.
const SECONDS_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
];

/// Upper bounds of `zaguan_turn_transitions` (a turn is cut short at 25 by default).
const TRANSITIONS_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 25.0];

/// What kind of metric a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric family the service records: name, kind, `# HELP` text (labels in brackets).
/// A family recorded anywhere in `src` belongs here (`tests/metrics.rs` checks it).
pub const FAMILIES: &[(&str, Kind, &str)] = &[
    // The webhook.
    (
        "zaguan_webhook_requests_total",
        Kind::Counter,
        "POST /webhook requests, by outcome (accepted, or why refused)",
    ),
    (
        "zaguan_webhook_verifications_refused_total",
        Kind::Counter,
        "GET /webhook verification handshakes refused",
    ),
    (
        "zaguan_webhook_rejected_updates_total",
        Kind::Counter,
        "Webhook updates that could not be read, kept in webhook_rejects [what]",
    ),
    (
        "zaguan_inbound_messages_total",
        Kind::Counter,
        "Inbound WhatsApp messages received, by message type [type]",
    ),
    (
        "zaguan_inbound_duplicates_total",
        Kind::Counter,
        "Redelivered inbound messages acknowledged without being stored again",
    ),
    (
        "zaguan_webhook_statuses_total",
        Kind::Counter,
        "Delivery statuses of outbound messages received [status, outcome]",
    ),
    (
        "zaguan_ad_referrals_total",
        Kind::Counter,
        "Messages from a click-to-WhatsApp ad [first: the contact's first referral]",
    ),
    (
        "zaguan_marketing_preferences_total",
        Kind::Counter,
        "Marketing stopped or resumed inside WhatsApp (user_preferences) [choice: stop, resume, stale, other]",
    ),
    (
        "zaguan_whatsapp_account_signals_total",
        Kind::Counter,
        "account_update and phone_number_quality_update events from Meta [event]",
    ),
    (
        "zaguan_whatsapp_marketing_held",
        Kind::Gauge,
        "1 while Meta's signals hold marketing on an account or number (restricted, flagged, rated low, disabled) [key]",
    ),
    (
        "zaguan_outreach_held_total",
        Kind::Counter,
        "Rounds of an outreach loop that claimed nothing because Meta's signals hold marketing [purpose]",
    ),
    (
        "zaguan_whatsapp_billable_messages_total",
        Kind::Counter,
        "Messages Meta reported as billable when delivered [category]",
    ),
    (
        "zaguan_webhook_ignored_changes_total",
        Kind::Counter,
        "Webhook changes of fields the service does not handle [field]",
    ),
    (
        "zaguan_webhook_errors_total",
        Kind::Counter,
        "Errors reported by Meta in webhook notifications",
    ),
    // Turns and routing.
    (
        "zaguan_turns_total",
        Kind::Counter,
        "Turns run, by outcome (answered, error: resumed later, failed: given up on)",
    ),
    (
        "zaguan_turn_duration_seconds",
        Kind::Histogram,
        "Time from a turn's start to its reply queued in the outbox, in seconds",
    ),
    (
        "zaguan_turn_transitions",
        Kind::Histogram,
        "Graph node transitions (assistant and router steps) per answered turn",
    ),
    (
        "zaguan_turn_guard_total",
        Kind::Counter,
        "Turns cut short, reset or answered by a guard [guard: transitions, idle_ttl, token_budget]",
    ),
    (
        "zaguan_route_total",
        Kind::Counter,
        "Assistant node runs, by the agent that answered [agent]",
    ),
    (
        "zaguan_fast_route_total",
        Kind::Counter,
        "Subgraphs entered by the fast path's router without asking the primary's model [agent]",
    ),
    (
        "zaguan_listing_requests_total",
        Kind::Counter,
        "Owners' confirmed requests to change a listing (stored in listing_requests, flagged for a person) [change]",
    ),
    (
        "zaguan_outbound_media_fallbacks_total",
        Kind::Counter,
        "Images or lists WhatsApp refused for good, sent again at once as plain text [kind]",
    ),
    (
        "zaguan_tapped_routes_total",
        Kind::Counter,
        "Turns routed by a tapped list row to the assistant it names [agent]",
    ),
    (
        "zaguan_console_sign_ins_total",
        Kind::Counter,
        "Sign-ins to the operators' console: ok, failed (wrong token or no name), throttled [outcome]",
    ),
    (
        "zaguan_events_total",
        Kind::Counter,
        "Business events for the agency's CRM: recorded, delivered, retry, failed [type, outcome]",
    ),
    (
        "zaguan_search_alerts_total",
        Kind::Counter,
        "Saved searches created or cancelled by customers [change]",
    ),
    (
        "zaguan_alert_notices_total",
        Kind::Counter,
        "Saved-search notices queued, once per customer and listing [news]",
    ),
    (
        "zaguan_callback_requests_total",
        Kind::Counter,
        "Customers who asked to be called back (stored in callback_requests, flagged for a person)",
    ),
    (
        "zaguan_voice_notes_total",
        Kind::Counter,
        "Voice notes by outcome: transcribed, or why not (download_failed, too_large, \
         not_audio, transcription_failed, empty, no_media_id) [outcome]",
    ),
    (
        "zaguan_fast_leaves_total",
        Kind::Counter,
        "Subgraphs left by the fast path's router for another assistant's message [agent]",
    ),
    (
        "zaguan_route_fallbacks_total",
        Kind::Counter,
        "dialog_state values that could not be followed; the primary assistant answered",
    ),
    (
        "zaguan_offline_routes_total",
        Kind::Counter,
        "Subgraphs entered by keywords because every model failed [agent]",
    ),
    (
        "zaguan_offline_replies_total",
        Kind::Counter,
        "Replies answered with the agent's offline reply because every model failed [agent]",
    ),
    (
        "zaguan_admin_refusals_total",
        Kind::Counter,
        "Admin API requests refused before their route ran [reason: throttled]",
    ),
    (
        "zaguan_untrusted_forwarded_requests_total",
        Kind::Counter,
        "Requests carrying the client-address header from a peer outside ZAGUAN_TRUSTED_PROXIES (header ignored)",
    ),
    (
        "zaguan_offline_turns_total",
        Kind::Counter,
        "Turns served without a model, per assistant: by the offline engine, handed to the \
         staff, or with the prompt's offline reply [agent, how]",
    ),
    (
        "zaguan_offline_calls_total",
        Kind::Counter,
        "Tool calls the offline engine made for an assistant [agent]",
    ),
    (
        "zaguan_offline",
        Kind::Gauge,
        "1 while no model answers this instance's turns (offline mode), else 0",
    ),
    (
        "zaguan_delegations_refused_total",
        Kind::Counter,
        "Delegations to an assistant not available for the user's role",
    ),
    (
        "zaguan_pending_actions_total",
        Kind::Counter,
        "Actions waiting for the user's confirmation [outcome: asked, confirmed, declined, unclear, stale_button, expired]",
    ),
    (
        "zaguan_roles_from_data_total",
        Kind::Counter,
        "Users given a role by the business data: an owner's or staff's number, or no longer one [role]",
    ),
    (
        "zaguan_known_numbers",
        Kind::Gauge,
        "WhatsApp numbers of owners and staff last read from the business data",
    ),
    (
        "zaguan_role_directory_errors_total",
        Kind::Counter,
        "Reads of the owners' and staff's numbers that failed (roles unchanged meanwhile)",
    ),
    (
        "zaguan_user_context_errors_total",
        Kind::Counter,
        "Reads of a user's context from the business data that failed or timed out (the turn went on without it)",
    ),
    (
        "zaguan_media_answers_total",
        Kind::Counter,
        "Media messages without text answered without an assistant",
    ),
    (
        "zaguan_conversation_resets_total",
        Kind::Counter,
        "Conversations reset through the admin API",
    ),
    (
        "zaguan_prompt_reloads_total",
        Kind::Counter,
        "Prompt set reloads [outcome: loaded, unchanged, rejected]",
    ),
    // Operators.
    (
        "zaguan_calendar_reads_total",
        Kind::Counter,
        "Agents' own calendars (staff.calendar_url) read, by outcome (read, failed: the last good copy stays)",
    ),
    (
        "zaguan_calendar_feeds_served_total",
        Kind::Counter,
        "Agents' visit feeds (GET /calendar/{token}.ics) served",
    ),
    (
        "zaguan_listings_feed_imports_total",
        Kind::Counter,
        "Rounds of the listings feed's import by this instance, by outcome (imported, refused)",
    ),
    (
        "zaguan_listings_feed_last_import",
        Kind::Gauge,
        "Listings the last import of the feed by this instance changed, by change (added, updated, withdrawn, back, skipped)",
    ),
    (
        "zaguan_handoffs_total",
        Kind::Counter,
        "Conversations taken over by an operator",
    ),
    (
        "zaguan_handoffs_ended_total",
        Kind::Counter,
        "Operator takeovers ended, the bot answering again [how: released, expired]",
    ),
    (
        "zaguan_handoff_requests_total",
        Kind::Counter,
        "Requests for a person, from any path (repeated ones too)",
    ),
    (
        "zaguan_handoff_notices_total",
        Kind::Counter,
        "Staff told of a waiting customer on WhatsApp [outcome: first, next, all; nobody: no staff to tell]",
    ),
    (
        "zaguan_handoff_digests_total",
        Kind::Counter,
        "Staff notices that were one digest of several waiting customers (a burst told once)",
    ),
    (
        "zaguan_outbound_bundled_total",
        Kind::Counter,
        "WhatsApp messages saved by bundling a reply before it is queued (words into their list or buttons, texts merged, photos into a carousel): each one a message Meta does not bill",
    ),
    (
        "zaguan_outbound_pause_share_failures_total",
        Kind::Counter,
        "Pauses Meta asked for (130429, 131056) that could not be written to the store, so only this instance keeps them",
    ),
    (
        "zaguan_outreach_stopped_at_send_total",
        Kind::Counter,
        "Messages written first that the governor stopped just before sending, because something changed since they were queued (an opt-out, a marketing stop, Meta's hold) [purpose, reason]",
    ),
    (
        "zaguan_outreach_total",
        Kind::Counter,
        "Messages the service wrote first (reminders, alerts, staff notices, follow-ups), by what the send governor decided [purpose, form: text, template, or the reason it was skipped]",
    ),
    (
        "zaguan_template_messages_total",
        Kind::Counter,
        "Template messages accepted by the Graph API, which Meta bills per message [category: utility, marketing, authentication]",
    ),
    (
        "zaguan_template_status_updates_total",
        Kind::Counter,
        "Template status and category changes Meta reported by webhook [status]",
    ),
    (
        "zaguan_template_values_missing_total",
        Kind::Counter,
        "Template sends skipped because a parameter had no value and no fallback [purpose]",
    ),
    (
        "zaguan_outbound_fallbacks_total",
        Kind::Counter,
        "Refused parts sent again in another form, at once or after a failed status [to: text, template, person (flagged for staff)]",
    ),
    (
        "zaguan_outbound_backoffs_total",
        Kind::Counter,
        "Pauses Meta asked for: the number's throughput (130429) or one recipient's pair rate (131056) [scope: number, recipient]",
    ),
    (
        "zaguan_consent_changes_total",
        Kind::Counter,
        "Contacts who opted out of proactive messages (BAJA, STOP) or back in (ALTA, START) [change: opt_out, opt_in]",
    ),
    (
        "zaguan_person_requests_total",
        Kind::Counter,
        "Whole messages that plainly ask for a person, answered without a model",
    ),
    (
        "zaguan_operator_replies_total",
        Kind::Counter,
        "Operator replies queued",
    ),
    // Tools.
    (
        "zaguan_tool_calls_total",
        Kind::Counter,
        "Domain tool calls [tool, outcome]",
    ),
    (
        "zaguan_tool_duration_seconds",
        Kind::Histogram,
        "Domain tool call duration, in seconds [tool]",
    ),
    (
        "zaguan_tool_refusals_total",
        Kind::Counter,
        "Tool calls refused [reason]",
    ),
    // LLM.
    (
        "zaguan_llm_calls_total",
        Kind::Counter,
        "LLM calls [provider, model, outcome]",
    ),
    (
        "zaguan_llm_call_duration_seconds",
        Kind::Histogram,
        "LLM call latency, waiting for a slot included, in seconds [provider, model, outcome]",
    ),
    (
        "zaguan_llm_tokens_total",
        Kind::Counter,
        "LLM tokens used [provider, model, kind: input, output]",
    ),
    (
        "zaguan_llm_fallbacks_total",
        Kind::Counter,
        "Requests passed on to the next model of the chain [from, to]",
    ),
    (
        "zaguan_llm_refusals_total",
        Kind::Counter,
        "Requests a model refused with a 4xx (then passed to the next model) [provider, model, status]",
    ),
    (
        "zaguan_llm_breaker_open",
        Kind::Gauge,
        "1 while a model's circuit breaker is open or probing (the model is skipped), else 0 [provider, model]",
    ),
    (
        "zaguan_llm_breaker_skips_total",
        Kind::Counter,
        "Requests that skipped a model because its breaker is open [provider, model]",
    ),
    (
        "zaguan_llm_saturated_total",
        Kind::Counter,
        "LLM calls given up waiting for a free slot [provider, model]",
    ),
    (
        "zaguan_llm_usage_lost_total",
        Kind::Counter,
        "LLM usage records that could not be stored",
    ),
    // The guard.
    (
        "zaguan_translations_total",
        Kind::Counter,
        "Replies sent to the model for translation [outcome: translated, failed; to]",
    ),
    (
        "zaguan_leak_guard_total",
        Kind::Counter,
        "Internal artefacts removed from replies before sending [kind]",
    ),
    (
        "zaguan_guard_apologies_total",
        Kind::Counter,
        "Replies with nothing left to send, answered with an apology",
    ),
    // Outbound.
    (
        "zaguan_outbound_sends_total",
        Kind::Counter,
        "Graph API send attempts [status: sent, dry_run, retry, failed, policy, token; code: Graph error code or none]",
    ),
    (
        "zaguan_outbound_alerts_total",
        Kind::Counter,
        "Send failures that need a person [reason: token, policy]",
    ),
    (
        "zaguan_outbound_read_marks_total",
        Kind::Counter,
        "Marks-as-read with typing indicator sent [status]",
    ),
    (
        "zaguan_outbound_rate_limit_waits_total",
        Kind::Counter,
        "Graph API calls held back by Meta's throughput or pair rate limit",
    ),
    (
        "zaguan_outbound_rate_limit_wait_seconds",
        Kind::Histogram,
        "How long a held-back Graph API call waited, in seconds",
    ),
    (
        "zaguan_graph_calls_not_started_total",
        Kind::Counter,
        "Graph API calls not sent: the client's calls in flight stayed at their bound for the whole timeout",
    ),
    (
        "zaguan_reminders_total",
        Kind::Counter,
        "Visit reminders queued",
    ),
    // Portal and CRM leads.
    (
        "zaguan_leads_total",
        Kind::Counter,
        "Portal and CRM leads, by source (the four portals, else other) and outcome (new, uncontactable, unreadable, duplicate, contacted, skipped, answered, unreachable, invalid, unauthorized)",
    ),
    // The loop back from agents and owners.
    (
        "zaguan_follow_ups_total",
        Kind::Counter,
        "Follow-ups queued (an agent's notice or question, an offer, an answer), by purpose",
    ),
    (
        "zaguan_follow_ups_unreachable_total",
        Kind::Counter,
        "Follow-ups with nobody on WhatsApp to send them to, left for the console",
    ),
    (
        "zaguan_follow_up_answers_total",
        Kind::Counter,
        "Answers to follow-ups read without a model, by the agent the reply is written as",
    ),
    (
        "zaguan_visit_outcomes_total",
        Kind::Counter,
        "Visit outcomes recorded (done, no_show, cancelled), whoever recorded them",
    ),
    (
        "zaguan_visit_feedback_total",
        Kind::Counter,
        "Customers' answers to how their visit went, by outcome",
    ),
    (
        "zaguan_offer_answers_total",
        Kind::Counter,
        "Offers answered (accepted, rejected, countered), whoever answered",
    ),
    // Health (set by the monitor).
    (
        "zaguan_inbox_backlog",
        Kind::Gauge,
        "Inbox messages not answered yet (pending or processing)",
    ),
    (
        "zaguan_inbox_oldest_pending_seconds",
        Kind::Gauge,
        "Age of the oldest inbox message not answered yet, in seconds",
    ),
    (
        "zaguan_inbox_failed",
        Kind::Gauge,
        "Inbox messages given up on after too many attempts",
    ),
    (
        "zaguan_active_leases",
        Kind::Gauge,
        "Conversations whose lease an instance holds (while it beats; given back after 30 s idle)",
    ),
    (
        "zaguan_stuck_conversations",
        Kind::Gauge,
        "Conversations in an assistant idle beyond ZAGUAN_STUCK_AFTER",
    ),
    (
        "zaguan_handoffs",
        Kind::Gauge,
        "Conversations with an operator (active) or waiting for one (requested) [state]",
    ),
    (
        "zaguan_outbound_late_records_total",
        Kind::Counter,
        "Delivered parts recorded as sent only after the store came back",
    ),
    (
        "zaguan_outbound_unconfirmed_resent_total",
        Kind::Counter,
        "Parts left sending by an earlier attempt that no status confirmed in the grace, sent again",
    ),
    (
        "zaguan_turns_resumed_total",
        Kind::Counter,
        "Turns cut short (a crash, a lapsed heartbeat, the store) resumed from what was stored",
    ),
    (
        "zaguan_user_throttled_total",
        Kind::Counter,
        "Turns held back because their user passed ZAGUAN_USER_TURNS_PER_MINUTE",
    ),
    (
        "zaguan_offline_leaves_total",
        Kind::Counter,
        "Offline, subgraph assistants left because the keywords named another topic [agent]",
    ),
    (
        "zaguan_instances",
        Kind::Gauge,
        "Instances alive on this MongoDB (heartbeat within ZAGUAN_LEASE)",
    ),
    (
        "zaguan_instance_heartbeat_failures_total",
        Kind::Counter,
        "Instance heartbeats the store did not confirm",
    ),
    (
        "zaguan_store_command_seconds",
        Kind::Histogram,
        "MongoDB commands' time on the database, by command, collection and outcome",
    ),
    (
        "zaguan_instance_late_beats_total",
        Kind::Counter,
        "Late heartbeats of a lone instance: its work went on, nobody could take it over",
    ),
    (
        "zaguan_leases_recovered_total",
        Kind::Counter,
        "Leases a restarted instance gave back at start, so its conversations are served at once",
    ),
    (
        "zaguan_worker_concurrency",
        Kind::Gauge,
        "Conversations the workers may serve at once now (follows the store's latency)",
    ),
    (
        "zaguan_store_calls_total",
        Kind::Counter,
        "MongoDB calls [lane: control, ingress, work; outcome: ok, unavailable, error]",
    ),
    (
        "zaguan_store_call_seconds",
        Kind::Histogram,
        "MongoDB call time, waiting for a connection included, in seconds [lane]",
    ),
    (
        "zaguan_store_client_rebuilds_total",
        Kind::Counter,
        "MongoDB clients rebuilt because they stopped answering while the database answered",
    ),
    (
        "zaguan_store_pool_cleared_total",
        Kind::Counter,
        "Times the MongoDB driver cleared its connection pool (server unreachable or reset)",
    ),
    (
        "zaguan_store_connections_total",
        Kind::Counter,
        "MongoDB connections opened and closed [event: created, closed]",
    ),
    (
        "zaguan_outbound_rate_share",
        Kind::Gauge,
        "Messages per second this instance may send per business number (its share)",
    ),
    (
        "zaguan_leases_lost_total",
        Kind::Counter,
        "Turns stopped because this instance's heartbeat was not confirmed in time (slow store)",
    ),
    (
        "zaguan_retention_deleted_total",
        Kind::Counter,
        "Records deleted by the cleanup job [collection]",
    ),
];

/// Registers the `# HELP` text of every family (shown once the family has a sample).
fn describe() {
    for (name, kind, help) in FAMILIES {
        match kind {
            Kind::Counter => metrics::describe_counter!(*name, *help),
            Kind::Gauge => metrics::describe_gauge!(*name, *help),
            Kind::Histogram => metrics::describe_histogram!(*name, *help),
        }
    }
}
