//! `pagers`: what waits to be told to one staff member. A notice goes at once when none went
//! to them within `ZAGUAN_HANDOFF_DIGEST`; otherwise it waits, and the ones gathered go
//! together as one message when that time is up — after an outage or at opening time, one
//! message listing each customer instead of hundreds.

use chrono::{DateTime, Utc};

use crate::domain::WaId;

/// One thing to tell a staff member: a customer waiting for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// Names the notice (the request, its level, the member): paged twice, kept once.
    pub key: String,
    /// The customer waiting.
    pub customer: WaId,
    /// Their name and number, as staff read them.
    pub label: String,
    /// Why they want a person.
    pub reason: String,
    /// The whole notice, sent as it is when it goes alone.
    pub text: String,
    /// The conversation in the console (or the command that takes it).
    pub link: String,
    /// Who is told (`staff._id`): a refusal of the notice goes back to the request with it.
    pub staff_id: String,
    /// The business number the customer wrote to, which the notice goes from.
    pub phone_number_id: Option<String>,
    pub at: DateTime<Utc>,
}

/// The pages of one message, claimed at `at` for one sender: sent again, with the same pages
/// and under the same id (derived from the member and `at`), when a crash came between the
/// claim and the queue. A page added after the claim waits for the next message.
#[derive(Debug, Clone, PartialEq)]
pub struct PageBatch {
    pub at: DateTime<Utc>,
    pub pages: Vec<Page>,
}
