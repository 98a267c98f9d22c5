//! Prompt hot reload: staff edit `prompts/` and the running service picks the change up — on a
//! file change in the folder, on SIGHUP, or on `POST /admin/prompts/reload`. A new set is
//! checked exactly as `zaguan prompts check` does; a set with problems is refused with every
//! problem logged as `file:line: message`, and the running set stays. Turns already running
//! finish with the set they started with (see [`Engine::reload`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use notify::Watcher as _;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::agents::{AgentRegistry, PromptProblem};
use crate::engine::Engine;

/// Editors save in several steps (temporary file, rename, chmod): one reload after they settle.
const SETTLE: Duration = Duration::from_millis(300);

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// A new set is active; new turns use it.
    Loaded { version: String },
    /// The folder holds the set already running.
    Unchanged { version: String },
}

/// The last set refused, for operators (`GET /admin/prompts`).
#[derive(Debug, Clone, Serialize)]
pub struct Rejected {
    pub at: DateTime<Utc>,
    /// `file:line: message`, as `zaguan prompts check` prints them.
    pub problems: Vec<String>,
}

/// What `GET /admin/prompts` shows.
#[derive(Debug, Clone, Serialize)]
pub struct PromptStatus {
    pub version: String,
    pub loaded_at: DateTime<Utc>,
    pub dir: String,
    pub agents: Vec<String>,
    /// The last refused set, if it came after the active one was loaded.
    pub last_rejected: Option<Rejected>,
}

/// Reloads the prompt set of one engine from its folder.
pub struct PromptReloader {
    dir: PathBuf,
    known_tools: BTreeSet<String>,
    engine: Arc<Engine>,
    last_rejected: Mutex<Option<Rejected>>,
    /// One reload at a time: two would race to swap the set.
    reloading: tokio::sync::Mutex<()>,
}

impl PromptReloader {
    pub fn new(dir: PathBuf, known_tools: BTreeSet<String>, engine: Arc<Engine>) -> Self {
        Self {
            dir,
            known_tools,
            engine,
            last_rejected: Mutex::new(None),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads and checks the folder; activates the set when it is valid and different.
    pub async fn reload(&self) -> Result<Reloaded, Vec<PromptProblem>> {
        let _one = self.reloading.lock().await;
        let (dir, known) = (self.dir.clone(), self.known_tools.clone());
        let loaded = tokio::task::spawn_blocking(move || AgentRegistry::load(&dir, &known))
            .await
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic.into_panic()));
        match loaded {
            Ok(set) => {
                // The folder is valid again: whatever was refused before is moot.
                *self.last_rejected.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let version = set.version().to_owned();
                if version == self.engine.prompts().version() {
                    metrics::counter!("zaguan_prompt_reloads_total", "outcome" => "unchanged")
                        .increment(1);
                    return Ok(Reloaded::Unchanged { version });
                }
                let agents = set.agents().count();
                for warning in set.warnings() {
                    tracing::warn!("{warning}");
                }
                self.engine.reload(Arc::new(set));
                tracing::info!(%version, agents, "prompts reloaded");
                metrics::counter!("zaguan_prompt_reloads_total", "outcome" => "loaded")
                    .increment(1);
                Ok(Reloaded::Loaded { version })
            }
            Err(problems) => {
                for problem in &problems {
                    tracing::error!("{problem}");
                }
                tracing::error!(
                    problems = problems.len(),
                    running = %self.engine.prompts().version(),
                    "prompts not reloaded: the new set has problems; the running set stays"
                );
                metrics::counter!("zaguan_prompt_reloads_total", "outcome" => "rejected")
                    .increment(1);
                *self.last_rejected.lock().unwrap_or_else(|e| e.into_inner()) = Some(Rejected {
                    at: Utc::now(),
                    problems: problems.iter().map(ToString::to_string).collect(),
                });
                Err(problems)
            }
        }
    }

    /// The running prompt set.
    pub fn prompts(&self) -> Arc<crate::agents::AgentRegistry> {
        self.engine.prompts()
    }

    /// The engine the prompts are loaded into.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn status(&self) -> PromptStatus {
        let prompts = self.engine.prompts();
        PromptStatus {
            version: prompts.version().to_owned(),
            loaded_at: prompts.loaded_at(),
            dir: self.dir.display().to_string(),
            agents: prompts
                .agents()
                .map(|agent| agent.name.to_string())
                .collect(),
            last_rejected: self
                .last_rejected
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Reloads on every change in the folder (settled) and on SIGHUP until aborted. A folder
    /// that cannot be watched is logged; SIGHUP still works.
    pub fn spawn(self: Arc<Self>) -> JoinHandle<()> {
        let (changed, mut changes) = mpsc::unbounded_channel::<()>();
        let watcher = {
            let changed = changed.clone();
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(event) if event.kind.is_access() => {}
                Ok(_) => {
                    let _ = changed.send(());
                }
                Err(error) => tracing::warn!("prompts folder watch: {error}"),
            })
            .and_then(|mut watcher| {
                watcher.watch(&self.dir, notify::RecursiveMode::NonRecursive)?;
                Ok(watcher)
            })
        };
        let watcher = match watcher {
            Ok(watcher) => Some(watcher),
            Err(error) => {
                tracing::error!(
                    dir = %self.dir.display(),
                    "cannot watch the prompts folder ({error}); reload with SIGHUP"
                );
                None
            }
        };
        #[cfg(unix)]
        {
            let changed = changed.clone();
            tokio::spawn(async move {
                use tokio::signal::unix::{SignalKind, signal};
                match signal(SignalKind::hangup()) {
                    Ok(mut hangup) => {
                        while hangup.recv().await.is_some() {
                            tracing::info!("SIGHUP: reloading the prompts");
                            if changed.send(()).is_err() {
                                break;
                            }
                        }
                    }
                    Err(error) => tracing::error!("cannot listen for SIGHUP: {error}"),
                }
            });
        }
        drop(changed);
        tokio::spawn(async move {
            // Dropping the watcher stops it: it lives as long as this task.
            let _watcher = watcher;
            while changes.recv().await.is_some() {
                tokio::time::sleep(SETTLE).await;
                while changes.try_recv().is_ok() {}
                // Problems are logged by `reload`.
                let _ = self.reload().await;
            }
        })
    }
}
