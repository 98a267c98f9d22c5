//! The operator subcommands of the `zaguan` binary, one file per command, each with its
//! arguments and an `async fn run`.

pub mod chat;
pub mod conversations;
pub mod demo;
pub mod events;
pub mod export;
pub mod follow_ups;
pub mod healthcheck;
pub mod listings;
pub mod operators;
pub mod people;
pub mod prompts;
pub mod templates;
pub mod test;
pub mod users;
