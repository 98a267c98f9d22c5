//! The agency's team: named operators who sign in to the console and call the admin API, each
//! with a role, so the audit trail (`operator` on resets, handoffs and roles) names who really
//! acted. Passwords are kept as argon2 hashes and API tokens as digests (`operators`); console
//! sessions live server-side (`sessions`), so signing out or disabling an operator ends them at
//! once on every instance. `ZAGUAN_ADMIN_TOKEN` stays the bootstrap admin, named `admin`.

mod memory;
mod mongo;
pub mod secrets;

pub use memory::MemoryTeam;
pub use mongo::MongoTeam;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

use crate::store::{StoreError, StoreResult};

/// The bootstrap admin's name: whoever holds `ZAGUAN_ADMIN_TOKEN`.
pub const BOOTSTRAP: &str = "admin";
/// How long a console sign-in lasts.
pub const SESSION_LIFETIME: chrono::Duration = chrono::Duration::hours(8);

/// What an operator may do; each role can do what the ones before it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatorRole {
    /// Reads the console; phone numbers are shown masked.
    Viewer,
    /// Acts on conversations: take, reply, release, reset.
    Operator,
    /// Manages operators, exports, erases contacts.
    Admin,
}

impl OperatorRole {
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorRole::Viewer => "viewer",
            OperatorRole::Operator => "operator",
            OperatorRole::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "viewer" => Some(Self::Viewer),
            "operator" => Some(Self::Operator),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }
}

/// One member of the team, as stored in `operators` (`_id` is the name).
#[derive(Debug, Clone, PartialEq)]
pub struct Operator {
    pub name: String,
    pub role: OperatorRole,
    /// How customers read them (`--display-name`, «Lucía Pérez»): the follow-up template
    /// says «soy Lucía Pérez de …». Never their sign-in name; without one, the business name
    /// stands in.
    pub display_name: Option<String>,
    /// argon2id, PHC string.
    pub password_hash: String,
    /// SHA-256 of the operator's API token.
    pub token_hash: String,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    /// When the password and token were last issued.
    pub issued_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
    pub last_sign_in_at: Option<DateTime<Utc>>,
}

/// A console sign-in, as stored in `sessions` (`_id` is the digest of the cookie's secret, so
/// a copy of the collection signs nobody in).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: String,
    pub operator: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The session's forms carry it.
    pub csrf: String,
    /// For the bootstrap admin: a digest of the admin token it signed in with, so changing the
    /// token ends those sessions.
    pub bootstrap: Option<String>,
}

/// Who is acting, as every audit field records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub role: OperatorRole,
    /// See [`Operator::display_name`]; `None` for the bootstrap admin.
    pub display_name: Option<String>,
}

impl Identity {
    fn of(operator: Operator) -> Self {
        Self {
            name: operator.name,
            role: operator.role,
            display_name: operator.display_name,
        }
    }

    /// The bootstrap admin of `ZAGUAN_ADMIN_TOKEN`.
    fn bootstrap() -> Self {
        Self {
            name: BOOTSTRAP.to_owned(),
            role: OperatorRole::Admin,
            display_name: None,
        }
    }

    /// How a customer reads who writes: the display name, else `business` — never a sign-in
    /// name, never «admin».
    pub fn shown_as(&self, business: &str) -> String {
        self.display_name
            .clone()
            .unwrap_or_else(|| business.to_owned())
    }

    pub fn may(&self, role: OperatorRole) -> bool {
        self.role >= role
    }
}

/// Where the team is kept: MongoDB (`operators`, `sessions`) or memory.
#[async_trait]
pub trait TeamStore: Send + Sync {
    /// `false` when the name is taken.
    async fn insert_operator(&self, operator: &Operator) -> StoreResult<bool>;
    async fn operator(&self, name: &str) -> StoreResult<Option<Operator>>;
    /// Every operator, by name.
    async fn operators(&self) -> StoreResult<Vec<Operator>>;
    async fn operator_by_token(&self, token_hash: &str) -> StoreResult<Option<Operator>>;
    /// New password and token (a reset also enables a disabled operator); `false` when unknown.
    async fn set_credentials(
        &self,
        name: &str,
        password_hash: &str,
        token_hash: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// `false` when unknown.
    async fn set_disabled(&self, name: &str, at: Option<DateTime<Utc>>) -> StoreResult<bool>;
    async fn note_sign_in(&self, name: &str, at: DateTime<Utc>) -> StoreResult<()>;
    async fn insert_session(&self, session: &SessionRecord) -> StoreResult<()>;
    async fn session(&self, id: &str) -> StoreResult<Option<SessionRecord>>;
    async fn delete_session(&self, id: &str) -> StoreResult<()>;
    /// Ends every session of `operator`; how many there were.
    async fn delete_sessions_of(&self, operator: &str) -> StoreResult<u64>;
    /// Removes sessions expired before `now`.
    async fn delete_expired_sessions(&self, now: DateTime<Utc>) -> StoreResult<u64>;
    /// A failed sign-in (or a wrong API token) of `account` from `address` at `at`; failures
    /// from before `forget_before` are dropped (they expire: the store keeps no more).
    async fn record_sign_in_failure(
        &self,
        address: &str,
        account: &str,
        at: DateTime<Utc>,
        forget_before: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// The failures after `since` from `address`, and of `account` from it: every instance
    /// counts the same ones.
    async fn sign_in_failures(
        &self,
        address: &str,
        account: &str,
        since: DateTime<Utc>,
    ) -> StoreResult<(u64, u64)>;
}

/// Why a team operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    #[error("{0}")]
    BadName(String),
    #[error("an operator named {0} already exists")]
    Exists(String),
    #[error("no operator named {0} (zaguan operators list)")]
    Unknown(String),
    #[error("{0} is disabled (zaguan operators reset {0} enables them again)")]
    Disabled(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a new or reset operator is given, shown once and never stored in clear.
#[derive(Debug, Clone)]
pub struct Issued {
    pub name: String,
    pub role: OperatorRole,
    pub password: String,
    pub token: String,
}

/// A signed-in console session.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub identity: Identity,
    /// The session's record id (the digest of the cookie).
    pub id: String,
    pub csrf: String,
    pub expires_at: DateTime<Utc>,
}

/// The team's operations, over a [`TeamStore`] and the bootstrap token.
#[derive(Clone)]
pub struct Team {
    store: Arc<dyn TeamStore>,
    bootstrap: Option<Arc<SecretString>>,
}

impl Team {
    pub fn new(store: Arc<dyn TeamStore>, bootstrap: Option<Arc<SecretString>>) -> Self {
        Self { store, bootstrap }
    }

    /// The team in memory (tests, and a service without MongoDB).
    pub fn in_memory(bootstrap: Option<Arc<SecretString>>) -> Self {
        Self::new(Arc::new(MemoryTeam::default()), bootstrap)
    }

    pub fn store(&self) -> &dyn TeamStore {
        self.store.as_ref()
    }

    /// A valid operator name: 1 to 40 letters, digits, `.`, `_`, `-`, and not `admin`.
    pub fn check_name(name: &str) -> Result<String, TeamError> {
        let name = name.trim();
        let fine = !name.is_empty()
            && name.chars().count() <= 40
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !fine {
            return Err(TeamError::BadName(format!(
                "`{name}`: an operator's name is 1 to 40 letters, digits, `.`, `_` or `-`"
            )));
        }
        if name.eq_ignore_ascii_case(BOOTSTRAP) {
            return Err(TeamError::BadName(format!(
                "`{name}` is the bootstrap admin's name (ZAGUAN_ADMIN_TOKEN); choose another"
            )));
        }
        Ok(name.to_lowercase())
    }

    /// A new operator with a fresh password and API token.
    pub async fn add(
        &self,
        name: &str,
        role: OperatorRole,
        display_name: Option<&str>,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<Issued, TeamError> {
        let name = Self::check_name(name)?;
        let display_name = display_name
            .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|d| !d.is_empty());
        if let Some(shown) = &display_name
            && shown.chars().count() > 60
        {
            return Err(TeamError::BadName(format!(
                "display name `{shown}`: at most 60 characters (customers read it in a template)"
            )));
        }
        let (password, token) = (secrets::new_password(), secrets::new_token());
        let operator = Operator {
            name: name.clone(),
            role,
            display_name,
            password_hash: hash(password.clone()).await,
            token_hash: secrets::digest(&token),
            created_at: now,
            created_by: by.to_owned(),
            issued_at: now,
            disabled_at: None,
            last_sign_in_at: None,
        };
        if !self.store.insert_operator(&operator).await? {
            return Err(TeamError::Exists(name));
        }
        tracing::info!(operator = %name, role = role.as_str(), by, "operator added");
        Ok(Issued {
            name,
            role,
            password,
            token,
        })
    }

    /// A new password and token for `name`, enabled again; their sessions end.
    pub async fn reset(
        &self,
        name: &str,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<Issued, TeamError> {
        let operator = self.known(name).await?;
        let (password, token) = (secrets::new_password(), secrets::new_token());
        let hashed = hash(password.clone()).await;
        self.store
            .set_credentials(&operator.name, &hashed, &secrets::digest(&token), now)
            .await?;
        let ended = self.store.delete_sessions_of(&operator.name).await?;
        tracing::info!(operator = %operator.name, by, sessions_ended = ended, "operator's password and token reset");
        Ok(Issued {
            name: operator.name,
            role: operator.role,
            password,
            token,
        })
    }

    /// Disables `name`: their sessions end and their token stops working at once.
    pub async fn disable(
        &self,
        name: &str,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<u64, TeamError> {
        let operator = self.known(name).await?;
        self.store.set_disabled(&operator.name, Some(now)).await?;
        let ended = self.store.delete_sessions_of(&operator.name).await?;
        tracing::info!(operator = %operator.name, by, sessions_ended = ended, "operator disabled");
        Ok(ended)
    }

    /// Who a command line run records as acting (`--operator NAME`): once the agency has a
    /// team, an enabled member of it, so the audit trail names real people; before the first
    /// operator is added, the name as given.
    pub async fn acting(&self, name: &str) -> Result<String, TeamError> {
        if self.store.operators().await?.is_empty() {
            return Ok(name.trim().to_owned());
        }
        let operator = self.known(name).await?;
        if operator.disabled_at.is_some() {
            return Err(TeamError::Disabled(operator.name));
        }
        Ok(operator.name)
    }

    pub async fn list(&self) -> Result<Vec<Operator>, TeamError> {
        Ok(self.store.operators().await?)
    }

    async fn known(&self, name: &str) -> Result<Operator, TeamError> {
        let key = name.trim().to_lowercase();
        self.store
            .operator(&key)
            .await?
            .ok_or_else(|| TeamError::Unknown(name.trim().to_owned()))
    }

    /// Signs `name` in with `password`: the session and its cookie value, or `None` for a
    /// wrong name or password (the same time either way) or a disabled operator.
    pub async fn sign_in(
        &self,
        name: &str,
        password: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<(SignedIn, String)>> {
        let name = name.trim().to_lowercase();
        let identity = if name == BOOTSTRAP {
            self.bootstrap_matches(password).then(Identity::bootstrap)
        } else {
            let operator = self.store.operator(&name).await?;
            let hash = operator
                .as_ref()
                .map_or(secrets::dummy_hash().to_owned(), |o| {
                    o.password_hash.clone()
                });
            let right = verify(password.to_owned(), hash).await;
            operator
                .filter(|o| right && o.disabled_at.is_none())
                .map(Identity::of)
        };
        let Some(identity) = identity else {
            return Ok(None);
        };
        self.store.delete_expired_sessions(now).await?;
        let secret = secrets::new_session_secret();
        let record = SessionRecord {
            id: secrets::digest(&secret),
            operator: identity.name.clone(),
            created_at: now,
            expires_at: now + SESSION_LIFETIME,
            csrf: hex::encode(rand::random::<[u8; 16]>()),
            bootstrap: (identity.name == BOOTSTRAP)
                .then(|| self.bootstrap_digest())
                .flatten(),
        };
        self.store.insert_session(&record).await?;
        if identity.name != BOOTSTRAP {
            self.store.note_sign_in(&identity.name, now).await?;
        }
        Ok(Some((
            SignedIn {
                identity,
                id: record.id,
                csrf: record.csrf,
                expires_at: record.expires_at,
            },
            secret,
        )))
    }

    /// The session a cookie value opens: not signed out, not expired, its operator still
    /// enabled (and with the role they have now).
    pub async fn session(&self, cookie: &str, now: DateTime<Utc>) -> StoreResult<Option<SignedIn>> {
        if cookie.len() != 64 || !cookie.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let Some(record) = self.store.session(&secrets::digest(cookie)).await? else {
            return Ok(None);
        };
        if record.expires_at <= now {
            return Ok(None);
        }
        let identity = if record.operator == BOOTSTRAP {
            let same_token =
                record.bootstrap.is_some() && record.bootstrap == self.bootstrap_digest();
            same_token.then(Identity::bootstrap)
        } else {
            self.store
                .operator(&record.operator)
                .await?
                .filter(|o| o.disabled_at.is_none())
                .map(Identity::of)
        };
        Ok(identity.map(|identity| SignedIn {
            identity,
            id: record.id,
            csrf: record.csrf,
            expires_at: record.expires_at,
        }))
    }

    /// Ends the session `id` (the record's, not the cookie's).
    pub async fn sign_out(&self, id: &str) -> StoreResult<()> {
        self.store.delete_session(id).await
    }

    /// Who a bearer token belongs to: the bootstrap admin or an enabled operator.
    pub async fn bearer(&self, token: &str) -> StoreResult<Option<Identity>> {
        if token.is_empty() {
            return Ok(None);
        }
        if self.bootstrap_matches(token) {
            return Ok(Some(Identity::bootstrap()));
        }
        if !token.starts_with("zg_") {
            return Ok(None);
        }
        Ok(self
            .store
            .operator_by_token(&secrets::digest(token))
            .await?
            .filter(|o| o.disabled_at.is_none())
            .map(Identity::of))
    }

    fn bootstrap_matches(&self, presented: &str) -> bool {
        self.bootstrap.as_ref().is_some_and(|token| {
            bool::from(
                presented
                    .trim()
                    .as_bytes()
                    .ct_eq(token.expose_secret().as_bytes()),
            )
        })
    }

    fn bootstrap_digest(&self) -> Option<String> {
        self.bootstrap
            .as_ref()
            .map(|token| secrets::digest(token.expose_secret()))
    }
}

/// argon2 takes tens of milliseconds of CPU: off the async workers.
async fn hash(password: String) -> String {
    tokio::task::spawn_blocking(move || secrets::hash_password(&password))
        .await
        .expect("hashing does not panic")
}

async fn verify(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || secrets::verify_password(&password, &hash))
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
