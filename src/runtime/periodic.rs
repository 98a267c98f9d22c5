//! One loop for the jobs that look every so often (CRM events, saved-search notices, visit
//! reminders): a round, its outcome logged the same way for each, then a pause. A failed round
//! is logged and the next one tries again; nothing here stops the process.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::task::JoinHandle;

/// A job run in rounds by [`spawn_every`].
pub trait PeriodicJob: Send + Sync + 'static {
    /// Logged, with the count, after a round that did something ("visit reminders queued");
    /// `None` for a job whose rounds are logged by the job itself.
    const DONE: Option<&'static str>;
    /// Logged, with the error, after a failed round ("visit reminders not checked").
    const FAILED: &'static str;

    type Error: std::fmt::Display + Send;

    /// One round at `now`: how many things it did.
    fn round(&self, now: DateTime<Utc>) -> impl Future<Output = Result<usize, Self::Error>> + Send;
}

/// Runs `job` every `every` (after each round ends, so rounds never overlap) until the task is
/// aborted.
pub fn spawn_every<J: PeriodicJob>(job: J, every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match job.round(Utc::now()).await {
                Ok(0) => {}
                Ok(count) => {
                    if let Some(done) = J::DONE {
                        tracing::info!(count, "{done}");
                    }
                }
                Err(error) => tracing::warn!("{}: {error}", J::FAILED),
            }
            tokio::time::sleep(every).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting {
        rounds: Arc<AtomicUsize>,
    }

    impl PeriodicJob for Counting {
        const DONE: Option<&'static str> = Some("counted");
        const FAILED: &'static str = "not counted";
        type Error = String;

        async fn round(&self, _now: DateTime<Utc>) -> Result<usize, String> {
            let n = self.rounds.fetch_add(1, Ordering::SeqCst);
            // Every other round fails: the loop must go on.
            if n.is_multiple_of(2) {
                Err("the store is down".to_owned())
            } else {
                Ok(n)
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_go_on_every_period_after_a_failed_one() {
        let rounds = Arc::new(AtomicUsize::new(0));
        let task = spawn_every(
            Counting {
                rounds: rounds.clone(),
            },
            Duration::from_secs(10),
        );
        tokio::time::sleep(Duration::from_secs(35)).await;
        task.abort();
        assert_eq!(rounds.load(Ordering::SeqCst), 4, "at 0, 10, 20 and 30 s");
    }
}
