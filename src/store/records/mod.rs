//! The records the store keeps, one type per collection document (`docs/operators.md`, what each
//! collection holds).

mod conversations;
mod history;
mod inbox;
mod leads;
mod maintenance;
mod outbox;
mod pagers;
mod users;

pub use conversations::{
    Conversation, ConversationQuery, HandoffFilter, HandoffReason, HandoffRequest, HandoffStep,
    LeaseView, NoticeFailure,
};
pub use history::{Attachment, NewMessage, StoredMessage};
pub use inbox::{InboxBacklog, InboxEntry, InboxInsert, InboxOutcomes, InboxStatus, RejectedEntry};
pub use leads::{LeadFilter, LeadStatus, PortalLead};
pub use maintenance::{ForgetCounts, InstanceRecord, PurgeBefore, PurgeCounts};
pub use outbox::{
    Card, Fallback, ListRow, Media, NewOutbox, OutboxEntry, OutboxStatus, OutboxUpdate,
    ReplyButton, StatusOutcome, Template, TemplateStatus, reply_parts,
};
pub use pagers::{Page, PageBatch};
pub use users::{AD_SOURCE, ContactSeen, ORGANIC_SOURCE, OptOut, RoleAssignment, RoleSource, User};
