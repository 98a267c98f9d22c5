//! The process's machinery that is not the seed's graph. For now the one loop of the jobs that
//! look every so often (`periodic`); the workers, leases and instances are to follow from
//! `engine/` (docs/architecture.md).

pub mod periodic;

pub use periodic::{PeriodicJob, spawn_every};
