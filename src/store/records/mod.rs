//! The records the store keeps, one type per collection document (`docs/operators.md`, what each
//! collection holds).

mod conversations;
mod history;
mod inbox;
mod maintenance;
mod outbox;
mod users;

pub use conversations::*;
pub use history::*;
pub use inbox::*;
pub use maintenance::*;
pub use outbox::*;
pub use users::*;
