//! When the agency is open: opening hours per weekday, holidays, and the calendar sums a
//! handoff needs — is someone there now, when do they come back, and when is a quarter of an
//! hour of working time over. All in the business time zone (`ZAGUAN_TIMEZONE`).

use chrono::{DateTime, Datelike as _, Days, NaiveDate, NaiveTime, TimeZone as _, Utc, Weekday};
use chrono_tz::Tz;

/// Minutes in a day: `24:00`, the end of a span that runs to midnight.
const DAY: u16 = 24 * 60;

/// How far ahead an opening is looked for: a year of holidays is the most a file can close.
const HORIZON_DAYS: u64 = 400;

/// `09:30-14:00`: a span of one day, in minutes from midnight, `from < to`, `to` at most 24:00.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    pub from: u16,
    pub to: u16,
}

impl Span {
    /// Reads `HH:MM-HH:MM` (a one-digit hour is fine, `24:00` may end it).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not a span of the day like `09:30-14:00`");
        let (from, to) = text.split_once('-').ok_or_else(bad)?;
        let minutes = |t: &str| -> Option<u16> {
            let (h, m) = t.trim().split_once(':')?;
            if !(1..=2).contains(&h.len()) || m.len() != 2 {
                return None;
            }
            let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
            (m < 60 && (h < 24 || (h == 24 && m == 0))).then_some(h * 60 + m)
        };
        let (from, to) = (minutes(from).ok_or_else(bad)?, minutes(to).ok_or_else(bad)?);
        if from >= to {
            return Err(format!(
                "`{text}` ends before it starts (a span cannot cross midnight: split it in two days)"
            ));
        }
        Ok(Self { from, to })
    }

    fn time(minutes: u16) -> String {
        format!("{}:{:02}", minutes / 60, minutes % 60)
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}–{}", Self::time(self.from), Self::time(self.to))
    }
}

/// Opening hours, Monday first: each day's spans sorted and apart; a day without spans is
/// closed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WeeklyHours {
    days: [Vec<Span>; 7],
}

/// The weekday keys of an hours table, Monday first.
pub const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

impl WeeklyHours {
    /// Open all day every day: what an agency that gave no hours is taken to be.
    pub fn always() -> Self {
        Self {
            days: std::array::from_fn(|_| vec![Span { from: 0, to: DAY }]),
        }
    }

    /// The hours from each weekday's spans (Monday first); spans overlapping are refused.
    pub fn from_days(days: [Vec<Span>; 7]) -> Result<Self, String> {
        let mut days = days;
        for (name, spans) in WEEKDAYS.iter().zip(days.iter_mut()) {
            spans.sort();
            if let Some(pair) = spans.windows(2).find(|pair| pair[0].to > pair[1].from) {
                return Err(format!("{name}: {} and {} overlap", pair[0], pair[1]));
            }
        }
        Ok(Self { days })
    }

    pub fn day(&self, weekday: Weekday) -> &[Span] {
        &self.days[weekday.num_days_from_monday() as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.days.iter().all(Vec::is_empty)
    }
}

/// A day the office is closed whatever the weekday says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holiday {
    pub date: NaiveDate,
    pub name: String,
}

/// Hours that replace the week's for part of every year: «verano», 1 July to 31 August.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Season {
    pub name: String,
    /// The first day, as (month, day); every year.
    pub from: (u32, u32),
    /// The last day, included; before `from` when the season runs over New Year.
    pub to: (u32, u32),
    pub hours: WeeklyHours,
}

impl Season {
    /// Reads a `MM-DD` day of the year.
    pub fn day(text: &str) -> Result<(u32, u32), String> {
        let bad = || format!("`{text}` is not a day of the year like `07-01`");
        let (month, day) = text.trim().split_once('-').ok_or_else(bad)?;
        let (month, day): (u32, u32) = (
            month.parse().map_err(|_| bad())?,
            day.parse().map_err(|_| bad())?,
        );
        // A leap year holds every day there is.
        NaiveDate::from_ymd_opt(2024, month, day).ok_or_else(bad)?;
        Ok((month, day))
    }

    /// Whether `date` falls in the season.
    pub fn holds(&self, date: NaiveDate) -> bool {
        let day = (date.month(), date.day());
        if self.from <= self.to {
            self.from <= day && day <= self.to
        } else {
            day >= self.from || day <= self.to
        }
    }
}

/// Weekly hours (and the seasons that replace them) less holidays, in a time zone: when a
/// person can answer.
#[derive(Debug, Clone, Copy)]
pub struct Schedule<'a> {
    hours: &'a WeeklyHours,
    seasons: &'a [Season],
    holidays: &'a [Holiday],
    tz: Tz,
}

impl<'a> Schedule<'a> {
    pub fn new(hours: &'a WeeklyHours, holidays: &'a [Holiday], tz: Tz) -> Self {
        Self {
            hours,
            seasons: &[],
            holidays,
            tz,
        }
    }

    /// The same with `seasons` replacing the week's hours on their days.
    pub fn with_seasons(mut self, seasons: &'a [Season]) -> Self {
        self.seasons = seasons;
        self
    }

    /// The hours of `date`'s week: its season's, else the usual ones.
    fn week_of(&self, date: NaiveDate) -> &'a WeeklyHours {
        self.seasons
            .iter()
            .find(|season| season.holds(date))
            .map_or(self.hours, |season| &season.hours)
    }

    pub fn timezone(&self) -> Tz {
        self.tz
    }

    /// The days it is closed whatever the week says.
    pub fn holidays(&self) -> &'a [Holiday] {
        self.holidays
    }

    /// The same hours and seasons, open on holidays too.
    pub fn without_holidays(mut self) -> Self {
        self.holidays = &[];
        self
    }

    /// The open periods that end after `at`, in order.
    fn periods_from(
        self,
        at: DateTime<Utc>,
    ) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> + 'a {
        let tz = self.tz;
        let first = at.with_timezone(&tz).date_naive() - Days::new(1);
        (0..HORIZON_DAYS)
            .filter_map(move |offset| first.checked_add_days(Days::new(offset)))
            .filter(move |date| !self.holidays.iter().any(|h| h.date == *date))
            .flat_map(move |date| {
                self.week_of(date)
                    .day(date.weekday())
                    .iter()
                    .filter_map(move |span| {
                        Some((local(tz, date, span.from)?, local(tz, date, span.to)?))
                    })
            })
            .filter(move |(_, end)| *end > at)
    }

    /// The open periods overlapping `[from, to)`, clipped to it, in order: an agent's day
    /// cut into visits.
    pub fn periods_between(
        self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> + 'a {
        self.periods_from(from)
            .take_while(move |(start, _)| *start < to)
            .map(move |(start, end)| (start.max(from), end.min(to)))
    }

    /// Whether the office is open at `at`.
    pub fn is_open(&self, at: DateTime<Utc>) -> bool {
        self.periods_from(at)
            .next()
            .is_some_and(|(start, _)| start <= at)
    }

    /// `at` when open; otherwise when it next opens (`None`: not within a year).
    pub fn next_open(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.periods_from(at).next().map(|(start, _)| start.max(at))
    }

    /// When the open period holding `at` closes (`None` when closed at `at`).
    pub fn closes_at(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.periods_from(at)
            .next()
            .filter(|(start, _)| *start <= at)
            .map(|(_, end)| end)
    }

    /// The moment `working` of open time has passed since `from`: a 15-minute wait begun at
    /// 13:55 on a day closing at 14:00 ends at 16:40 when the office reopens at 16:30.
    pub fn after_open_time(&self, from: DateTime<Utc>, working: chrono::Duration) -> DateTime<Utc> {
        let mut left = working;
        for (start, end) in self.periods_from(from) {
            let start = start.max(from);
            if end - start >= left {
                return start + left;
            }
            left -= end - start;
        }
        // Never open again within the horizon: wall-clock time is all there is.
        from + working
    }
}

/// The start of `date` in `tz` (its first moment, when a clock change skips midnight).
pub fn start_of_day(date: NaiveDate, tz: Tz) -> DateTime<Utc> {
    tz.from_local_datetime(&date.and_time(NaiveTime::MIN))
        .earliest()
        .map_or_else(|| date.and_time(NaiveTime::MIN).and_utc(), |at| at.to_utc())
}

/// The start of the day `at` falls on, in `tz`: where a «today» begins for the agency.
pub fn start_of_today(at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    start_of_day(at.with_timezone(&tz).date_naive(), tz)
}

/// `minutes` after midnight of `date` in `tz` (24:00 is the next midnight); the earlier
/// reading when a clock change makes it ambiguous, `None` when it does not exist.
fn local(tz: Tz, date: NaiveDate, minutes: u16) -> Option<DateTime<Utc>> {
    let (date, minutes) = if minutes >= DAY {
        (date.checked_add_days(Days::new(1))?, minutes - DAY)
    } else {
        (date, minutes)
    };
    let time = NaiveTime::from_hms_opt(u32::from(minutes / 60), u32::from(minutes % 60), 0)?;
    tz.from_local_datetime(&date.and_time(time))
        .earliest()
        .map(|at| at.to_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn week(weekdays: &str, saturday: &str) -> WeeklyHours {
        let spans = |text: &str| -> Vec<Span> {
            text.split(',')
                .filter(|s| !s.is_empty())
                .map(|s| Span::parse(s).unwrap())
                .collect()
        };
        WeeklyHours::from_days([
            spans(weekdays),
            spans(weekdays),
            spans(weekdays),
            spans(weekdays),
            spans(weekdays),
            spans(saturday),
            Vec::new(),
        ])
        .unwrap()
    }

    /// Madrid local time → UTC.
    fn madrid(text: &str) -> DateTime<Utc> {
        chrono_tz::Europe::Madrid
            .from_local_datetime(
                &chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").unwrap(),
            )
            .unwrap()
            .to_utc()
    }

    #[test]
    fn spans_read_as_staff_write_them_and_refuse_what_cannot_be() {
        assert_eq!(
            Span::parse("9:30-14:00").unwrap(),
            Span { from: 570, to: 840 }
        );
        assert_eq!(Span::parse(" 16:00 - 24:00 ").unwrap().to, 1440);
        for bad in [
            "9-14",
            "14:00-9:00",
            "10:00-10:00",
            "25:00-26:00",
            "09:60-10:00",
            "abc",
        ] {
            assert!(Span::parse(bad).is_err(), "{bad}");
        }
        let overlapping = WeeklyHours::from_days(std::array::from_fn(|_| {
            vec![
                Span::parse("9:00-14:00").unwrap(),
                Span::parse("13:00-15:00").unwrap(),
            ]
        }));
        assert!(overlapping.unwrap_err().contains("overlap"));
    }

    #[test]
    fn open_closed_and_the_next_opening_follow_the_week_and_its_holidays() {
        let hours = week("9:00-14:00,16:30-20:00", "10:00-13:30");
        let holidays = [Holiday {
            date: NaiveDate::from_ymd_opt(2026, 12, 8).unwrap(),
            name: "Inmaculada".into(),
        }];
        let schedule = Schedule::new(&hours, &holidays, chrono_tz::Europe::Madrid);
        // Friday 27 November 2026.
        assert!(schedule.is_open(madrid("2026-11-27 10:00")));
        assert_eq!(
            schedule.closes_at(madrid("2026-11-27 10:00")),
            Some(madrid("2026-11-27 14:00"))
        );
        assert!(!schedule.is_open(madrid("2026-11-27 15:00")));
        assert_eq!(
            schedule.next_open(madrid("2026-11-27 15:00")),
            Some(madrid("2026-11-27 16:30"))
        );
        // Saturday night → Monday morning (Sunday is closed).
        assert_eq!(
            schedule.next_open(madrid("2026-11-28 23:00")),
            Some(madrid("2026-11-30 09:00"))
        );
        // Monday 7 December at night → Wednesday 9 (Tuesday 8 is a holiday).
        assert_eq!(
            schedule.next_open(madrid("2026-12-07 21:00")),
            Some(madrid("2026-12-09 09:00"))
        );
        // Open: now.
        assert_eq!(
            schedule.next_open(madrid("2026-11-27 18:00")),
            Some(madrid("2026-11-27 18:00"))
        );
    }

    #[test]
    fn working_time_stops_while_the_office_is_closed() {
        let hours = week("9:00-14:00,16:30-20:00", "");
        let schedule = Schedule::new(&hours, &[], chrono_tz::Europe::Madrid);
        let fifteen = chrono::Duration::minutes(15);
        assert_eq!(
            schedule.after_open_time(madrid("2026-11-27 10:00"), fifteen),
            madrid("2026-11-27 10:15")
        );
        assert_eq!(
            schedule.after_open_time(madrid("2026-11-27 13:55"), fifteen),
            madrid("2026-11-27 16:40")
        );
        // Friday evening → Monday.
        assert_eq!(
            schedule.after_open_time(madrid("2026-11-27 22:00"), fifteen),
            madrid("2026-11-30 09:15")
        );
        let always = WeeklyHours::always();
        let open = Schedule::new(&always, &[], chrono_tz::Europe::Madrid);
        assert_eq!(
            open.after_open_time(madrid("2026-11-28 23:00"), fifteen),
            madrid("2026-11-28 23:15")
        );
        assert!(open.is_open(madrid("2026-11-29 03:00")));
    }

    #[test]
    fn a_season_replaces_the_weeks_hours_on_its_days_only() {
        let hours = week("9:00-14:00,16:30-20:00", "");
        let summer = Season {
            name: "verano".into(),
            from: Season::day("07-01").unwrap(),
            to: Season::day("08-31").unwrap(),
            hours: week("8:00-15:00", ""),
        };
        let seasons = [summer];
        let schedule = Schedule::new(&hours, &[], chrono_tz::Europe::Madrid).with_seasons(&seasons);
        // 15 July 2026, a Wednesday: summer hours, closed in the afternoon.
        assert!(schedule.is_open(madrid("2026-07-15 08:30")));
        assert!(!schedule.is_open(madrid("2026-07-15 17:00")));
        assert_eq!(
            schedule.next_open(madrid("2026-08-31 16:00")),
            Some(madrid("2026-09-01 09:00")),
            "the season ends on its last day"
        );
        // The rest of the year, the usual week.
        assert!(schedule.is_open(madrid("2026-11-25 17:00")));
        assert!(!schedule.is_open(madrid("2026-11-25 08:30")));
        // A season over New Year.
        let winter = Season {
            name: "navidad".into(),
            from: (12, 20),
            to: (1, 7),
            hours: WeeklyHours::default(),
        };
        assert!(winter.holds(NaiveDate::from_ymd_opt(2026, 12, 24).unwrap()));
        assert!(winter.holds(NaiveDate::from_ymd_opt(2027, 1, 5).unwrap()));
        assert!(!winter.holds(NaiveDate::from_ymd_opt(2027, 1, 8).unwrap()));
        assert!(Season::day("02-30").is_err());
        assert!(Season::day("7/1").is_err());
    }

    #[test]
    fn a_clock_change_does_not_lose_or_invent_an_hour_of_opening() {
        // 29 March 2026, Madrid jumps from 2:00 to 3:00; 25 October, from 3:00 back to 2:00.
        let hours = WeeklyHours::from_days(std::array::from_fn(|_| {
            vec![Span::parse("9:00-10:00").unwrap()]
        }))
        .unwrap();
        let schedule = Schedule::new(&hours, &[], chrono_tz::Europe::Madrid);
        assert_eq!(
            schedule.next_open(madrid("2026-03-29 01:00")),
            Some(madrid("2026-03-29 09:00"))
        );
        assert_eq!(
            schedule.after_open_time(madrid("2026-10-25 09:30"), chrono::Duration::minutes(45)),
            madrid("2026-10-26 09:15")
        );
    }
}
