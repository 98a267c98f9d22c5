//! The business as data: `business.toml` in the prompts folder, checked by
//! `zaguan prompts check` and reloaded with the prompts. It holds what customers ask about the
//! agency — name, contact lines, offices, opening hours, holidays, zones, languages and
//! policies — so that the assistants answer from facts (`business_info`), and the handoff
//! messages, the offline replies and the reminders say the truth about when a person answers.
//! Without the file, `ZAGUAN_BUSINESS_NAME` and `ZAGUAN_BUSINESS_CONTACT` are all there is, and
//! the office is taken to be always open — which `serve` and `zaguan prompts check` say
//! aloud, since staff would then be told of handoffs at any hour.

pub mod hours;

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Deserialize;
use toml::Spanned;

pub use hours::{
    Holiday, Schedule, Season, Span, WEEKDAYS, WeeklyHours, start_of_day, start_of_today,
};

/// The file's name in the prompts folder.
pub const BUSINESS_FILE: &str = "business.toml";

/// Longest contact line, policy or name kept, in characters: a reply quotes them whole.
const MAX_TEXT: usize = 600;

/// The agency, as its business file describes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Business {
    /// Overrides `ZAGUAN_BUSINESS_NAME`.
    pub name: Option<String>,
    /// How customers reach a person (phone, email…); overrides `ZAGUAN_BUSINESS_CONTACT`.
    pub contact: Vec<String>,
    pub website: Option<String>,
    /// ISO 639-1 codes of the languages the agency's people speak.
    pub languages: Vec<String>,
    pub offices: Vec<Office>,
    /// `None`: not given, taken as always open.
    pub hours: Option<WeeklyHours>,
    /// Parts of the year with hours of their own (summer mornings), replacing `hours`.
    pub seasons: Vec<Season>,
    pub holidays: Vec<Holiday>,
    pub zones: Vec<Zone>,
    /// What customers ask about (deposits, fees, documents for a visit…), by topic.
    pub policies: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Office {
    pub name: String,
    pub address: String,
    /// A link to the office on a map.
    pub map: Option<String>,
    pub phone: Option<String>,
    /// Its own opening hours, when they differ from the agency's.
    pub hours: Option<WeeklyHours>,
    /// Its own seasons («mornings only in July and August»).
    pub seasons: Vec<Season>,
}

/// A city the agency works in, and its areas (none listed: the whole city).
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    pub city: String,
    pub areas: Vec<String>,
}

/// One thing wrong in the business file: its 1-based line and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusinessProblem {
    pub line: usize,
    pub message: String,
}

impl Business {
    /// The opening hours as given, or always open.
    pub fn opening_hours(&self) -> std::borrow::Cow<'_, WeeklyHours> {
        match &self.hours {
            Some(hours) => std::borrow::Cow::Borrowed(hours),
            None => std::borrow::Cow::Owned(WeeklyHours::always()),
        }
    }

    /// When a person of the agency answers, in `tz`: the opening hours (always, without a
    /// file's), their seasons and the holidays.
    pub fn schedule<'a>(&'a self, hours: &'a WeeklyHours, tz: chrono_tz::Tz) -> Schedule<'a> {
        Schedule::new(hours, &self.holidays, tz).with_seasons(&self.seasons)
    }

    /// The contact lines as one line, `None` when the file gives none.
    pub fn contact_line(&self) -> Option<String> {
        (!self.contact.is_empty()).then(|| self.contact.join(" · "))
    }

    /// The opening hours as a customer reads them, a line per weekday (Spanish: the
    /// assistants' language; the reply is translated).
    pub fn hours_lines(hours: &WeeklyHours) -> Vec<String> {
        const DAYS_ES: [&str; 7] = [
            "lunes",
            "martes",
            "miércoles",
            "jueves",
            "viernes",
            "sábado",
            "domingo",
        ];
        let mut weekday = chrono::Weekday::Mon;
        DAYS_ES
            .iter()
            .map(|name| {
                let day = hours.day(weekday);
                weekday = weekday.succ();
                let spans = if day.is_empty() {
                    "cerrado".to_owned()
                } else {
                    day.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" y ")
                };
                format!("{name}: {spans}")
            })
            .collect()
    }
}

/// Reads a business file; every problem found, with its line, or the business.
pub fn parse(text: &str) -> Result<Business, Vec<BusinessProblem>> {
    let line_at = |offset: usize| 1 + text[..offset.min(text.len())].matches('\n').count();
    let raw: RawBusiness = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(error) => {
            let line = error.span().map_or(1, |span| line_at(span.start));
            let message = error.message().trim().to_owned();
            return Err(vec![BusinessProblem { line, message }]);
        }
    };
    let mut problems = Vec::new();
    let mut problem = |at: usize, message: String| {
        problems.push(BusinessProblem {
            line: line_at(at),
            message,
        })
    };
    let name = raw.name.map(|n| text_of(n, "`name`", &mut problem));
    let contact = raw
        .contact
        .into_iter()
        .map(|c| text_of(c, "a `contact` line", &mut problem))
        .collect();
    let website = raw.website.map(|w| {
        let at = w.span().start;
        let w = text_of(w, "`website`", &mut problem);
        if !is_web_link(&w) {
            problem(at, format!("`website` must be an http(s) link, not `{w}`"));
        }
        w
    });
    let languages = raw
        .languages
        .into_iter()
        .map(|code| {
            let at = code.span().start;
            let code = code.into_inner();
            if code.len() != 2 || !code.bytes().all(|b| b.is_ascii_lowercase()) {
                problem(
                    at,
                    format!("`{code}` is not an ISO 639-1 code like `es` or `en`"),
                );
            }
            code
        })
        .collect();
    let hours = raw.hours.map(|week| week_of(week, "hours", &mut problem));
    let seasons = seasons_of(raw.seasons, &mut problem);
    let holidays = raw
        .holidays
        .into_iter()
        .filter_map(|holiday| {
            let at = holiday.date.span().start;
            let date = match holiday.date.into_inner() {
                toml::Value::Datetime(datetime) => datetime.date.and_then(|d| {
                    NaiveDate::from_ymd_opt(d.year.into(), d.month.into(), d.day.into())
                }),
                toml::Value::String(text) => {
                    NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").ok()
                }
                _ => None,
            };
            let name = text_of(holiday.name, "a holiday's `name`", &mut problem);
            match date {
                Some(date) => Some(Holiday { date, name }),
                None => {
                    problem(
                        at,
                        "a holiday's `date` must be a date like 2026-12-25".to_owned(),
                    );
                    None
                }
            }
        })
        .collect();
    let offices = raw
        .offices
        .into_iter()
        .map(|office| {
            let map = office.map.map(|m| {
                let at = m.span().start;
                let m = text_of(m, "an office's `map`", &mut problem);
                if !is_web_link(&m) {
                    problem(
                        at,
                        format!("an office's `map` must be an http(s) link, not `{m}`"),
                    );
                }
                m
            });
            Office {
                name: text_of(office.name, "an office's `name`", &mut problem),
                address: text_of(office.address, "an office's `address`", &mut problem),
                map,
                phone: office
                    .phone
                    .map(|p| text_of(p, "an office's `phone`", &mut problem)),
                hours: office
                    .hours
                    .map(|week| week_of(week, "an office's hours", &mut problem)),
                seasons: seasons_of(office.seasons, &mut problem),
            }
        })
        .collect();
    let zones = raw
        .zones
        .into_iter()
        .map(|zone| Zone {
            city: text_of(zone.city, "a zone's `city`", &mut problem),
            areas: zone
                .areas
                .into_iter()
                .map(|a| text_of(a, "an area", &mut problem))
                .collect(),
        })
        .collect();
    let policies = raw
        .policies
        .into_iter()
        .map(|(topic, text)| {
            let what = format!("the policy `{topic}`");
            (topic, text_of(text, &what, &mut problem))
        })
        .collect();
    if !problems.is_empty() {
        problems.sort_by_key(|p| p.line);
        return Err(problems);
    }
    Ok(Business {
        name,
        contact,
        website,
        languages,
        offices,
        hours,
        seasons,
        holidays,
        zones,
        policies,
    })
}

/// The seasons of a file (the agency's or an office's), each checked.
fn seasons_of(raw: Vec<RawSeason>, problem: &mut dyn FnMut(usize, String)) -> Vec<Season> {
    raw.into_iter()
        .filter_map(|season| {
            let name = text_of(season.name, "a season's `name`", problem);
            let mut day = |value: Spanned<String>, what: &str| {
                let at = value.span().start;
                Season::day(value.get_ref())
                    .map_err(|error| problem(at, format!("season `{name}`: `{what}`: {error}")))
                    .ok()
            };
            let (from, to) = (day(season.from, "from"), day(season.to, "to"));
            let what = format!("season `{name}`'s hours");
            let hours = week_of(season.hours, &what, problem);
            Some(Season {
                name,
                from: from?,
                to: to?,
                hours,
            })
        })
        .collect()
}

/// Reads a weekly hours table as [`parse`] does (a staff member's `hours` too): each weekday
/// a list of `HH:MM-HH:MM`; a weekday left out is closed.
pub fn week_from(days: &BTreeMap<String, Vec<String>>) -> Result<WeeklyHours, String> {
    let mut week: [Vec<Span>; 7] = Default::default();
    for (day, spans) in days {
        let Some(index) = WEEKDAYS.iter().position(|d| d == day) else {
            return Err(format!("`{day}` is not a weekday (monday … sunday)"));
        };
        week[index] = spans
            .iter()
            .map(|s| Span::parse(s))
            .collect::<Result<_, _>>()?;
    }
    WeeklyHours::from_days(week)
}

fn week_of(week: RawWeek, what: &str, problem: &mut dyn FnMut(usize, String)) -> WeeklyHours {
    let days = [
        week.monday,
        week.tuesday,
        week.wednesday,
        week.thursday,
        week.friday,
        week.saturday,
        week.sunday,
    ];
    let first = days
        .iter()
        .flatten()
        .flatten()
        .map(|s| s.span().start)
        .next()
        .unwrap_or(0);
    let spans: [Vec<Span>; 7] = days.map(|day| {
        day.unwrap_or_default()
            .into_iter()
            .filter_map(|span| {
                let at = span.span().start;
                Span::parse(span.get_ref())
                    .map_err(|error| problem(at, format!("{what}: {error}")))
                    .ok()
            })
            .collect()
    });
    WeeklyHours::from_days(spans).unwrap_or_else(|error| {
        problem(first, format!("{what}: {error}"));
        WeeklyHours::default()
    })
}

/// A text value trimmed, with a problem when it is empty or too long.
fn text_of(value: Spanned<String>, what: &str, problem: &mut dyn FnMut(usize, String)) -> String {
    let at = value.span().start;
    let text = value.into_inner().trim().to_owned();
    if text.is_empty() {
        problem(at, format!("{what} is empty"));
    } else if text.chars().count() > MAX_TEXT {
        problem(at, format!("{what} is over {MAX_TEXT} characters"));
    }
    text
}

fn is_web_link(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|url| matches!(url.scheme(), "http" | "https"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBusiness {
    name: Option<Spanned<String>>,
    #[serde(default)]
    contact: Vec<Spanned<String>>,
    website: Option<Spanned<String>>,
    #[serde(default)]
    languages: Vec<Spanned<String>>,
    hours: Option<RawWeek>,
    #[serde(default)]
    seasons: Vec<RawSeason>,
    #[serde(default)]
    holidays: Vec<RawHoliday>,
    #[serde(default)]
    offices: Vec<RawOffice>,
    #[serde(default)]
    zones: Vec<RawZone>,
    #[serde(default)]
    policies: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeek {
    monday: Option<Vec<Spanned<String>>>,
    tuesday: Option<Vec<Spanned<String>>>,
    wednesday: Option<Vec<Spanned<String>>>,
    thursday: Option<Vec<Spanned<String>>>,
    friday: Option<Vec<Spanned<String>>>,
    saturday: Option<Vec<Spanned<String>>>,
    sunday: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHoliday {
    date: Spanned<toml::Value>,
    name: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOffice {
    name: Spanned<String>,
    address: Spanned<String>,
    map: Option<Spanned<String>>,
    phone: Option<Spanned<String>>,
    hours: Option<RawWeek>,
    #[serde(default)]
    seasons: Vec<RawSeason>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeason {
    name: Spanned<String>,
    /// `MM-DD`, the first day.
    from: Spanned<String>,
    /// `MM-DD`, the last day.
    to: Spanned<String>,
    hours: RawWeek,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawZone {
    city: Spanned<String>,
    #[serde(default)]
    areas: Vec<Spanned<String>>,
}

#[cfg(test)]
mod tests;
