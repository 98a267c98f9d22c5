//! `/console/staff` (admins): the agency's people and what feeds them — each staff member
//! with their own calendar's state (read when, or failing since when and why), adding and
//! disabling members, the owners with their listings (added and changed here too), and the
//! listings feed's last imports.
//! The same checks as `zaguan staff` and `/admin/staff` ([`crate::realestate::people`]).

use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::Html;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::i18n::tr;
use super::operators::admin;
use super::{ConsoleError, SignedIn, checked, render};
use crate::admin::operations::AdminError;
use crate::admin::team::OperatorRole;
use crate::realestate::people::{self, PeopleError, Writing};
use crate::state::AppState;

impl From<PeopleError> for ConsoleError {
    fn from(error: PeopleError) -> Self {
        ConsoleError::Admin(AdminError::from(error))
    }
}

fn realestate(state: &AppState) -> Result<&dyn crate::realestate::RealEstateStore, ConsoleError> {
    state.realestate.as_deref().ok_or_else(|| {
        ConsoleError::Admin(AdminError::NotFound(
            "no real-estate store in this process".to_owned(),
        ))
    })
}

async fn page(
    state: &AppState,
    who: &SignedIn,
    notice: Option<String>,
) -> Result<Html<String>, ConsoleError> {
    let store = realestate(state)?;
    let short = super::i18n::at;
    let calendars = store.calendars().await.map_err(AdminError::Store)?;
    let staff: Vec<Value> = store
        .staff()
        .await
        .map_err(AdminError::Store)?
        .into_iter()
        .map(|m| {
            let calendar = m.calendar_url.as_ref().map(|_| {
                match calendars.iter().find(|c| c.staff_id == m.id) {
                    Some(copy) if copy.failing_since.is_some() => json!({
                        "failing_since": copy.failing_since.map(short),
                        "error": copy.error,
                    }),
                    Some(copy) => json!({"read_at": copy.read_at.map(short)}),
                    None => json!({"pending": true}),
                }
            });
            json!({
                "id": m.id, "name": m.name,
                "number": m.wa_id.as_ref().map(|w| w.masked()),
                "handoffs": m.notify_handoffs,
                "zones": m.zones.join(", "),
                "visit_minutes": m.visit_minutes,
                "calendar": calendar,
                "disabled": m.disabled_at.map(short),
            })
        })
        .collect();
    let owners: Vec<Value> = people::owners(store)
        .await?
        .into_iter()
        .map(|o| {
            json!({
                "id": o.owner.id, "name": o.owner.name,
                "number": o.owner.wa_id.as_ref().map(|w| w.masked()),
                "agent": o.owner.agent_id, "listings": o.listings.join(", "),
            })
        })
        .collect();
    let imports: Vec<Value> = store
        .feed_imports(5)
        .await
        .map_err(AdminError::Store)?
        .into_iter()
        .map(|r| json!({"at": short(r.started_at), "by": r.instance, "summary": r.summary, "error": r.error}))
        .collect();
    render(
        "staff.html",
        who.context(
            "staff",
            json!({"staff": staff, "owners": owners, "imports": imports, "notice": notice}),
        ),
    )
}

pub(super) async fn staff(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Html<String>, ConsoleError> {
    let who = admin(&state, &headers).await?;
    page(&state, &who, None).await
}

#[derive(Deserialize)]
pub(super) struct AddForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    wa_id: String,
    #[serde(default)]
    notify_handoffs: Option<String>,
    #[serde(default)]
    zones: String,
    #[serde(default)]
    visit_minutes: String,
    #[serde(default)]
    calendar_url: String,
}

fn writing(state: &AppState) -> Writing {
    Writing {
        region: state
            .config
            .as_ref()
            .map_or_else(Default::default, |config| config.phone_region),
        now: Utc::now(),
    }
}

pub(super) async fn add(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<AddForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let mut item = Map::new();
    for (key, value) in [
        ("name", &form.name),
        ("wa_id", &form.wa_id),
        ("zones", &form.zones),
        ("visit_minutes", &form.visit_minutes),
        ("calendar_url", &form.calendar_url),
    ] {
        if !value.trim().is_empty() {
            item.insert(key.to_owned(), Value::from(value.trim()));
        }
    }
    if !item.contains_key("name") {
        item.insert("name".to_owned(), Value::from(""));
    }
    item.insert(
        "notify_handoffs".to_owned(),
        Value::from(form.notify_handoffs.is_some()),
    );
    let added = people::add_staff(realestate(&state)?, vec![item], writing(&state)).await?;
    tracing::info!(operator = %who.identity.name, staff = %added[0].id, "staff member added in the console");
    page(
        &state,
        &who,
        Some(tr(
            "{name} ({id}) added.",
            &[("name", &added[0].name), ("id", &added[0].id)],
        )),
    )
    .await
}

#[derive(Deserialize)]
pub(super) struct ActionForm {
    #[serde(default)]
    csrf: String,
}

pub(super) async fn disable(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let member = people::disable_staff(realestate(&state)?, &id, Utc::now()).await?;
    tracing::info!(operator = %who.identity.name, staff = %id, "staff member disabled in the console");
    page(
        &state,
        &who,
        Some(tr(
            "{name} ({id}) is out of handoffs and visits; the record stays.",
            &[("name", &member.name), ("id", &member.id)],
        )),
    )
    .await
}

#[derive(Deserialize)]
pub(super) struct OwnerForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    wa_id: String,
    #[serde(default)]
    agent_id: String,
    #[serde(default)]
    listings: String,
}

impl OwnerForm {
    /// The form as the collection's fields. Adding, an empty field is not given; changing, an
    /// empty number keeps the one on record (the page shows it masked), an empty agent or list
    /// of listings clears it.
    fn fields(&self, adding: bool) -> Map<String, Value> {
        let mut item = Map::new();
        item.insert("name".to_owned(), Value::from(self.name.trim()));
        if !self.wa_id.trim().is_empty() {
            item.insert("wa_id".to_owned(), Value::from(self.wa_id.trim()));
        }
        for (key, value) in [("agent_id", &self.agent_id), ("listings", &self.listings)] {
            match value.trim() {
                "" if adding => {}
                "" => {
                    item.insert(key.to_owned(), Value::Null);
                }
                value => {
                    item.insert(key.to_owned(), Value::from(value));
                }
            }
        }
        item
    }
}

pub(super) async fn add_owner(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<OwnerForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let added = people::add_owners(
        realestate(&state)?,
        vec![form.fields(true)],
        writing(&state),
    )
    .await?;
    let owner = &added[0].owner;
    tracing::info!(operator = %who.identity.name, owner = %owner.id, "owner added in the console");
    page(
        &state,
        &who,
        Some(tr(
            "{name} ({id}) added.",
            &[("name", &owner.name), ("id", &owner.id)],
        )),
    )
    .await
}

pub(super) async fn update_owner(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<OwnerForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let saved = people::update_owner(
        realestate(&state)?,
        &id,
        form.fields(false),
        writing(&state),
    )
    .await?;
    tracing::info!(operator = %who.identity.name, owner = %id, "owner changed in the console");
    page(
        &state,
        &who,
        Some(tr(
            "{name} ({id}) saved.",
            &[("name", &saved.owner.name), ("id", &saved.owner.id)],
        )),
    )
    .await
}
