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
pub use receive::{MAX_BODY_BYTES, receive};
pub use verify::verify;
