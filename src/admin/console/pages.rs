//! The pages operators read: the overview, the conversations list, one conversation, the prompts.

use crate::admin::operations::{self, AdminError, ListParams};
use crate::domain::WaId;
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ConsoleError, i18n, render, resolve, signed_in};
use crate::admin::team::OperatorRole;

/// Overview: what needs a person now, and how this instance is doing.
pub(super) async fn overview(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let store = state.store.as_ref();
    let count = |params: ListParams| async move {
        operations::list_conversations(store, &params)
            .await
            .map(|page| page["conversations"].as_array().map_or(0, Vec::len))
    };
    // In an assistant is part of the query: the oldest idle conversations are mostly back
    // with the primary assistant, and would fill the page.
    // Stuck as `ZAGUAN_STUCK_AFTER` says, as the monitor and `conversations list` count it.
    let stuck_after = humantime::format_duration(state.stuck_after()).to_string();
    let stuck = count(ListParams {
        idle_for: Some(stuck_after.clone()),
        in_assistant: Some(true),
        limit: Some(200),
        ..ListParams::default()
    })
    .await?;
    let requested = count(ListParams {
        handoff: Some("requested".into()),
        limit: Some(200),
        ..ListParams::default()
    })
    .await?;
    let taken = count(ListParams {
        handoff: Some("active".into()),
        limit: Some(200),
        ..ListParams::default()
    })
    .await?;
    let prompts = state.prompts.as_ref().map(|p| prompt_status(&p.status()));
    // This instance's model: offline mode serves the assistants from the data meanwhile.
    let offline = state
        .prompts
        .as_ref()
        .and_then(|p| p.engine().model_status().offline_since())
        .map(|since| offline_since(since, Utc::now()));
    let last_hour = store
        .inbox_outcomes_since(Utc::now() - chrono::Duration::hours(1))
        .await?;
    // Today, for every instance: the reports' figures, read from the records.
    let tz = state
        .config
        .as_ref()
        .map_or(chrono_tz::UTC, |c| c.engine.timezone);
    let period = crate::admin::reports::Period::last_days(1, Utc::now(), tz)
        .map_err(AdminError::BadRequest)?;
    let inputs = crate::admin::reports::gather(store, state.realestate.as_deref(), &period).await?;
    let report =
        crate::admin::reports::compute(&inputs, &period, &crate::admin::reports::Prices::default());
    // Every instance's: the spell the last day's call records show, whoever served it. Today's
    // are read already; only the hours before midnight are added. A day too busy to read whole
    // says nothing rather than something stale.
    let now = Utc::now();
    let day_ago = now - chrono::Duration::hours(24);
    let mut recent = if day_ago < period.from() {
        store
            .llm_calls_between(day_ago, period.from(), crate::admin::reports::MAX_RECORDS)
            .await?
    } else {
        Vec::new()
    };
    let whole =
        recent.len() < crate::admin::reports::MAX_RECORDS && !inputs.cut.contains(&"llm_calls");
    recent.extend_from_slice(&inputs.calls);
    let deployment_offline = whole
        .then(|| crate::admin::reports::offline_spell(&recent))
        .flatten()
        .map(|spell| {
            let mut shown = offline_since(spell.since, now);
            shown["at_least"] = json!(!spell.began_in_period);
            shown["last"] = json!(i18n::short(spell.last));
            shown["steps"] = json!(spell.steps);
            shown
        });
    // What Meta last said of the account and its numbers: a restriction or a low rating
    // stops marketing, so it is the first thing on the page.
    let whatsapp: Vec<Value> = store
        .account_health()
        .await?
        .iter()
        .map(|h| {
            json!({
                "key": h.key,
                "held": h.holds_marketing(now),
                "quality": h.quality.as_deref().unwrap_or("-"),
                "limit": h.messaging_limit.as_deref().unwrap_or("-"),
                "tier": h.tier.as_deref().unwrap_or("-"),
                "event": h.last_event,
                "at": h.at.map(i18n::short).unwrap_or_default(),
            })
        })
        .collect();
    let seconds = super::reports::duration;
    let today = json!({
        "conversations": report.days.iter().map(|d| d.conversations).sum::<u64>(),
        "first_reply": seconds(report.first_reply_median),
        "to_person": seconds(report.person_median),
        "model": report.steps.model,
        "fast_path": report.steps.fast_path,
        "offline": report.steps.offline,
        "failed": report.failed_deliveries,
    });
    let undelivered: Vec<Value> = store
        .undelivered_since(Utc::now() - chrono::Duration::hours(24), 20)
        .await?
        .iter()
        .map(|o| {
            let mut row = json!({
                "wa_id": o.wa_id.as_str(),
                "at": i18n::short(o.at),
                "status": o.status.as_str(),
                "kind": if o.template.is_some() { "template" } else if o.media.is_some() { "media" } else { "text" },
                "why": o.error.as_ref().map(ToString::to_string).unwrap_or_default(),
            });
            who.linked(&mut row);
            row
        })
        .collect();
    render(
        "overview.html",
        who.context(
            "overview",
            json!({
                "stuck": stuck, "stuck_after": stuck_after, "requested": requested,
                "undelivered": undelivered,
                "whatsapp": whatsapp,
                "taken": taken, "prompts": prompts, "today": today,
                "offline": offline,
                "deployment_offline": deployment_offline,
                "last_hour": last_hour,
            }),
        ),
    )
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ListFilters {
    #[serde(default)]
    state: String,
    #[serde(default)]
    idle_for: String,
    #[serde(default)]
    handoff: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    lang: String,
    #[serde(default)]
    q: String,
    /// `1`: only conversations in an assistant (the overview's stuck ones).
    #[serde(default)]
    in_assistant: String,
    page: Option<usize>,
}

pub(super) const PAGE: usize = 25;

/// Whether a conversation is what `q` looks for: its number or name for those who see numbers;
/// for a viewer, a name, or the last four digits as a whole — a part of a number anywhere would
/// let a masked row be rebuilt digit by digit.
fn searched(q: &str, wa_id: &str, name: Option<&str>, masked: bool) -> bool {
    let by_name = name.is_some_and(|n| n.to_lowercase().contains(q));
    if !masked {
        return by_name || wa_id.contains(q);
    }
    let digits = q.bytes().all(|b| b.is_ascii_digit());
    if digits {
        return q.len() == 4 && wa_id.ends_with(q);
    }
    by_name
}

pub(super) async fn conversations(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(filters): Query<ListFilters>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let page = filters.page.unwrap_or(1).max(1);
    let narrowing = !(filters.role.is_empty() && filters.lang.is_empty() && filters.q.is_empty());
    // Role, language and name are read per conversation: with one of them, a wider page is
    // read and narrowed here.
    let listed = operations::list_conversations(
        state.store.as_ref(),
        &ListParams {
            state: Some(filters.state.clone()),
            idle_for: Some(filters.idle_for.clone()),
            handoff: Some(filters.handoff.clone()),
            in_assistant: Some(!filters.in_assistant.is_empty()),
            page: Some(if narrowing { 1 } else { page }),
            limit: Some(if narrowing { 200 } else { PAGE }),
        },
    )
    .await?;
    let mut rows = Vec::new();
    for c in listed["conversations"].as_array().into_iter().flatten() {
        let mut row = c.clone();
        let wa_id = c["wa_id"].as_str().unwrap_or_default();
        let user = match WaId::parse(wa_id) {
            Ok(wa_id) => state.store.user(&wa_id).await?,
            Err(_) => None,
        };
        let name = user.as_ref().and_then(|u| u.name.clone());
        let role = user.as_ref().map_or("prospect", |u| u.role.as_str());
        let q = filters.q.trim().to_lowercase();
        if (!filters.role.is_empty() && role != filters.role)
            || (!filters.lang.is_empty() && c["lang"].as_str() != Some(filters.lang.trim()))
            || (!q.is_empty() && !searched(&q, wa_id, name.as_deref(), who.masked()))
        {
            continue;
        }
        row["name"] = json!(name);
        row["idle"] = json!(c["idle_seconds"].as_i64().map(idle).unwrap_or_default());
        who.linked(&mut row);
        rows.push(row);
    }
    // A full page may have more behind it (a last page of exactly PAGE shows an empty next).
    let (rows, more): (Vec<Value>, bool) = if narrowing {
        let more = rows.len() > page * PAGE;
        (
            rows.into_iter()
                .skip((page - 1) * PAGE)
                .take(PAGE)
                .collect(),
            more,
        )
    } else {
        let more = rows.len() == PAGE;
        (rows, more)
    };
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("state", &filters.state),
            ("idle_for", &filters.idle_for),
            ("handoff", &filters.handoff),
            ("role", &filters.role),
            ("lang", &filters.lang),
            ("q", &filters.q),
            ("in_assistant", &filters.in_assistant),
        ])
        .finish();
    let agents: Vec<String> = state
        .prompts
        .as_ref()
        .map(|p| p.prompts().agents().map(|a| a.name.to_string()).collect())
        .unwrap_or_default();
    render(
        "conversations.html",
        who.context(
            "conversations",
            json!({
                "conversations": rows,
                "filters": {"state": filters.state, "idle_for": filters.idle_for,
                            "handoff": filters.handoff, "role": filters.role,
                            "lang": filters.lang, "q": filters.q,
                            "in_assistant": filters.in_assistant},
                "agents": agents, "page": page, "more": more, "query": query,
            }),
        ),
    )
}

/// `3h 05m`, `12m`, `40s`.
pub(super) fn idle(seconds: i64) -> String {
    let (h, m) = (seconds / 3600, (seconds % 3600) / 60);
    match (h, m) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m"),
        (h, m) => format!("{h}h {m:02}m"),
    }
}

/// A conversation as the console shows it; `masked`, for a viewer: every phone number in its
/// messages, tool calls and outbox written as its last four digits.
pub(super) async fn conversation_view(
    state: &AppState,
    raw: &str,
    masked: bool,
) -> Result<Value, ConsoleError> {
    let mut view = operations::show_conversation(state.store.as_ref(), raw).await?;
    let wa_id = WaId::parse(raw).map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let user = state.store.user(&wa_id).await?;
    let timezone = state
        .config
        .as_ref()
        .map_or(chrono_tz::UTC, |c| c.engine.timezone);
    let midnight = crate::business::start_of_today(Utc::now(), timezone);
    view["tokens_today"] = json!(state.store.llm_tokens_since(raw, midnight).await?);
    view["name"] = json!(user.as_ref().and_then(|u| u.name.clone()));
    view["role"] = json!(user.as_ref().map_or("prospect", |u| u.role.as_str()));
    view["opted_out"] = json!(user.as_ref().and_then(|u| u.opted_out_at.map(|at| json!({
        "at": i18n::at(at),
        "source": u.opt_out_source.clone(),
    }))));
    view["marketing_opted_out"] = json!(
        user.as_ref()
            .and_then(|u| u.marketing_opted_out_at.map(i18n::at))
    );
    view["ad_headline"] = json!(user.as_ref().and_then(|u| u.referral.as_ref()).map(|r| {
        r.headline
            .clone()
            .or_else(|| r.source_id.clone())
            .unwrap_or_default()
    }));
    let last_wrote = state
        .store
        .conversation(&wa_id)
        .await?
        .and_then(|c| c.last_inbound_at);
    let now = state
        .store
        .server_time()
        .await
        .unwrap_or_else(|_| Utc::now());
    view["window_open"] =
        json!(last_wrote.is_some_and(|at| now - at < crate::outbound::governor::SERVICE_WINDOW));
    view["wa_id"] = json!(raw);
    view["c"] = view["conversation"].clone();
    view["lease"] = json!(state.store.lease_of(&wa_id).await?.map(|lease| json!({
        "owner": lease.owner,
        "until": i18n::exact(lease.until),
        "held": !lease.released && lease.until > Utc::now(),
    })));
    for path in [
        "/conversation/handoff/until",
        "/conversation/handoff_requested/at",
        "/pending_action/created_at",
    ] {
        if let Some(at) = view.pointer_mut(path) {
            i18n::shown_json(at, i18n::short);
        }
    }
    for part in view["outbox"].as_array_mut().into_iter().flatten() {
        i18n::shown_json(&mut part["at"], i18n::short);
    }
    for message in view["messages"].as_array_mut().into_iter().flatten() {
        i18n::shown_json(&mut message["at"], i18n::short);
        for call in message["tool_calls"].as_array_mut().into_iter().flatten() {
            call["args_text"] =
                json!(serde_json::to_string_pretty(&call["args"]).unwrap_or_default());
        }
    }
    if masked {
        for key in ["messages", "outbox"] {
            super::masking::mask_numbers_in(&mut view[key]);
        }
    }
    Ok(view)
}

pub(super) async fn conversation(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Query(notice): Query<NoticeQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let raw = resolve(&state, &raw)?;
    let mut view = conversation_view(&state, &raw, who.masked()).await?;
    view["notice"] = json!(notice.done);
    who.linked(&mut view);
    render("conversation.html", who.context("conversations", view))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct NoticeQuery {
    done: Option<String>,
}

/// The transcript alone, for the page's refresh while it is open.
pub(super) async fn transcript(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let raw = resolve(&state, &raw)?;
    let view = conversation_view(&state, &raw, who.masked()).await?;
    render("transcript.html", view)
}

pub(super) async fn prompts(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(notice): Query<NoticeQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let reloader = state
        .prompts
        .as_ref()
        .ok_or_else(|| AdminError::NotFound("no engine runs in this process".into()))?;
    let registry = reloader.prompts();
    let agents: Vec<Value> = registry
        .agents()
        .map(|a| {
            json!({
                "name": a.name, "kind": format!("{:?}", a.kind).to_lowercase(),
                "delegation": a.delegation, "roles": a.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
                "tools": a.tools, "keywords": a.keywords, "examples": a.examples,
            })
        })
        .collect();
    render(
        "prompts.html",
        who.context(
            "prompts",
            json!({"status": prompt_status(&reloader.status()), "agents": agents, "notice": notice.done}),
        ),
    )
}

/// "Save as a test": the conversation as a conversation test (`exported-NNNN.yaml`) or its
/// recorded model answers (`exported-NNNN.cassette.yaml`), personal data replaced, as a
/// download for `tests/conversations/`.
pub(super) async fn export_test(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((raw, file)): Path<(String, String)>,
) -> Result<axum::response::Response, ConsoleError> {
    use axum::response::IntoResponse as _;
    let who = signed_in(&state, &headers).await?;
    if !who.identity.may(OperatorRole::Operator) {
        return Err(ConsoleError::NotAllowed(
            who.identity.role,
            OperatorRole::Operator,
        ));
    }
    let raw = resolve(&state, &raw)?;
    let wa_id = WaId::parse(&raw).map_err(|e| AdminError::BadRequest(format!("{raw}: {e}")))?;
    let (Some(config), Some(prompts)) = (state.config.as_ref(), state.prompts.as_ref()) else {
        return Err(AdminError::NotFound("no engine runs in this process".into()).into());
    };
    let cassette = file.ends_with(".cassette.yaml");
    if !file.starts_with("exported-") || !file.ends_with(".yaml") {
        return Err(AdminError::NotFound(format!("no export {file}")).into());
    }
    let shared = crate::conversation_tests::runner::Shared {
        config: (**config).clone(),
        registry: prompts.prompts(),
        provider: None,
        judge: None,
    };
    let exported =
        crate::conversation_tests::export::export(state.store.as_ref(), &shared, &wa_id, None)
            .await
            .map_err(|e| AdminError::Conflict(format!("{e:#}")))?;
    let body = if cassette {
        serde_norway::to_string(&exported.cassette)
            .map_err(|e| AdminError::Conflict(e.to_string()))?
    } else {
        exported.yaml
    };
    Ok((
        [
            (
                axum::http::header::CONTENT_TYPE,
                "application/yaml; charset=utf-8".to_owned(),
            ),
            (
                axum::http::header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        body,
    )
        .into_response())
}

/// An offline spell's start, and how long it has lasted by `now`.
fn offline_since(since: chrono::DateTime<Utc>, now: chrono::DateTime<Utc>) -> Value {
    let minutes = (now - since).num_minutes().max(0);
    json!({
        "since": i18n::short(since),
        "for": format!("{}h {:02}m", minutes / 60, minutes % 60),
    })
}

/// The prompts' status with its instants in the agency's time zone.
fn prompt_status(status: &crate::runtime::PromptStatus) -> Value {
    let mut shown = serde_json::to_value(status).unwrap_or_default();
    for path in ["/loaded_at", "/last_rejected/at"] {
        if let Some(at) = shown.pointer_mut(path) {
            i18n::shown_json(at, i18n::at);
        }
    }
    shown
}
