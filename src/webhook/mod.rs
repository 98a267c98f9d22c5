//! The front door: Meta's webhook. `GET /webhook` answers the subscription handshake;
//! `POST /webhook` verifies the signature over the raw bytes, parses every update in the batch,
//! and stores inbound messages in `inbox` before answering 200.

mod contacts;
mod error;
pub mod payload;
mod receive;
pub mod signature;
mod verify;

pub use contacts::RecentContacts;
pub use error::WebhookError;
pub use receive::{MAX_BODY_BYTES, Stored, receive, store_updates};
pub use verify::verify;

use std::sync::Arc;

use secrecy::SecretString;

use crate::runtime::Arrivals;
use crate::store::{Store, StoreClock};

/// What the webhook's handlers reach: the service's state composes it (`FromRef`). Of the
/// store, [`store_updates`](receive::store_updates) uses the inbox, users, outbox and
/// conversations.
pub struct WebhookState<S: ?Sized = dyn Store> {
    pub store: Arc<S>,
    /// `WHATSAPP_VERIFY_TOKEN`; `None` refuses every handshake.
    pub verify_token: Option<Arc<SecretString>>,
    /// `WHATSAPP_APP_SECRET`; `None` refuses every `POST /webhook`.
    pub app_secret: Option<Arc<SecretString>>,
    /// New messages stored, handed to this process's workers (no poll needed).
    pub arrivals: Arc<Arrivals>,
    /// Senders written recently, so bursts do not rewrite the same contact.
    pub recent_contacts: Arc<RecentContacts>,
    /// The database's clock: arrivals are stamped by it.
    pub clock: Arc<StoreClock>,
}

// By hand: a derived `Clone` would ask the store itself to be `Clone`.
impl<S: ?Sized> Clone for WebhookState<S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            verify_token: self.verify_token.clone(),
            app_secret: self.app_secret.clone(),
            arrivals: self.arrivals.clone(),
            recent_contacts: self.recent_contacts.clone(),
            clock: self.clock.clone(),
        }
    }
}
