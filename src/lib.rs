//! Zaguan: a WhatsApp bot service for a real-estate business.
//!
//! The flow (`docs/architecture.md`): Meta posts a webhook → [`webhook`] verifies the signature
//! over the raw bytes and parses every update → inbound messages are stored in the `inbox` of the
//! [`store`] before the 200 → workers (the engine) take them one conversation at a time through
//! context_extractor, route_to_workflow and the assistants → guard_translator → outbox → Graph API.

pub mod admin;
pub mod agents;
pub mod app;
pub mod business;
pub mod config;
pub mod conversation_tests;
pub mod crm;
pub mod domain;
pub mod engine;
pub mod guard;
pub mod health;
pub mod leads;
pub mod llm;
pub mod outbound;
pub mod realestate;
pub mod runtime;
pub mod serve;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod templates;
pub mod transport;
pub mod voice;
pub mod webhook;
