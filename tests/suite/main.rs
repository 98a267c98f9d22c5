//! The in-process integration suites, one binary with a module each: linked once instead of
//! once per suite, so a change under `src/` rebuilds the tests in about half the time.
//!
//! Suites that need a process of their own stay separate binaries under `tests/`: the ones
//! that assert on the process-wide metrics recorder (`metrics`, `monitor`), install a global
//! log subscriber (`pipeline`) or measure the process's memory (`lang`), and the heavy ones
//! that run `zaguan` processes or a browser against time bounds (`faults`, `scale`, `binary`,
//! `console`).
//!
//! Run one suite with `cargo test --test suite engine::`.

#[path = "../common/mod.rs"]
mod common;

mod abuse;
mod admin;
mod agent_day;
mod alerts;
mod api;
mod assistants;
mod deploy;
mod durable_events;
mod engine;
mod events;
mod follow_up;
mod governor;
mod handoff;
mod hostile;
mod llm_anthropic;
mod llm_fallback;
mod llm_openai;
mod media;
mod offline;
mod outbound;
mod outreach;
mod payload_fixtures;
mod prompt_reload;
mod prompts;
mod realestate_store;
mod reminders;
mod reports;
mod requests;
mod routing;
mod store;
mod team;
mod voice;
