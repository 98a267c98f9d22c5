//! Reading an agent's iCalendar feed (Google Calendar, Outlook, ...) into busy
//! intervals, and writing an iCalendar feed of booked visits.
//!
//! Parsing and writing go through the `icalendar` crate and recurrence rules
//! through `rrule`; this module only adds what they leave to the caller: time
//! zone resolution (IANA and Outlook's Windows names), overrides, exclusions,
//! windowing, and bounds on the work a hostile or huge feed can cause.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use chrono::{
    DateTime, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeDelta, TimeZone, Utc,
};
use chrono_tz::Tz;
use icalendar::parser;
use icalendar::{
    Calendar, CalendarDateTime, Component as _, DatePerhapsTime, Event, EventLike as _, EventStatus,
};
use rrule::{Frequency, RRule, RRuleSet, Unvalidated};

/// Feeds larger than this are refused before parsing: a real agent calendar is
/// far smaller, and parsing allocates several times the input size.
pub const MAX_BYTES: usize = 5 * 1024 * 1024;

/// Occurrences (after recurrence expansion, before merging) kept per calendar;
/// past this the result is cut short and [`BusyTimes::truncated`] is set.
pub const MAX_OCCURRENCES: usize = 5_000;

/// Recurrence instances generated per calendar, including those before `from`
/// that are thrown away: bounds the CPU a rule like `FREQ=SECONDLY;COUNT=...`
/// starting decades ago can take. Rules without COUNT skip ahead to `from`
/// instead of walking there, so this only bites on pathological feeds.
pub const MAX_EXPANSION_STEPS: usize = 20 * MAX_OCCURRENCES;

/// PRODID written by [`visits_calendar`].
pub const PRODID: &str = "-//Zaguan//visits//ES";

/// One busy interval, half-open: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Busy {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// What [`busy_times`] read from a feed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BusyTimes {
    /// Busy intervals in the window, sorted by start, overlapping and adjacent
    /// ones merged.
    pub busy: Vec<Busy>,
    /// VEVENTs that could not be read (bad date, bad RRULE, broken structure)
    /// and were left out. Returned rather than logged so the caller decides
    /// whether a partly read feed is worth a warning.
    pub skipped: usize,
    /// True when [`MAX_OCCURRENCES`] or [`MAX_EXPANSION_STEPS`] cut expansion
    /// short: `busy` is then incomplete (it under-reports busy time).
    pub truncated: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum IcsError {
    /// The text does not start with `BEGIN:VCALENDAR` (e.g. an HTML login page
    /// or an expired share link); holds the start of what was found.
    #[error("not an iCalendar document (starts with {0:?})")]
    NotICalendar(String),
    /// The input is larger than [`MAX_BYTES`]; holds its size in bytes.
    #[error("iCalendar feed too large: {0} bytes (max {MAX_BYTES})")]
    TooLarge(usize),
}

/// Busy times in `[from, to)`, sorted by start and merged where they overlap
/// or touch.
///
/// `local` is the agent's time zone. It is used for floating times (no `Z`, no
/// TZID), for all-day events (busy from local midnight to local midnight), and
/// for a TZID that is neither an IANA name nor a known Windows name (Outlook's
/// "Customized Time Zone" and the like): such zones are almost always the
/// owner's own zone under another name, so `local` is the likeliest right
/// answer and better than dropping the event.
///
/// Not busy: `STATUS:CANCELLED`, `TRANSP:TRANSPARENT`, and Outlook's
/// `X-MICROSOFT-CDO-BUSYSTATUS:FREE`. `STATUS:TENTATIVE` is busy.
///
/// Broken VEVENTs are skipped and counted in [`BusyTimes::skipped`]; only a
/// document that is not iCalendar at all, or too large, is an error.
pub fn busy_times(
    ics: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    local: Tz,
) -> Result<BusyTimes, IcsError> {
    if ics.len() > MAX_BYTES {
        return Err(IcsError::TooLarge(ics.len()));
    }
    let text = ics.trim_start_matches('\u{feff}').trim();
    let first_line = text.lines().next().unwrap_or("").trim();
    if !first_line.eq_ignore_ascii_case("BEGIN:VCALENDAR") {
        return Err(IcsError::NotICalendar(
            first_line.chars().take(40).collect(),
        ));
    }
    if from >= to {
        return Ok(BusyTimes::default());
    }

    let unfolded = parser::unfold(text);
    let (components, mut skipped) = vevents(&unfolded);

    let mut events = Vec::with_capacity(components.len());
    for component in &components {
        match read_event(component, local) {
            Some(event) => events.push(event),
            None => skipped += 1,
        }
    }

    // Instances replaced by a RECURRENCE-ID override, per UID: the master must
    // not also produce them, whatever the override itself says (moved,
    // cancelled, made free).
    let mut overridden: HashMap<&str, HashSet<i64>> = HashMap::new();
    for event in &events {
        if let (Some(id), false) = (event.recurrence_id, event.uid.is_empty()) {
            overridden.entry(event.uid).or_default().insert(id);
        }
    }

    let mut sink = Sink {
        from,
        to,
        busy: Vec::new(),
        kept: 0,
        steps: 0,
        truncated: false,
    };
    for event in events.iter().filter(|e| e.busy) {
        if sink.truncated {
            break;
        }
        let replaced = if event.recurrence_id.is_none() {
            overridden.get(event.uid)
        } else {
            None
        };
        expand(event, replaced, &mut sink);
    }

    Ok(BusyTimes {
        busy: merge(sink.busy),
        skipped,
        truncated: sink.truncated,
    })
}

/// A booked visit, as published to the agent's calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisitEvent {
    pub uid: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub summary: String,
    pub location: String,
    pub description: String,
    pub url: Option<String>,
    pub cancelled: bool,
    pub updated: DateTime<Utc>,
}

/// A calendar of the given events (VCALENDAR with PRODID, X-WR-CALNAME = name,
/// METHOD:PUBLISH), lines folded and text escaped per RFC 5545.
///
/// Times are written in UTC so no VTIMEZONE is needed. DTSTAMP and
/// LAST-MODIFIED are `updated` rather than "now", so the same visits always
/// give the same bytes (stable ETags, no spurious client updates). Cancelled
/// visits stay in the feed with STATUS:CANCELLED (clients then remove them)
/// and TRANSP:TRANSPARENT (clients that keep them do not block the slot).
/// Control characters other than newline and tab are dropped: they are not
/// allowed in iCalendar text and a stray CR could split a line.
pub fn visits_calendar(name: &str, events: &[VisitEvent]) -> String {
    let mut calendar = Calendar::empty();
    calendar
        .append_property(icalendar::Property::new("VERSION", "2.0"))
        .append_property(icalendar::Property::new("PRODID", PRODID))
        .append_property(icalendar::Property::new("CALSCALE", "GREGORIAN"))
        .append_property(icalendar::Property::new("METHOD", "PUBLISH"))
        .name(&clean_text(name));
    for visit in events {
        let mut event = Event::new();
        event
            .uid(&clean_text(&visit.uid))
            .starts(visit.start)
            .ends(visit.end)
            .summary(&clean_text(&visit.summary))
            .timestamp(visit.updated)
            .last_modified(visit.updated);
        if !visit.location.is_empty() {
            event.location(&clean_text(&visit.location));
        }
        if !visit.description.is_empty() {
            event.description(&clean_text(&visit.description));
        }
        if let Some(url) = &visit.url {
            let url: String = url.chars().filter(|c| !c.is_control()).collect();
            event.url(&url);
        }
        if visit.cancelled {
            event.status(EventStatus::Cancelled);
            event.add_property("TRANSP", "TRANSPARENT");
        } else {
            event.status(EventStatus::Confirmed);
        }
        calendar.push(event.done());
    }
    calendar.to_string()
}

/// Normalises line breaks to `\n` (escaped as `\n` by the writer) and drops
/// other control characters.
fn clean_text(s: &str) -> String {
    s.replace("\r\n", "\n")
        .replace('\r', "\n")
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

// ---------------------------------------------------------------------------
// Reading

/// The VEVENTs of the document. The whole document is parsed at once; if that
/// fails (one malformed line, a truncated download, two VCALENDARs), each
/// BEGIN:VEVENT..END:VEVENT block is parsed on its own so one broken event
/// costs only itself. Returns the events and how many blocks were unreadable.
fn vevents(unfolded: &str) -> (Vec<parser::Component<'_>>, usize) {
    let is = |c: &parser::Component<'_>, name: &str| c.name.as_str().eq_ignore_ascii_case(name);
    if let Ok(roots) = parser::read_components(unfolded) {
        let events = roots
            .into_iter()
            .filter(|root| is(root, "VCALENDAR"))
            .flat_map(|root| root.components)
            .filter(|c| is(c, "VEVENT"))
            .collect();
        return (events, 0);
    }

    let mut events = Vec::new();
    let mut skipped = 0;
    let mut block_start: Option<usize> = None;
    let mut pos = 0;
    for line in unfolded.split_inclusive('\n') {
        let line_start = pos;
        pos += line.len();
        let trimmed = line.trim();
        if trimmed.eq_ignore_ascii_case("BEGIN:VEVENT") {
            if block_start.replace(line_start).is_some() {
                skipped += 1; // previous block never ended
            }
        } else if trimmed.eq_ignore_ascii_case("END:VEVENT") {
            let Some(start) = block_start.take() else {
                continue;
            };
            match parser::read_components(unfolded[start..pos].trim_end()) {
                Ok(mut parsed) if parsed.len() == 1 && is(&parsed[0], "VEVENT") => {
                    events.push(parsed.remove(0));
                }
                _ => skipped += 1,
            }
        }
    }
    if block_start.is_some() {
        skipped += 1;
    }
    (events, skipped)
}

/// A date or a wall-clock time in a zone, as read from a property value.
#[derive(Debug, Clone, Copy)]
enum When {
    Date(NaiveDate),
    Local(NaiveDateTime, Tz),
}

impl When {
    /// The wall-clock start and its zone; a date starts at midnight in `local`.
    fn anchor(self, local: Tz) -> (NaiveDateTime, Tz) {
        match self {
            When::Date(d) => (d.and_time(NaiveTime::MIN), local),
            When::Local(n, tz) => (n, tz),
        }
    }

    fn instant(self, local: Tz) -> DateTime<Utc> {
        let (n, tz) = self.anchor(local);
        resolve(tz, n)
    }
}

/// Length of each occurrence: `days` are nominal (wall-clock days, so an
/// all-day event or `P1D` spans midnight to midnight across DST), `secs` exact.
#[derive(Debug, Clone, Copy)]
struct Length {
    days: i64,
    secs: i64,
}

/// One VEVENT, with everything resolved into its own wall-clock frame
/// (`start`, `tz`), in which recurrence is expanded.
struct EventData<'a> {
    uid: &'a str,
    start: NaiveDateTime,
    tz: Tz,
    length: Length,
    busy: bool,
    recurrence_id: Option<i64>,
    rules: Vec<(RRule<Unvalidated>, Option<NaiveDateTime>)>,
    rdates: Vec<NaiveDateTime>,
    rperiods: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    ex_instants: HashSet<i64>,
    ex_dates: HashSet<NaiveDate>,
}

fn prop<'c, 'a>(c: &'c parser::Component<'a>, name: &str) -> Option<&'c parser::Property<'a>> {
    c.properties
        .iter()
        .find(|p| p.name.as_str().eq_ignore_ascii_case(name))
}

fn props<'c, 'a>(
    c: &'c parser::Component<'a>,
    name: &'c str,
) -> impl Iterator<Item = &'c parser::Property<'a>> {
    c.properties
        .iter()
        .filter(move |p| p.name.as_str().eq_ignore_ascii_case(name))
}

fn param<'c>(p: &'c parser::Property<'_>, key: &str) -> Option<&'c str> {
    p.params
        .iter()
        .find(|q| q.key.as_str().eq_ignore_ascii_case(key))
        .and_then(|q| q.val.as_ref())
        .map(|v| v.as_str())
}

fn value_is(c: &parser::Component<'_>, name: &str, value: &str) -> bool {
    prop(c, name).is_some_and(|p| p.val.as_str().trim().eq_ignore_ascii_case(value))
}

/// Reads one VEVENT; `None` if it is broken (it is then counted as skipped).
fn read_event<'a>(c: &'a parser::Component<'a>, local: Tz) -> Option<EventData<'a>> {
    let start_when = parse_when(prop(c, "DTSTART")?, None, local)?;
    let (start, tz) = start_when.anchor(local);
    let is_date = matches!(start_when, When::Date(_));

    let length = if let Some(end) = prop(c, "DTEND") {
        match (start_when, parse_when(end, None, local)?) {
            // DTEND is exclusive; an end on or before the start is read as one
            // day, the intent of the exporters that write it.
            (When::Date(s), When::Date(e)) => Length {
                days: (e - s).num_days().max(1),
                secs: 0,
            },
            (_, end) => {
                let secs = (end.instant(local) - resolve(tz, start)).num_seconds();
                if secs < 0 {
                    return None;
                }
                Length { days: 0, secs }
            }
        }
    } else if let Some(duration) = prop(c, "DURATION") {
        parse_duration(duration.val.as_str())?
    } else if is_date {
        Length { days: 1, secs: 0 }
    } else {
        Length { days: 0, secs: 0 }
    };

    let busy = !value_is(c, "STATUS", "CANCELLED")
        && !value_is(c, "TRANSP", "TRANSPARENT")
        && !value_is(c, "X-MICROSOFT-CDO-BUSYSTATUS", "FREE");

    let recurrence_id = match prop(c, "RECURRENCE-ID") {
        Some(p) => Some(parse_when(p, None, local)?.instant(local).timestamp()),
        None => None,
    };

    let mut rules = Vec::new();
    for p in props(c, "RRULE") {
        let (rule, until) = parse_rrule(p.val.as_str(), tz, is_date)?;
        if until.is_none_or(|u| u >= start) {
            // Validate now so a bad rule skips the event instead of being
            // silently ignored at expansion time.
            rule.clone().validate(pseudo_utc(start)).ok()?;
        }
        rules.push((rule, until));
    }

    let mut rdates = Vec::new();
    let mut rperiods = Vec::new();
    for p in props(c, "RDATE") {
        let is_period = param(p, "VALUE").is_some_and(|v| v.eq_ignore_ascii_case("PERIOD"));
        for piece in list(p) {
            if let (true, Some((a, b))) = (is_period, piece.split_once('/')) {
                let begin = parse_when(p, Some(a), local)?.instant(local);
                // A period ends at a date-time or after a duration.
                let end = if b.trim_start().starts_with(['P', '+', '-']) {
                    let wall = begin.with_timezone(&tz).naive_local();
                    end_of(wall, tz, parse_duration(b)?)?
                } else {
                    parse_when(p, Some(b), local)?.instant(local)
                };
                rperiods.push((begin, end));
            } else {
                let when = parse_when(p, Some(piece), local)?;
                rdates.push(match when {
                    // A date in a timed series keeps the series' time of day.
                    When::Date(d) if !is_date => d.and_time(start.time()),
                    w => w.instant(local).with_timezone(&tz).naive_local(),
                });
            }
        }
    }

    let mut ex_instants = HashSet::new();
    let mut ex_dates = HashSet::new();
    for p in props(c, "EXDATE") {
        for piece in list(p) {
            match parse_when(p, Some(piece), local)? {
                When::Date(d) => {
                    ex_dates.insert(d);
                }
                w => {
                    ex_instants.insert(w.instant(local).timestamp());
                }
            }
        }
    }

    Some(EventData {
        uid: prop(c, "UID").map_or("", |p| p.val.as_str().trim()),
        start,
        tz,
        length,
        busy,
        recurrence_id,
        rules,
        rdates,
        rperiods,
        ex_instants,
        ex_dates,
    })
}

/// The comma-separated values of a multi-valued property (EXDATE, RDATE).
fn list<'c>(p: &'c parser::Property<'_>) -> impl Iterator<Item = &'c str> {
    p.val
        .as_str()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Parses a date or date-time value of `p` (or `value`, one item of its list)
/// with `icalendar`'s own reader, honouring VALUE=DATE, TZID and `Z`.
fn parse_when(p: &parser::Property<'_>, value: Option<&str>, local: Tz) -> Option<When> {
    let value = value.unwrap_or(p.val.as_str()).trim();
    let build = |with_tzid: bool| {
        let mut prop = icalendar::Property::new(p.name.as_str().to_ascii_uppercase(), value);
        for q in &p.params {
            let key = q.key.as_str().to_ascii_uppercase();
            match &q.val {
                Some(val) if with_tzid || key != "TZID" => {
                    prop.add_parameter(&key, val.as_str());
                }
                _ => {}
            }
        }
        DatePerhapsTime::from_property(&prop)
    };
    // `TZID=...:...Z` is invalid but seen in the wild: the `Z` wins.
    let parsed = build(true).or_else(|| build(false))?;
    Some(match parsed {
        DatePerhapsTime::Date(d) => When::Date(d),
        DatePerhapsTime::DateTime(CalendarDateTime::Utc(dt)) => {
            When::Local(dt.naive_utc(), Tz::UTC)
        }
        DatePerhapsTime::DateTime(CalendarDateTime::Floating(n)) => When::Local(n, local),
        DatePerhapsTime::DateTime(CalendarDateTime::WithTimezone { date_time, tzid }) => {
            When::Local(date_time, zone(&tzid).unwrap_or(local))
        }
    })
}

/// Outlook writes Windows zone names as TZID. The few that matter here, mapped
/// to an IANA zone with the same rules (CLDR windowsZones, territory 001).
const WINDOWS_ZONES: &[(&str, Tz)] = &[
    ("UTC", Tz::UTC),
    ("Coordinated Universal Time", Tz::UTC),
    ("GMT Standard Time", Tz::Europe__London),
    ("Greenwich Standard Time", Tz::Atlantic__Reykjavik),
    ("W. Europe Standard Time", Tz::Europe__Berlin),
    ("Romance Standard Time", Tz::Europe__Paris),
    ("Central Europe Standard Time", Tz::Europe__Budapest),
    ("Central European Standard Time", Tz::Europe__Warsaw),
    ("E. Europe Standard Time", Tz::Europe__Chisinau),
    ("GTB Standard Time", Tz::Europe__Bucharest),
    ("FLE Standard Time", Tz::Europe__Kyiv),
    ("Turkey Standard Time", Tz::Europe__Istanbul),
    ("Russian Standard Time", Tz::Europe__Moscow),
    ("Morocco Standard Time", Tz::Africa__Casablanca),
    ("Eastern Standard Time", Tz::America__New_York),
    ("Central Standard Time", Tz::America__Chicago),
    ("Mountain Standard Time", Tz::America__Denver),
    ("Pacific Standard Time", Tz::America__Los_Angeles),
];

/// The zone a TZID names: an IANA name, a Windows name, or an IANA name behind
/// a vendor prefix (`/mozilla.org/20050126_1/Europe/Madrid`).
fn zone(tzid: &str) -> Option<Tz> {
    let tzid = tzid.trim().trim_matches('"');
    if let Ok(tz) = Tz::from_str(tzid) {
        return Some(tz);
    }
    if let Some((_, tz)) = WINDOWS_ZONES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(tzid))
    {
        return Some(*tz);
    }
    tzid.match_indices('/')
        .find_map(|(i, _)| Tz::from_str(&tzid[i + 1..]).ok())
}

/// UTC instant of a wall-clock time. An ambiguous time (autumn fold) is the
/// first one; a time in the spring gap uses the offset before the gap, i.e.
/// moves forward by the gap (RFC 5545 §3.3.5).
fn resolve(tz: Tz, n: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&n) {
        LocalResult::Single(d) | LocalResult::Ambiguous(d, _) => d.with_timezone(&Utc),
        LocalResult::None => {
            let before = n
                .checked_sub_signed(TimeDelta::hours(12))
                .and_then(|b| tz.offset_from_local_datetime(&b).earliest())
                .map_or(0, |o| o.fix().local_minus_utc());
            let utc = n
                .checked_sub_signed(TimeDelta::seconds(i64::from(before)))
                .unwrap_or(n);
            Utc.from_utc_datetime(&utc)
        }
    }
}

/// End of an occurrence starting at wall-clock `n` in `tz`.
fn end_of(n: NaiveDateTime, tz: Tz, l: Length) -> Option<DateTime<Utc>> {
    let wall = n.checked_add_signed(TimeDelta::try_days(l.days)?)?;
    resolve(tz, wall).checked_add_signed(TimeDelta::try_seconds(l.secs)?)
}

/// An RFC 5545 DURATION (`P1W`, `P1DT2H`, `PT30M`, ...). Negative or absurd
/// (over ~100 years) durations are refused.
fn parse_duration(s: &str) -> Option<Length> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    let (mut days, mut secs, mut in_time, mut num, mut any) = (0i64, 0i64, false, None, false);
    for c in s.strip_prefix(['P', 'p'])?.chars() {
        match c.to_ascii_uppercase() {
            d @ '0'..='9' => {
                let n = num.unwrap_or(0i64) * 10 + i64::from(d.to_digit(10)?);
                if n > 10_000_000 {
                    return None;
                }
                num = Some(n);
            }
            'T' if num.is_none() && !in_time => in_time = true,
            unit => {
                let n = num.take()?;
                any = true;
                match (unit, in_time) {
                    ('W', false) => days += n * 7,
                    ('D', false) => days += n,
                    ('H', true) => secs += n * 3600,
                    ('M', true) => secs += n * 60,
                    ('S', true) => secs += n,
                    _ => return None,
                }
            }
        }
    }
    if !any || num.is_some() || days > 36_600 || secs > 36_600 * 86_400 {
        return None;
    }
    Some(Length { days, secs })
}

/// Splits UNTIL off an RRULE value (the `rrule` crate would read a floating
/// or DATE UNTIL in the machine's zone and then reject it) and returns it in
/// the event's wall-clock frame: a UTC UNTIL is converted to `tz`; a DATE
/// UNTIL includes that whole day.
fn parse_rrule(
    value: &str,
    tz: Tz,
    is_date: bool,
) -> Option<(RRule<Unvalidated>, Option<NaiveDateTime>)> {
    let mut until = None;
    let mut rest = Vec::new();
    for part in value.trim().split(';').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) if k.trim().eq_ignore_ascii_case("UNTIL") => until = Some(v.trim()),
            _ => rest.push(part),
        }
    }
    let rule = RRule::<Unvalidated>::from_str(&rest.join(";")).ok()?;
    let until = match until {
        None => None,
        Some(u) => Some(if let Some(utc) = u.strip_suffix(['Z', 'z']) {
            let n = NaiveDateTime::parse_from_str(utc, "%Y%m%dT%H%M%S").ok()?;
            Utc.from_utc_datetime(&n).with_timezone(&tz).naive_local()
        } else if let Ok(n) = NaiveDateTime::parse_from_str(u, "%Y%m%dT%H%M%S") {
            n
        } else {
            let d = NaiveDate::parse_from_str(u, "%Y%m%d").ok()?;
            if is_date {
                d.and_time(NaiveTime::MIN)
            } else {
                d.and_hms_opt(23, 59, 59)?
            }
        }),
    };
    Some((rule, until))
}

/// Recurrence is expanded on wall-clock times dressed as UTC: UTC has no DST,
/// so `rrule` keeps 10:00 at 10:00 every week, and each result is then placed
/// in the event's real zone by [`resolve`]. This also keeps `rrule` away from
/// the machine's own zone.
fn pseudo_utc(n: NaiveDateTime) -> DateTime<rrule::Tz> {
    rrule::Tz::UTC.from_utc_datetime(&n)
}

/// Collects occurrences in the window and enforces the calendar-wide bounds.
struct Sink {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    busy: Vec<Busy>,
    kept: usize,
    steps: usize,
    truncated: bool,
}

impl Sink {
    fn emit(&mut self, start: DateTime<Utc>, end: DateTime<Utc>) {
        if end <= start || end <= self.from || start >= self.to {
            return;
        }
        if self.kept >= MAX_OCCURRENCES {
            self.truncated = true;
            return;
        }
        self.kept += 1;
        self.busy.push(Busy {
            start: start.max(self.from),
            end: end.min(self.to),
        });
    }
}

/// Emits the occurrences of one event: DTSTART (always an instance, RFC 5545
/// §3.8.5.3), RDATEs and RRULE instances, less EXDATEs and instances replaced
/// by an override.
fn expand(ev: &EventData<'_>, replaced: Option<&HashSet<i64>>, sink: &mut Sink) {
    let mut seen = HashSet::new();
    let mut occur = |n: NaiveDateTime, sink: &mut Sink| {
        let start = resolve(ev.tz, n);
        let key = start.timestamp();
        if !seen.insert(key)
            || ev.ex_instants.contains(&key)
            || ev.ex_dates.contains(&n.date())
            || replaced.is_some_and(|r| r.contains(&key))
        {
            return;
        }
        if let Some(end) = end_of(n, ev.tz, ev.length) {
            sink.emit(start, end);
        }
    };

    occur(ev.start, sink);
    for &n in &ev.rdates {
        occur(n, sink);
    }
    for &(start, end) in &ev.rperiods {
        let key = start.timestamp();
        if !ev.ex_instants.contains(&key) && !replaced.is_some_and(|r| r.contains(&key)) {
            sink.emit(start, end);
        }
    }

    // Instances starting before this wall-clock time cannot reach `from`
    // (3 hours cover any DST shift between wall clock and UTC).
    let span = TimeDelta::try_days(ev.length.days)
        .and_then(|d| d.checked_add(&TimeDelta::try_seconds(ev.length.secs + 3 * 3600)?));
    let target = span.and_then(|s| {
        sink.from
            .with_timezone(&ev.tz)
            .naive_local()
            .checked_sub_signed(s)
    });

    for (rule, until) in &ev.rules {
        if sink.truncated {
            return;
        }
        let first = target.map_or(ev.start, |t| skip_ahead(rule, ev.start, t));
        let mut rule = rule.clone();
        if let Some(until) = until {
            if *until < first {
                continue;
            }
            rule = rule.until(pseudo_utc(*until));
        }
        let Ok(rule) = rule.validate(pseudo_utc(first)) else {
            continue;
        };
        let set = RRuleSet::new(pseudo_utc(first)).rrule(rule).limit();
        for instance in &set {
            if sink.steps >= MAX_EXPANSION_STEPS {
                sink.truncated = true;
                return;
            }
            sink.steps += 1;
            let n = instance.naive_utc();
            if resolve(ev.tz, n) >= sink.to {
                break;
            }
            occur(n, sink);
            if sink.truncated {
                return;
            }
        }
    }
}

/// A later DTSTART that yields the same instances from `target` on, so a
/// series that began years ago is not walked from its start. Only for rules
/// without COUNT (which counts from the real start) and with fixed-length
/// periods: moving by whole periods keeps the weekday, time of day and the
/// INTERVAL phase that `rrule` derives from DTSTART.
fn skip_ahead(
    rule: &RRule<Unvalidated>,
    start: NaiveDateTime,
    target: NaiveDateTime,
) -> NaiveDateTime {
    if rule.get_count().is_some() || target <= start {
        return start;
    }
    let unit = match rule.get_freq() {
        Frequency::Weekly => 7 * 86_400,
        Frequency::Daily => 86_400,
        Frequency::Hourly => 3_600,
        Frequency::Minutely => 60,
        Frequency::Secondly => 1,
        Frequency::Yearly | Frequency::Monthly => return start,
    };
    let period = unit * i64::from(rule.get_interval().max(1));
    let periods = (target - start).num_seconds() / period;
    TimeDelta::try_seconds(periods * period)
        .and_then(|d| start.checked_add_signed(d))
        .unwrap_or(start)
}

/// Sorts and merges overlapping or touching intervals.
fn merge(mut busy: Vec<Busy>) -> Vec<Busy> {
    busy.sort_unstable();
    let mut merged: Vec<Busy> = Vec::with_capacity(busy.len());
    for b in busy {
        match merged.last_mut() {
            Some(last) if b.start <= last.end => last.end = last.end.max(b.end),
            _ => merged.push(b),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    const MADRID: Tz = Tz::Europe__Madrid;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    fn b(start: DateTime<Utc>, end: DateTime<Utc>) -> Busy {
        Busy { start, end }
    }

    /// Header of a Google Calendar export, VTIMEZONE included.
    const GOOGLE_HEAD: &str = "BEGIN:VCALENDAR\r
PRODID:-//Google Inc//Google Calendar 70.9054//EN\r
VERSION:2.0\r
CALSCALE:GREGORIAN\r
METHOD:PUBLISH\r
X-WR-CALNAME:agente@example.com\r
X-WR-TIMEZONE:Europe/Madrid\r
BEGIN:VTIMEZONE\r
TZID:Europe/Madrid\r
X-LIC-LOCATION:Europe/Madrid\r
BEGIN:DAYLIGHT\r
TZOFFSETFROM:+0100\r
TZOFFSETTO:+0200\r
TZNAME:CEST\r
DTSTART:19700329T020000\r
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r
END:DAYLIGHT\r
BEGIN:STANDARD\r
TZOFFSETFROM:+0200\r
TZOFFSETTO:+0100\r
TZNAME:CET\r
DTSTART:19701025T030000\r
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r
END:STANDARD\r
END:VTIMEZONE\r
";

    fn google(events: &str) -> String {
        format!("{GOOGLE_HEAD}{events}END:VCALENDAR\r\n")
    }

    /// A Google-style VEVENT around the given DTSTART/DTEND/extra lines.
    fn gevent(uid: &str, lines: &str) -> String {
        format!(
            "BEGIN:VEVENT\r\n{lines}DTSTAMP:20260301T120000Z\r\nUID:{uid}@google.com\r\n\
             CREATED:20260201T100000Z\r\nDESCRIPTION:\r\nLAST-MODIFIED:20260201T100000Z\r\n\
             LOCATION:\r\nSEQUENCE:0\r\nSUMMARY:{uid}\r\nEND:VEVENT\r\n"
        )
    }

    fn read(ics: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> BusyTimes {
        busy_times(ics, from, to, MADRID).unwrap()
    }

    /// Busy times of one Google-style event with the given lines, in March 2026.
    fn one(lines: &str) -> Vec<Busy> {
        let ics = google(&gevent("e1", &lines.replace('\n', "\r\n")));
        let got = read(&ics, utc(2026, 3, 1, 0, 0), utc(2026, 4, 1, 0, 0));
        assert_eq!(got.skipped, 0, "{lines}");
        got.busy
    }

    #[test]
    fn utc_times_from_google_export() {
        let ics = google(&format!(
            "{}{}",
            gevent(
                "a",
                "DTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\nSTATUS:CONFIRMED\r\nTRANSP:OPAQUE\r\n"
            ),
            gevent(
                "b",
                "DTSTART:20260303T160000Z\r\nDTEND:20260303T163000Z\r\n"
            ),
        ));
        let got = read(&ics, utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
        assert_eq!(
            got,
            BusyTimes {
                busy: vec![
                    b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0)),
                    b(utc(2026, 3, 3, 16, 0), utc(2026, 3, 3, 16, 30)),
                ],
                skipped: 0,
                truncated: false,
            }
        );
    }

    #[test]
    fn tzid_madrid_and_other_iana_zones() {
        // March 2: Madrid is UTC+1, New York still EST (UTC-5), Tokyo UTC+9.
        assert_eq!(
            one(
                "DTSTART;TZID=Europe/Madrid:20260302T100000\nDTEND;TZID=Europe/Madrid:20260302T110000\n"
            ),
            [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0))]
        );
        assert_eq!(
            one(
                "DTSTART;TZID=America/New_York:20260302T090000\nDTEND;TZID=America/New_York:20260302T100000\n"
            ),
            [b(utc(2026, 3, 2, 14, 0), utc(2026, 3, 2, 15, 0))]
        );
        // Start and end may be in different zones.
        assert_eq!(
            one(
                "DTSTART;TZID=Asia/Tokyo:20260302T180000\nDTEND;TZID=Europe/Madrid:20260302T110000\n"
            ),
            [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0))]
        );
        // After the 2026-03-29 change Madrid is UTC+2.
        assert_eq!(
            one(
                "DTSTART;TZID=Europe/Madrid:20260330T100000\nDTEND;TZID=Europe/Madrid:20260330T110000\n"
            ),
            [b(utc(2026, 3, 30, 8, 0), utc(2026, 3, 30, 9, 0))]
        );
    }

    #[test]
    fn floating_times_use_local_zone() {
        let ics = google(&gevent(
            "f",
            "DTSTART:20260302T100000\r\nDTEND:20260302T110000\r\n",
        ));
        let (from, to) = (utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
        assert_eq!(
            read(&ics, from, to).busy,
            [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0))]
        );
        let ny = busy_times(&ics, from, to, Tz::America__New_York).unwrap();
        assert_eq!(ny.busy, [b(utc(2026, 3, 2, 15, 0), utc(2026, 3, 2, 16, 0))]);
    }

    #[test]
    fn duration_instead_of_dtend() {
        assert_eq!(
            one("DTSTART;TZID=Europe/Madrid:20260302T100000\nDURATION:PT1H30M\n"),
            [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 30))]
        );
        assert_eq!(
            one("DTSTART:20260302T090000Z\nDURATION:P1DT2H\n"),
            [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 3, 11, 0))]
        );
        assert_eq!(
            one("DTSTART;VALUE=DATE:20260302\nDURATION:P1W\n"),
            [b(utc(2026, 3, 1, 23, 0), utc(2026, 3, 8, 23, 0))]
        );
    }

    #[test]
    fn missing_end_datetime_lasts_zero_date_lasts_a_day() {
        assert_eq!(one("DTSTART:20260302T090000Z\n"), []);
        assert_eq!(
            one("DTSTART;VALUE=DATE:20260302\n"),
            [b(utc(2026, 3, 1, 23, 0), utc(2026, 3, 2, 23, 0))]
        );
    }

    #[test]
    fn all_day_events_span_local_midnights() {
        // Two days, DTEND exclusive: Madrid midnight is 23:00 UTC in winter.
        assert_eq!(
            one("DTSTART;VALUE=DATE:20260310\nDTEND;VALUE=DATE:20260312\n"),
            [b(utc(2026, 3, 9, 23, 0), utc(2026, 3, 11, 23, 0))]
        );
        // The spring-forward day has 23 hours.
        assert_eq!(
            one("DTSTART;VALUE=DATE:20260329\nDTEND;VALUE=DATE:20260330\n"),
            [b(utc(2026, 3, 28, 23, 0), utc(2026, 3, 29, 22, 0))]
        );
        // A bare date without VALUE=DATE (seen in old exports) is a date too.
        assert_eq!(
            one("DTSTART:20260310\nDTEND:20260311\n"),
            [b(utc(2026, 3, 9, 23, 0), utc(2026, 3, 10, 23, 0))]
        );
    }

    /// Header and a VEVENT as Outlook / Exchange export them.
    fn outlook(tzid: &str, start: &str, end: &str) -> String {
        format!(
            "BEGIN:VCALENDAR\r\nMETHOD:PUBLISH\r\nPRODID:Microsoft Exchange Server 2010\r\n\
             VERSION:2.0\r\nX-WR-CALNAME:Calendario\r\nBEGIN:VTIMEZONE\r\nTZID:{tzid}\r\n\
             BEGIN:STANDARD\r\nDTSTART:16010101T030000\r\nTZOFFSETFROM:+0200\r\n\
             TZOFFSETTO:+0100\r\nRRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=10\r\n\
             END:STANDARD\r\nBEGIN:DAYLIGHT\r\nDTSTART:16010101T020000\r\n\
             TZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\n\
             RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=3\r\nEND:DAYLIGHT\r\n\
             END:VTIMEZONE\r\nBEGIN:VEVENT\r\nDESCRIPTION:\\n\r\n\
             UID:040000008200E00074C5B7101A82E00800000000D0C0A1B2C3D4E501000000000000000\r\n \
             010000000A1B2C3D4E5F60718293A4B5C6D7E8F90\r\nSUMMARY:Reunión\r\n\
             DTSTART;TZID={tzid}:{start}\r\nDTEND;TZID={tzid}:{end}\r\nCLASS:PUBLIC\r\n\
             PRIORITY:5\r\nDTSTAMP:20260301T100000Z\r\nTRANSP:OPAQUE\r\nSTATUS:CONFIRMED\r\n\
             SEQUENCE:0\r\nLOCATION:Oficina\r\nX-MICROSOFT-CDO-APPT-SEQUENCE:0\r\n\
             X-MICROSOFT-CDO-BUSYSTATUS:BUSY\r\nX-MICROSOFT-CDO-INTENDEDSTATUS:BUSY\r\n\
             X-MICROSOFT-CDO-ALLDAYEVENT:FALSE\r\nX-MICROSOFT-CDO-IMPORTANCE:1\r\n\
             X-MICROSOFT-CDO-INSTTYPE:0\r\nBEGIN:VALARM\r\nDESCRIPTION:REMINDER\r\n\
             TRIGGER;RELATED=START:-PT15M\r\nACTION:DISPLAY\r\nEND:VALARM\r\nEND:VEVENT\r\n\
             END:VCALENDAR\r\n"
        )
    }

    #[test]
    fn outlook_windows_zone_names() {
        let (from, to) = (utc(2026, 3, 1, 0, 0), utc(2026, 4, 1, 0, 0));
        let at = |tzid: &str, local: Tz| {
            let ics = outlook(tzid, "20260302T100000", "20260302T110000");
            busy_times(&ics, from, to, local).unwrap().busy
        };
        let nine = [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0))];
        let ten = [b(utc(2026, 3, 2, 10, 0), utc(2026, 3, 2, 11, 0))];
        let ny = Tz::America__New_York;
        // Local is New York so a wrong fallback would show.
        assert_eq!(at("Romance Standard Time", ny), nine);
        assert_eq!(at("\"Romance Standard Time\"", ny), nine);
        assert_eq!(at("W. Europe Standard Time", ny), nine);
        assert_eq!(at("GMT Standard Time", ny), ten);
        assert_eq!(at("UTC", ny), ten);
        assert_eq!(at("/mozilla.org/20050126_1/Europe/Madrid", ny), nine);
        // Unknown names fall back to the agent's zone.
        assert_eq!(at("Customized Time Zone", MADRID), nine);
        assert_eq!(
            at("Customized Time Zone", ny),
            [b(utc(2026, 3, 2, 15, 0), utc(2026, 3, 2, 16, 0))]
        );
    }

    #[test]
    fn weekly_byday_until_with_exdate_outlook() {
        let ics = "BEGIN:VCALENDAR\r\nMETHOD:PUBLISH\r\nPRODID:Microsoft Exchange Server 2010\r\n\
            VERSION:2.0\r\nBEGIN:VEVENT\r\n\
            RRULE:FREQ=WEEKLY;UNTIL=20260429T080000Z;INTERVAL=1;BYDAY=MO,\r\n WE;WKST=MO\r\n\
            EXDATE;TZID=Romance Standard Time:20260304T100000\r\n\
            UID:weekly-outlook\r\nSUMMARY:Equipo\r\n\
            DTSTART;TZID=Romance Standard Time:20260302T100000\r\n\
            DTEND;TZID=Romance Standard Time:20260302T110000\r\n\
            X-MICROSOFT-CDO-BUSYSTATUS:BUSY\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let got = read(ics, utc(2026, 3, 2, 0, 0), utc(2026, 3, 14, 0, 0));
        let winter = |d| b(utc(2026, 3, d, 9, 0), utc(2026, 3, d, 10, 0));
        assert_eq!(got.busy, [winter(2), winter(9), winter(11)]);
        // UNTIL is inclusive: April 29 (10:00 CEST = 08:00Z) is the last one.
        let got = read(ics, utc(2026, 4, 20, 0, 0), utc(2026, 5, 20, 0, 0));
        let summer = |d| b(utc(2026, 4, d, 8, 0), utc(2026, 4, d, 9, 0));
        assert_eq!(got.busy, [summer(20), summer(22), summer(27), summer(29)]);
    }

    #[test]
    fn daily_count_interval_and_biweekly() {
        let h = |d, hh| b(utc(2026, 3, d, hh, 0), utc(2026, 3, d, hh + 1, 0));
        assert_eq!(
            one("DTSTART:20260302T090000Z\nDTEND:20260302T100000Z\nRRULE:FREQ=DAILY;COUNT=3\n"),
            [h(2, 9), h(3, 9), h(4, 9)]
        );
        assert_eq!(
            one("DTSTART:20260302T090000Z\nDTEND:20260302T100000Z\nRRULE:FREQ=DAILY;INTERVAL=10\n"),
            [h(2, 9), h(12, 9), h(22, 9)]
        );
        // Every other week on Tuesday and Thursday, from Tuesday March 3.
        assert_eq!(
            one(
                "DTSTART;TZID=Europe/Madrid:20260303T170000\nDTEND;TZID=Europe/Madrid:20260303T180000\n\
                 RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH;UNTIL=20260320T000000Z\n"
            ),
            [h(3, 16), h(5, 16), h(17, 16), h(19, 16)]
        );
    }

    #[test]
    fn monthly_rules() {
        let ics = google(&format!(
            "{}{}{}",
            // 15th of each month, 12:00 UTC.
            gevent(
                "m15",
                "DTSTART:20260115T120000Z\r\nDTEND:20260115T130000Z\r\nRRULE:FREQ=MONTHLY;BYMONTHDAY=15\r\n"
            ),
            // First Monday of each month, 08:00 UTC.
            gevent(
                "m1mo",
                "DTSTART:20260105T080000Z\r\nDTEND:20260105T090000Z\r\nRRULE:FREQ=MONTHLY;BYDAY=1MO;COUNT=4\r\n"
            ),
            // The 31st: months without one are skipped (RFC 5545).
            gevent(
                "m31",
                "DTSTART:20260131T200000Z\r\nDTEND:20260131T210000Z\r\nRRULE:FREQ=MONTHLY\r\n"
            ),
        ));
        let got = read(&ics, utc(2026, 1, 1, 0, 0), utc(2026, 6, 1, 0, 0));
        let at = |m, d, h| b(utc(2026, m, d, h, 0), utc(2026, m, d, h + 1, 0));
        assert_eq!(
            got.busy,
            [
                at(1, 5, 8),
                at(1, 15, 12),
                at(1, 31, 20),
                at(2, 2, 8),
                at(2, 15, 12),
                at(3, 2, 8),
                at(3, 15, 12),
                at(3, 31, 20),
                at(4, 6, 8),
                at(4, 15, 12),
                at(5, 15, 12),
                at(5, 31, 20),
            ]
        );
    }

    #[test]
    fn exdate_forms() {
        // Daily 10:00 Madrid (09:00Z) for 8 days; five excluded in four forms.
        let got = one(
            "DTSTART;TZID=Europe/Madrid:20260302T100000\nDTEND;TZID=Europe/Madrid:20260302T110000\n\
             RRULE:FREQ=DAILY;COUNT=8\n\
             EXDATE;TZID=Europe/Madrid:20260303T100000\n\
             EXDATE:20260304T090000Z\n\
             EXDATE;TZID=Europe/Madrid:20260305T100000,20260306T100000\n\
             EXDATE;VALUE=DATE:20260308\n",
        );
        let h = |d| b(utc(2026, 3, d, 9, 0), utc(2026, 3, d, 10, 0));
        assert_eq!(got, [h(2), h(7), h(9)]);
        // All-day series with a DATE exclusion.
        let got = one("DTSTART;VALUE=DATE:20260302\nDTEND;VALUE=DATE:20260303\n\
             RRULE:FREQ=DAILY;COUNT=3\nEXDATE;VALUE=DATE:20260303\n");
        let day = |d| b(utc(2026, 3, d - 1, 23, 0), utc(2026, 3, d, 23, 0));
        assert_eq!(got, [day(2), day(4)]);
    }

    #[test]
    fn rdate_adds_instances() {
        let got = one("DTSTART:20260302T090000Z\nDTEND:20260302T100000Z\n\
             RDATE;TZID=Europe/Madrid:20260310T150000\n\
             RDATE;VALUE=PERIOD:20260311T120000Z/20260311T123000Z,20260312T120000Z/PT2H\n\
             RDATE:20260313T090000Z,20260314T090000Z\nEXDATE:20260314T090000Z\n");
        assert_eq!(
            got,
            [
                b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0)),
                b(utc(2026, 3, 10, 14, 0), utc(2026, 3, 10, 15, 0)),
                b(utc(2026, 3, 11, 12, 0), utc(2026, 3, 11, 12, 30)),
                b(utc(2026, 3, 12, 12, 0), utc(2026, 3, 12, 14, 0)),
                b(utc(2026, 3, 13, 9, 0), utc(2026, 3, 13, 10, 0)),
            ]
        );
        let got = one("DTSTART;VALUE=DATE:20260302\nRDATE;VALUE=DATE:20260305\n");
        let day = |d| b(utc(2026, 3, d - 1, 23, 0), utc(2026, 3, d, 23, 0));
        assert_eq!(got, [day(2), day(5)]);
    }

    #[test]
    fn recurrence_id_overrides_move_and_cancel() {
        let series = "DTSTART;TZID=Europe/Madrid:20260302T100000\r\n\
                      DTEND;TZID=Europe/Madrid:20260302T110000\r\nRRULE:FREQ=WEEKLY;BYDAY=MO\r\n";
        let ics = google(&format!(
            "{}{}{}{}",
            gevent("weekly", series),
            // March 9 moved to Tuesday 10th, 16:00 Madrid.
            gevent(
                "weekly",
                "DTSTART;TZID=Europe/Madrid:20260310T160000\r\nDTEND;TZID=Europe/Madrid:20260310T170000\r\n\
                 RECURRENCE-ID;TZID=Europe/Madrid:20260309T100000\r\n"
            ),
            // March 16 cancelled; its RECURRENCE-ID is written in UTC.
            gevent(
                "weekly",
                "DTSTART;TZID=Europe/Madrid:20260316T100000\r\nDTEND;TZID=Europe/Madrid:20260316T110000\r\n\
                 RECURRENCE-ID:20260316T090000Z\r\nSTATUS:CANCELLED\r\n"
            ),
            // April 6 (outside the window) moved into it, to Sunday March 22.
            gevent(
                "weekly",
                "DTSTART:20260322T180000Z\r\nDTEND:20260322T190000Z\r\n\
                 RECURRENCE-ID;TZID=Europe/Madrid:20260406T100000\r\n"
            ),
        ));
        let got = read(&ics, utc(2026, 3, 2, 0, 0), utc(2026, 3, 24, 0, 0));
        assert_eq!(
            got.busy,
            [
                b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0)),
                b(utc(2026, 3, 10, 15, 0), utc(2026, 3, 10, 16, 0)),
                b(utc(2026, 3, 22, 18, 0), utc(2026, 3, 22, 19, 0)),
                b(utc(2026, 3, 23, 9, 0), utc(2026, 3, 23, 10, 0)),
            ]
        );
        // The moved-away April 6 instance is gone from its own week.
        let got = read(&ics, utc(2026, 4, 6, 0, 0), utc(2026, 4, 7, 0, 0));
        assert_eq!(got.busy, []);
    }

    #[test]
    fn weekly_meeting_keeps_local_time_across_dst() {
        // Thursdays 10:00 Madrid; DST ends Sunday 2026-10-25 (UTC+2 -> UTC+1).
        let ics = google(&gevent(
            "thu",
            "DTSTART;TZID=Europe/Madrid:20260101T100000\r\nDTEND;TZID=Europe/Madrid:20260101T110000\r\n\
             RRULE:FREQ=WEEKLY;BYDAY=TH\r\n",
        ));
        let got = read(&ics, utc(2026, 10, 15, 0, 0), utc(2026, 11, 6, 0, 0));
        let at = |m, d, h| b(utc(2026, m, d, h, 0), utc(2026, m, d, h + 1, 0));
        assert_eq!(
            got.busy,
            [at(10, 15, 8), at(10, 22, 8), at(10, 29, 9), at(11, 5, 9)]
        );
        // And across the spring change (2026-03-29).
        let got = read(&ics, utc(2026, 3, 20, 0, 0), utc(2026, 4, 5, 0, 0));
        assert_eq!(got.busy, [at(3, 26, 9), at(4, 2, 8)]);
        // Same through an Outlook zone name.
        let ics = ics.replace("TZID=Europe/Madrid", "TZID=Romance Standard Time");
        let got = busy_times(
            &ics,
            utc(2026, 10, 15, 0, 0),
            utc(2026, 11, 6, 0, 0),
            Tz::UTC,
        )
        .unwrap();
        assert_eq!(
            got.busy,
            [at(10, 15, 8), at(10, 22, 8), at(10, 29, 9), at(11, 5, 9)]
        );
    }

    #[test]
    fn transparent_and_cancelled_are_free_tentative_is_busy() {
        let ev = |uid, extra: &str| {
            gevent(
                uid,
                &format!("DTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n{extra}"),
            )
        };
        let ics = google(&format!(
            "{}{}{}",
            ev("t", "TRANSP:TRANSPARENT\r\n"),
            ev("c", "STATUS:CANCELLED\r\n"),
            ev("f", "X-MICROSOFT-CDO-BUSYSTATUS:FREE\r\n"),
        ));
        assert_eq!(
            read(&ics, utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0)),
            BusyTimes::default()
        );
        assert_eq!(
            one("DTSTART:20260302T090000Z\nDTEND:20260302T100000Z\nSTATUS:TENTATIVE\n"),
            [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0))]
        );
    }

    #[test]
    fn window_clipping_sorting_and_merging() {
        let ev = |uid: &str, s: &str, e: &str| {
            gevent(
                uid,
                &format!("DTSTART:202603{s}00Z\r\nDTEND:202603{e}00Z\r\n"),
            )
        };
        let ics = google(&format!(
            "{}{}{}{}{}{}{}",
            ev("late", "05T1500", "05T1600"),
            ev("straddles-from", "01T2300", "02T0100"),
            ev("overlap-a", "03T0900", "03T1030"),
            ev("overlap-b", "03T1000", "03T1100"),
            ev("adjacent", "03T1100", "03T1200"),
            ev("straddles-to", "06T2300", "07T0100"),
            ev("outside", "08T1000", "08T1100"),
        ));
        let got = read(&ics, utc(2026, 3, 2, 0, 0), utc(2026, 3, 7, 0, 0));
        assert_eq!(
            got.busy,
            [
                b(utc(2026, 3, 2, 0, 0), utc(2026, 3, 2, 1, 0)),
                b(utc(2026, 3, 3, 9, 0), utc(2026, 3, 3, 12, 0)),
                b(utc(2026, 3, 5, 15, 0), utc(2026, 3, 5, 16, 0)),
                b(utc(2026, 3, 6, 23, 0), utc(2026, 3, 7, 0, 0)),
            ]
        );
        // An empty or reversed window is empty.
        assert_eq!(
            read(&ics, utc(2026, 3, 7, 0, 0), utc(2026, 3, 2, 0, 0)),
            BusyTimes::default()
        );
    }

    #[test]
    fn endless_rules_stop_at_to() {
        // Daily since 2000, no end: skipped ahead, not walked.
        let ics = google(&gevent(
            "daily",
            "DTSTART;TZID=Europe/Madrid:20000103T100000\r\nDTEND;TZID=Europe/Madrid:20000103T110000\r\n\
             RRULE:FREQ=DAILY\r\n",
        ));
        let got = read(&ics, utc(2026, 3, 2, 0, 0), utc(2026, 3, 9, 0, 0));
        assert_eq!(got.busy.len(), 7);
        assert_eq!(
            got.busy[0],
            b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0))
        );
        assert!(!got.truncated);
        // Every 15 minutes since 2000, 10 minutes long: 96 a day.
        let ics = google(&gevent(
            "q",
            "DTSTART:20000101T000000Z\r\nDURATION:PT10M\r\nRRULE:FREQ=MINUTELY;INTERVAL=15\r\n",
        ));
        let got = read(&ics, utc(2026, 3, 2, 0, 0), utc(2026, 3, 9, 0, 0));
        assert_eq!(got.busy.len(), 7 * 96);
        assert!(!got.truncated);
    }

    #[test]
    fn skipping_ahead_keeps_the_interval_phase() {
        // Every other Monday since 2020-01-06, and every third day since
        // 2000-01-01: expected instances computed here by plain date arithmetic.
        let ics = google(&format!(
            "{}{}",
            gevent(
                "biweekly",
                "DTSTART:20200106T090000Z\r\nDTEND:20200106T100000Z\r\nRRULE:FREQ=WEEKLY;INTERVAL=2\r\n"
            ),
            gevent(
                "third-day",
                "DTSTART:20000101T120000Z\r\nDTEND:20000101T130000Z\r\nRRULE:FREQ=DAILY;INTERVAL=3\r\n"
            ),
        ));
        let (from, to) = (utc(2026, 3, 1, 0, 0), utc(2026, 4, 1, 0, 0));
        let mut expected = Vec::new();
        for day in 1..=31 {
            let date = NaiveDate::from_ymd_opt(2026, 3, day).unwrap();
            let since = |y, m, d| (date - NaiveDate::from_ymd_opt(y, m, d).unwrap()).num_days();
            if since(2020, 1, 6) % 14 == 0 {
                expected.push(b(utc(2026, 3, day, 9, 0), utc(2026, 3, day, 10, 0)));
            }
            if since(2000, 1, 1) % 3 == 0 {
                expected.push(b(utc(2026, 3, day, 12, 0), utc(2026, 3, day, 13, 0)));
            }
        }
        assert_eq!(expected.len(), 2 + 10);
        assert_eq!(read(&ics, from, to).busy, expected);
    }

    #[test]
    fn until_in_date_and_floating_forms() {
        let day = |d| b(utc(2026, 3, d - 1, 23, 0), utc(2026, 3, d, 23, 0));
        // Google writes a DATE UNTIL for all-day series; it is inclusive.
        assert_eq!(
            one("DTSTART;VALUE=DATE:20260302\nDTEND;VALUE=DATE:20260303\n\
                 RRULE:FREQ=WEEKLY;UNTIL=20260316;BYDAY=MO\n"),
            [day(2), day(9), day(16)]
        );
        // A floating UNTIL is read in the event's zone.
        let h = |d| b(utc(2026, 3, d, 9, 0), utc(2026, 3, d, 10, 0));
        assert_eq!(
            one(
                "DTSTART;TZID=Europe/Madrid:20260302T100000\nDTEND;TZID=Europe/Madrid:20260302T110000\n\
                 RRULE:FREQ=DAILY;UNTIL=20260304T100000\n"
            ),
            [h(2), h(3), h(4)]
        );
        // A DATE UNTIL on a timed series includes that day.
        assert_eq!(
            one(
                "DTSTART:20260302T090000Z\nDTEND:20260302T100000Z\nRRULE:FREQ=DAILY;UNTIL=20260303\n"
            ),
            [h(2), h(3)]
        );
    }

    #[test]
    fn expansion_is_bounded() {
        // One-second events every second: MAX_OCCURRENCES cuts it short.
        let from = utc(2026, 3, 2, 0, 0);
        let ics = google(&gevent(
            "s",
            "DTSTART:19900101T000000Z\r\nDURATION:PT1S\r\nRRULE:FREQ=SECONDLY\r\n",
        ));
        let got = read(&ics, from, utc(2026, 3, 3, 0, 0));
        assert!(got.truncated);
        let cap = i64::try_from(MAX_OCCURRENCES).unwrap();
        assert_eq!(got.busy, [b(from, from + TimeDelta::seconds(cap))]);
        // A COUNT rule cannot skip ahead: the step budget stops the walk.
        let ics = google(&gevent(
            "c",
            "DTSTART:20000101T000000Z\r\nDURATION:PT1S\r\nRRULE:FREQ=SECONDLY;COUNT=999999999\r\n",
        ));
        let got = read(&ics, from, utc(2026, 3, 3, 0, 0));
        assert!(got.truncated);
        assert_eq!(got.busy, []);
    }

    #[test]
    fn errors_too_large_and_not_icalendar() {
        let (from, to) = (utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
        let big = format!("BEGIN:VCALENDAR\r\n{}", "X".repeat(MAX_BYTES));
        assert!(matches!(
            busy_times(&big, from, to, MADRID),
            Err(IcsError::TooLarge(n)) if n == big.len()
        ));
        for text in [
            "<!DOCTYPE html><html><body>Sign in</body></html>",
            "",
            "BEGIN:VCARD\r\nEND:VCARD\r\n",
        ] {
            assert!(
                matches!(
                    busy_times(text, from, to, MADRID),
                    Err(IcsError::NotICalendar(_))
                ),
                "{text}"
            );
        }
        // A BOM and leading blank lines are fine.
        let ics = format!("\u{feff}\r\n{}", google(""));
        assert_eq!(
            busy_times(&ics, from, to, MADRID).unwrap(),
            BusyTimes::default()
        );
    }

    #[test]
    fn broken_events_are_skipped_and_counted() {
        let good = gevent(
            "good",
            "DTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
        );
        let ics = google(&format!(
            "{}{}{}{}{}{}",
            gevent(
                "bad-date",
                "DTSTART:2026XX02T090000Z\r\nDTEND:20260302T100000Z\r\n"
            ),
            good,
            gevent(
                "bad-rule",
                "DTSTART:20260303T090000Z\r\nDTEND:20260303T100000Z\r\nRRULE:FREQ=SOMETIMES\r\n"
            ),
            gevent(
                "ends-before-start",
                "DTSTART:20260304T090000Z\r\nDTEND:20260304T080000Z\r\n"
            ),
            gevent("no-start", "DTEND:20260305T100000Z\r\n"),
            gevent(
                "bad-exdate",
                "DTSTART:20260306T090000Z\r\nDTEND:20260306T100000Z\r\nEXDATE:tomorrow\r\n"
            ),
        ));
        let got = read(&ics, utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
        assert_eq!(got.busy, [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0))]);
        assert_eq!(got.skipped, 5);
    }

    #[test]
    fn broken_structure_costs_only_the_broken_event() {
        let ev = |d: u32| {
            gevent(
                &format!("e{d}"),
                &format!("DTSTART:202603{d:02}T090000Z\r\nDTEND:202603{d:02}T100000Z\r\n"),
            )
        };
        // A VALARM that never ends, then a download cut off mid-event.
        let broken = ev(3).replace("END:VEVENT", "BEGIN:VALARM\r\nEND:VEVENT");
        let ics = format!(
            "{GOOGLE_HEAD}{}{broken}{}BEGIN:VEVENT\r\nDTSTART:2026",
            ev(2),
            ev(4)
        );
        let got = read(&ics, utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
        let h = |d| b(utc(2026, 3, d, 9, 0), utc(2026, 3, d, 10, 0));
        assert_eq!(got.busy, [h(2), h(4)]);
        assert_eq!(got.skipped, 2);
    }

    /// 200 events over the week of Monday 2026-03-02, like a busy agent's
    /// calendar: 150 single 15-minute events Monday-Friday (every 10th
    /// cancelled) and 50 weekly Saturday+Sunday series in Madrid time started
    /// in January (every 10th with the Saturday excluded, every 3rd with COUNT).
    fn week_of_events() -> String {
        let mut s = String::from(GOOGLE_HEAD);
        for i in 0..150u32 {
            let day = 2 + i / 30;
            let (h, m) = ((i % 30) / 2, (i % 2) * 30);
            let status = if i % 10 == 0 {
                "CANCELLED"
            } else {
                "CONFIRMED"
            };
            s += &gevent(
                &format!("single-{i}"),
                &format!(
                    "DTSTART:202603{day:02}T{h:02}{m:02}00Z\r\nDTEND:202603{day:02}T{h:02}{:02}00Z\r\n\
                     STATUS:{status}\r\n",
                    m + 15
                ),
            );
        }
        for j in 0..50u32 {
            let (h, m) = (j * 20 / 60, j * 20 % 60);
            let mut lines = format!(
                "DTSTART;TZID=Europe/Madrid:20260103T{h:02}{m:02}00\r\n\
                 DTEND;TZID=Europe/Madrid:20260103T{h:02}{:02}00\r\n",
                m + 10
            );
            if j % 3 == 1 {
                lines += "RRULE:FREQ=WEEKLY;BYDAY=SA,SU;COUNT=40\r\n";
            } else {
                lines += "RRULE:FREQ=WEEKLY;BYDAY=SA,SU\r\n";
            }
            if j % 10 == 0 {
                writeln!(lines, "EXDATE;TZID=Europe/Madrid:20260307T{h:02}{m:02}00\r").unwrap();
            }
            s += &gevent(&format!("weekly-{j}"), &lines);
        }
        s + "END:VCALENDAR\r\n"
    }

    #[test]
    fn two_hundred_events_over_a_week() {
        let ics = week_of_events();
        assert_eq!(ics.matches("BEGIN:VEVENT").count(), 200);
        let got = read(&ics, utc(2026, 3, 2, 0, 0), utc(2026, 3, 9, 0, 0));
        assert_eq!(got.skipped, 0);
        assert!(!got.truncated);
        // 135 singles + 50 series x 2 days - 5 excluded Saturdays.
        assert_eq!(got.busy.len(), 135 + 100 - 5);
        let total: i64 = got
            .busy
            .iter()
            .map(|b| (b.end - b.start).num_minutes())
            .sum();
        assert_eq!(total, 135 * 15 + 95 * 10);
        assert!(got.busy.windows(2).all(|w| w[0].end < w[1].start));
        // Weekend instances sit at Madrid wall-clock times (UTC+1 in March).
        assert!(
            got.busy
                .contains(&b(utc(2026, 3, 7, 23, 20), utc(2026, 3, 7, 23, 30)))
        );
    }

    #[test]
    #[ignore = "timing; run with --ignored --nocapture"]
    fn time_parse_and_expand_200_events_100_times() {
        let ics = week_of_events();
        let started = std::time::Instant::now();
        for _ in 0..100 {
            let got = read(&ics, utc(2026, 3, 2, 0, 0), utc(2026, 3, 9, 0, 0));
            assert_eq!(got.busy.len(), 230);
        }
        let elapsed = started.elapsed();
        println!(
            "200 events x 100: {elapsed:?} ({:?} per calendar)",
            elapsed / 100
        );
    }

    fn visit(uid: &str, day: u32, cancelled: bool) -> VisitEvent {
        VisitEvent {
            uid: uid.to_owned(),
            start: utc(2026, 3, day, 9, 0),
            end: utc(2026, 3, day, 9, 45),
            summary: format!("Visita: Calle Mayor {day}"),
            location: "Calle Mayor 5, 3º B; Madrid".to_owned(),
            description: "Cliente: Ana, tel. 600 000 000;\nllave en portería, timbre 3B".to_owned(),
            url: Some(format!("https://example.com/visits/{uid}?a=1&b=2")),
            cancelled,
            updated: utc(2026, 3, 1, 8, 30),
        }
    }

    fn value<'a>(c: &'a parser::Component<'_>, name: &str) -> &'a str {
        prop(c, name)
            .unwrap_or_else(|| panic!("no {name}"))
            .val
            .as_str()
    }

    #[test]
    fn visits_calendar_round_trips_through_parser() {
        let out = visits_calendar(
            "Visitas, Ana",
            &[
                visit("v1@realestate", 2, false),
                visit("v2@realestate", 3, true),
            ],
        );
        let unfolded = parser::unfold(&out);
        let cal = parser::read_calendar(&unfolded).unwrap();
        let cal_value = |name: &str| {
            cal.properties
                .iter()
                .find(|p| p.name == name)
                .map(|p| p.val.as_str())
        };
        assert_eq!(cal_value("VERSION"), Some("2.0"));
        assert_eq!(cal_value("PRODID"), Some(PRODID));
        assert_eq!(cal_value("METHOD"), Some("PUBLISH"));
        assert_eq!(cal_value("X-WR-CALNAME"), Some("Visitas, Ana"));
        assert_eq!(cal.components.len(), 2);
        let (e1, e2) = (&cal.components[0], &cal.components[1]);
        assert_eq!(e1.name, "VEVENT");
        assert_eq!(value(e1, "UID"), "v1@realestate");
        assert_eq!(value(e1, "DTSTART"), "20260302T090000Z");
        assert_eq!(value(e1, "DTEND"), "20260302T094500Z");
        assert_eq!(value(e1, "DTSTAMP"), "20260301T083000Z");
        assert_eq!(value(e1, "SUMMARY"), "Visita: Calle Mayor 2");
        assert_eq!(value(e1, "LOCATION"), "Calle Mayor 5, 3º B; Madrid");
        assert_eq!(
            value(e1, "DESCRIPTION"),
            "Cliente: Ana, tel. 600 000 000;\nllave en portería, timbre 3B"
        );
        assert_eq!(
            value(e1, "URL"),
            "https://example.com/visits/v1@realestate?a=1&b=2"
        );
        assert_eq!(value(e1, "STATUS"), "CONFIRMED");
        assert_eq!(value(e2, "UID"), "v2@realestate");
        assert_eq!(value(e2, "DTSTART"), "20260303T090000Z");
        assert_eq!(value(e2, "STATUS"), "CANCELLED");
        assert_eq!(value(e2, "TRANSP"), "TRANSPARENT");
        // Same input, same bytes: nothing depends on the clock or randomness.
        assert_eq!(
            out,
            visits_calendar(
                "Visitas, Ana",
                &[
                    visit("v1@realestate", 2, false),
                    visit("v2@realestate", 3, true)
                ]
            )
        );
        // The feed reads back as busy time, cancelled visits excluded.
        let got = read(&out, utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
        assert_eq!(got.busy, [b(utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 9, 45))]);
    }

    #[test]
    fn visits_calendar_escapes_text() {
        let out = visits_calendar("Visitas", &[visit("v1", 2, false)]);
        let unfolded = parser::unfold(&out);
        assert!(
            unfolded.contains("\r\nLOCATION:Calle Mayor 5\\, 3º B\\; Madrid\r\n"),
            "{unfolded}"
        );
        assert!(
            unfolded.contains(
                "\r\nDESCRIPTION:Cliente: Ana\\, tel. 600 000 000\\;\\nllave en portería\\, timbre 3B\r\n"
            ),
            "{unfolded}"
        );
        // A CR in the input cannot start a new line (no injected ATTENDEE).
        let mut evil = visit("v2", 3, false);
        evil.summary = "Hola\r\nATTENDEE:mailto:x@example.com\rfin".to_owned();
        let out = visits_calendar("Visitas", &[evil]);
        assert!(!out.contains("\r\nATTENDEE"));
        assert!(!out.replace("\r\n", "").contains(['\r', '\n']));
        let unfolded = parser::unfold(&out);
        let cal = parser::read_calendar(&unfolded).unwrap();
        assert_eq!(
            value(&cal.components[0], "SUMMARY"),
            "Hola\nATTENDEE:mailto:x@example.com\nfin"
        );
    }

    #[test]
    fn visits_calendar_folds_long_lines_utf8_safe() {
        let mut v = visit("v1", 2, false);
        v.description = "Ático con terraza 🏠, vistas al Retiro € — ".repeat(12);
        v.summary = "ñ".repeat(100);
        let out = visits_calendar(&"Calendario de visitas ".repeat(5), &[v.clone()]);
        assert!(out.ends_with("END:VCALENDAR\r\n"));
        let lines: Vec<&str> = out.trim_end_matches("\r\n").split("\r\n").collect();
        assert!(lines.iter().all(|l| l.len() <= 75), "{out}");
        let continued = lines.iter().filter(|l| l.starts_with(' ')).count();
        assert!(continued >= 10, "{out}");
        let unfolded = parser::unfold(&out);
        let cal = parser::read_calendar(&unfolded).unwrap();
        let e = &cal.components[0];
        assert_eq!(value(e, "DESCRIPTION"), v.description);
        assert_eq!(value(e, "SUMMARY"), v.summary);
    }
}
