//! Operator tools: the admin HTTP API and the admin command line.

pub mod api;
pub mod calendar_feed;
pub mod cli;
pub mod console;
pub mod export;
pub mod follow_ups;
pub mod operations;
pub mod reports;
pub mod team;
pub mod throttle;
