//! `GET /calendar/{token}.ics`: an agent's booked visits as the iCalendar feed their phone's
//! calendar subscribes to. The token (`staff.calendar_token`) is the only key, so an unknown
//! one, a disabled member's, or a process without business data answers 404 alike, and
//! `zaguan staff update ID --new-calendar-token` cuts an old address off.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use crate::domain::WaId;
use crate::realestate::calendar::{self, Customers};
use crate::state::AppState;
use crate::store::Store;

/// Customers' profile names, from the conversation store.
struct ProfileNames<'a>(&'a dyn Store);

#[async_trait::async_trait]
impl Customers for ProfileNames<'_> {
    async fn name_of(&self, wa_id: &WaId) -> Option<String> {
        self.0.user(wa_id).await.ok().flatten().and_then(|u| u.name)
    }
}

pub async fn agent_calendar(State(state): State<AppState>, Path(file): Path<String>) -> Response {
    let not_found = || (StatusCode::NOT_FOUND, "not found").into_response();
    let Some(token) = file.strip_suffix(".ics") else {
        return not_found();
    };
    let Some(realestate) = state.realestate.as_deref() else {
        return not_found();
    };
    let member = match calendar::member_by_token(realestate, token).await {
        Ok(Some(member)) => member,
        Ok(None) => return not_found(),
        Err(error) => {
            tracing::warn!("calendar feed not served: {error}");
            return (StatusCode::SERVICE_UNAVAILABLE, "store unavailable").into_response();
        }
    };
    let console = state
        .config
        .as_ref()
        .and_then(|c| c.public_url.as_ref())
        .map(|url| url.as_str().to_owned());
    match calendar::agent_feed(
        realestate,
        &member,
        &ProfileNames(state.store.as_ref()),
        console.as_deref(),
        Utc::now(),
    )
    .await
    {
        Ok(feed) => {
            metrics::counter!("zaguan_calendar_feeds_served_total").increment(1);
            (
                [
                    (header::CONTENT_TYPE, "text/calendar; charset=utf-8"),
                    (header::CACHE_CONTROL, "private, max-age=300"),
                ],
                feed,
            )
                .into_response()
        }
        Err(error) => {
            tracing::warn!(staff = %member.id, "calendar feed not served: {error}");
            (StatusCode::SERVICE_UNAVAILABLE, "store unavailable").into_response()
        }
    }
}
