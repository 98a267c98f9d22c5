//! The process's machinery around the seed's graph: the workers that take conversations and run
//! their turns, this instance's membership and leases, how many conversations run at once, the
//! health monitor, retention, prompt reloads, LLM usage records, and the one loop of the jobs
//! that look every so often (`periodic`). The engine does not know of any of it.

pub mod concurrency;
pub mod instances;
pub mod monitor;
pub mod periodic;
pub mod reload;
pub mod retention;
pub mod usage;
pub mod worker;

pub use periodic::{PeriodicJob, spawn_every};
pub use reload::{PromptReloader, PromptStatus, Reloaded};
pub use usage::UsageRecorder;
pub use worker::{Arrivals, WorkerSettings, Workers};
