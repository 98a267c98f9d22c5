//! Answers to questions the business asked outside a turn — an agent's «¿cómo fue la visita?»,
//! an owner's offer, a customer's «¿qué te pareció?» — read without a model, like a
//! confirmation: the button's id says what it answers, and the amount of a counter-offer is
//! read from the message after «Contraoferta». The engine knows only this seam; the business
//! domain answers behind it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::store::{ReplyButton, StoreError};

/// What a contact said in a turn, as far as a follow-up question can be answered by it.
#[derive(Debug, Clone, Copy)]
pub struct Said<'a> {
    pub wa_id: &'a WaId,
    pub lang: Option<&'a str>,
    /// The id of the reply button or template quick reply pressed, if the turn's last
    /// message is a press.
    pub pressed: Option<&'a str>,
    /// What they typed, when they typed.
    pub text: Option<&'a str>,
    /// The `agent` of the last thing the bot said to them (`visit_feedback`…), so typed
    /// words can be read as the answer to it.
    pub after: Option<&'a str>,
    pub now: DateTime<Utc>,
}

/// The engine's reply to an answer, written as `agent` in the contact's history.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// In the business's language; guard_translator says it in the contact's.
    pub text: String,
    pub agent: &'static str,
    /// Buttons on the reply (at most 3).
    pub buttons: Vec<ReplyButton>,
}

/// What became of what was said.
#[derive(Debug, Clone, PartialEq)]
pub enum Answered {
    /// Not an answer to any question of ours: the assistants answer it.
    No,
    /// Recorded (typed feedback, say), and the assistants still answer it.
    Noted,
    /// Answered: this is the reply, and no assistant runs.
    Reply(Reply),
    /// Recorded, and what the contact asked for is `tool` with `args` run as `agent` (the
    /// appointment assistant listing new times for «Quiero verlo otra vez»): the call and its
    /// result are written as that assistant's, and it answers from them.
    Run {
        agent: &'static str,
        tool: &'static str,
        args: serde_json::Value,
    },
}

/// The business domain's answers (see the module doc).
#[async_trait]
pub trait Presses: Send + Sync {
    async fn answer(&self, said: &Said<'_>) -> Result<Answered, StoreError>;
}
