//! Each agent's own calendar (`staff.calendar_url`: Google's secret iCal address, Outlook's
//! published calendar, a CalDAV export) read every `ZAGUAN_CALENDAR_REFRESH` into busy times
//! (`calendars`), with a timeout and a size limit. A calendar that cannot be read keeps its
//! last good copy and says since when, in the log, the metrics and `zaguan staff list`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::AHEAD;
use super::ics::{self, MAX_BYTES};
use crate::realestate::{CalendarCopy, RealEstateStore, StaffMember};
use crate::runtime::{PeriodicJob, spawn_every};

/// Longest a calendar's download may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

pub struct CalendarRefresh {
    store: Arc<dyn RealEstateStore>,
    client: reqwest::Client,
    every: Duration,
    timezone: Tz,
}

impl CalendarRefresh {
    pub fn new(
        store: Arc<dyn RealEstateStore>,
        every: Duration,
        timezone: Tz,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            store,
            client,
            every,
            timezone,
        })
    }

    /// Looks every minute at most; each calendar is read once per `every`.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        let look = self.every.min(Duration::from_secs(60));
        spawn_every(self, look)
    }

    async fn read(
        &self,
        url: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<(DateTime<Utc>, DateTime<Utc>)>, String> {
        let body = crate::realestate::download::bounded(
            &self.client,
            url,
            "the calendar",
            MAX_BYTES,
            FETCH_TIMEOUT,
        )
        .await?;
        let text = String::from_utf8_lossy(&body);
        let read = ics::busy_times(
            &text,
            now - chrono::Duration::days(1),
            now + AHEAD,
            self.timezone,
        )
        .map_err(|e| e.to_string())?;
        if read.skipped > 0 {
            tracing::warn!(
                skipped = read.skipped,
                "calendar events that do not read were left out"
            );
        }
        Ok(read.busy.into_iter().map(|b| (b.start, b.end)).collect())
    }

    async fn refresh(
        &self,
        member: &StaffMember,
        url: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, crate::store::StoreError> {
        let before = self
            .store
            .calendar(&member.id)
            .await?
            .filter(|c| c.url == url);
        let fresh = before.as_ref().is_some_and(|c| {
            c.failing_since.is_none()
                && c.read_at.is_some_and(|at| {
                    now - at < chrono::Duration::from_std(self.every).unwrap_or_default()
                })
        });
        if fresh {
            return Ok(false);
        }
        let copy = match self.read(url, now).await {
            Ok(busy) => {
                metrics::counter!("zaguan_calendar_reads_total", "outcome" => "read").increment(1);
                CalendarCopy {
                    staff_id: member.id.clone(),
                    url: url.to_owned(),
                    busy,
                    read_at: Some(now),
                    failing_since: None,
                    error: None,
                }
            }
            Err(why) => {
                metrics::counter!("zaguan_calendar_reads_total", "outcome" => "failed")
                    .increment(1);
                let since = before.as_ref().and_then(|c| c.failing_since).unwrap_or(now);
                tracing::warn!(staff = %member.id, since = %since, "calendar not read, its last good copy stays: {why}");
                let mut copy = before.unwrap_or(CalendarCopy {
                    staff_id: member.id.clone(),
                    url: url.to_owned(),
                    busy: Vec::new(),
                    read_at: None,
                    failing_since: None,
                    error: None,
                });
                copy.failing_since = Some(since);
                copy.error = Some(why);
                copy
            }
        };
        self.store.save_calendar(&copy).await?;
        Ok(copy.error.is_none())
    }
}

impl PeriodicJob for CalendarRefresh {
    const DONE: Option<&'static str> = Some("agents' calendars read");
    const FAILED: &'static str = "agents' calendars not read";
    type Error = crate::store::StoreError;

    async fn round(&self, now: DateTime<Utc>) -> Result<usize, Self::Error> {
        let mut read = 0;
        for member in self.store.staff().await?.iter().filter(|m| m.is_active()) {
            if let Some(url) = &member.calendar_url
                && self.refresh(member, url, now).await?
            {
                read += 1;
            }
        }
        Ok(read)
    }
}
