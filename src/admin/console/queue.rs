//! `/console/queue`: the conversations waiting for a person, oldest first, with how long each
//! has waited (past `ZAGUAN_HANDOFF_SLA` marked), the reason, the language and the assistant;
//! then the ones an operator has, and who. Operators take, reply and release from here; the
//! table refreshes itself every few seconds (`?rows=1` is the table alone).

use crate::admin::operations::{self, ListParams};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::pages::idle;
use super::{ConsoleError, SignedIn, render, signed_in};

/// Whether a request waiting since `since` is past the SLA at `now`, counted in working time as
/// the escalation counts it.
fn late(
    schedule: &crate::business::Schedule<'_>,
    since: DateTime<Utc>,
    sla: chrono::Duration,
    now: DateTime<Utc>,
) -> bool {
    schedule.after_open_time(since, sla) < now
}

/// The most conversations each part of the queue shows (the store's largest page).
const SHOWN: usize = 200;

#[derive(Debug, Default, Deserialize)]
pub(super) struct QueueQuery {
    #[serde(default)]
    rows: Option<u8>,
    done: Option<String>,
}

fn at_of(value: &Value) -> Option<DateTime<Utc>> {
    value
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

pub(super) async fn queue(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<QueueQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let now = Utc::now();
    let sla = state
        .config
        .as_ref()
        .map_or(crate::engine::handoff::DEFAULT_HANDOFF_SLA, |c| {
            c.handoffs.sla
        });
    let sla = chrono::Duration::from_std(sla).unwrap_or(chrono::Duration::MAX);
    let listed = |handoff: &'static str| {
        let store = state.store.as_ref();
        async move {
            operations::list_conversations(
                store,
                &ListParams {
                    handoff: Some(handoff.to_owned()),
                    limit: Some(SHOWN),
                    ..ListParams::default()
                },
            )
            .await
            .map(|page| {
                page["conversations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
        }
    };
    // Late by working time, as the escalation counts it: a request at 19:55 is not late at
    // 20:10 when the office closed at 20:00.
    let business = state.business();
    let timezone = state
        .config
        .as_ref()
        .map_or(chrono_tz::Europe::Madrid, |c| c.engine.timezone);
    let hours = business.opening_hours();
    let schedule = business.schedule(&hours, timezone);
    let mut waiting = Vec::new();
    for c in listed("requested").await? {
        let since = at_of(&c["handoff_requested"]["at"]).unwrap_or(now);
        waiting.push((since, c));
    }
    waiting.sort_by_key(|(since, _)| *since);
    let mut rows = Vec::new();
    for (since, c) in waiting {
        let waited = (now - since).num_seconds().max(0);
        let mut row = row_of(&state, &who, &c).await?;
        row["waited"] = json!(idle(waited));
        row["since"] = json!(super::i18n::short(since));
        row["late"] = json!(late(&schedule, since, sla, now));
        row["reason"] = c["handoff_requested"]["reason"].clone();
        row["notice_failures"] = c["handoff_requested"]["notice_failures"].clone();
        if who.masked() {
            super::masking::mask_numbers_in(&mut row["reason"]);
            super::masking::mask_numbers_in(&mut row["notice_failures"]);
        }
        rows.push(row);
    }
    let mut taken = Vec::new();
    for c in listed("active").await? {
        let mut row = row_of(&state, &who, &c).await?;
        row["operator"] = c["handoff"]["operator"].clone();
        row["until"] = json!(at_of(&c["handoff"]["until"]).map(super::i18n::short));
        row["mine"] = json!(c["handoff"]["operator"].as_str() == Some(&who.identity.name));
        taken.push(row);
    }
    let context = who.context(
        "queue",
        json!({
            "waiting": rows, "taken": taken, "notice": query.done,
            "sla": idle(sla.num_seconds()), "shown": SHOWN,
            "late": rows.iter().filter(|r| r["late"] == json!(true)).count(),
            "now": super::i18n::clock(now),
        }),
    );
    if query.rows == Some(1) {
        render("queue_rows.html", context)
    } else {
        render("queue.html", context)
    }
}

/// What the queue shows of a conversation besides its place: the link, the number (masked for
/// viewers), the customer's name, language, assistant, and whether a reply can go out now.
async fn row_of(state: &AppState, who: &SignedIn, c: &Value) -> Result<Value, ConsoleError> {
    let mut row = json!({
        "wa_id": c["wa_id"],
        "lang": c["lang"],
        "assistant": c["dialog_state"].as_array().and_then(|s| s.last()).cloned()
            .unwrap_or(json!("primary_assistant")),
    });
    if let Ok(wa_id) = crate::domain::WaId::parse(c["wa_id"].as_str().unwrap_or_default()) {
        row["name"] = json!(state.store.user(&wa_id).await?.and_then(|u| u.name));
        let last = state
            .store
            .conversation(&wa_id)
            .await?
            .and_then(|c| c.last_inbound_at);
        row["window_open"] = json!(
            last.is_some_and(|at| Utc::now() - at < crate::outbound::governor::SERVICE_WINDOW)
        );
    }
    who.linked(&mut row);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::late;
    use chrono::TimeZone as _;

    #[test]
    fn a_request_is_late_by_working_time_not_by_the_clock() {
        let hours = crate::business::week_from(
            &crate::business::WEEKDAYS
                .iter()
                .map(|day| ((*day).to_owned(), vec!["9:00-20:00".to_owned()]))
                .collect(),
        )
        .unwrap();
        let schedule = crate::business::Schedule::new(&hours, &[], chrono_tz::Europe::Madrid);
        let madrid = |h, m| {
            chrono_tz::Europe::Madrid
                .with_ymd_and_hms(2026, 12, 2, h, m, 0)
                .unwrap()
                .to_utc()
        };
        let sla = chrono::Duration::minutes(15);
        // Asked at 19:55: ten minutes after closing is not late (five minutes of work passed).
        assert!(!late(&schedule, madrid(19, 55), sla, madrid(20, 30)));
        // Asked at 10:00: late at 10:16.
        assert!(late(&schedule, madrid(10, 0), sla, madrid(10, 16)));
        assert!(!late(&schedule, madrid(10, 0), sla, madrid(10, 14)));
    }
}
