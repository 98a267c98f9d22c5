//! Operator tools: the admin command line (and, later, the admin HTTP API).

pub mod cli;
