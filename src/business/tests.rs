use super::*;

const GOOD: &str = r#"
name = "Casas Ribera"
contact = ["Tel. 960 000 000", "hola@casasribera.example"]
website = "https://casasribera.example"
languages = ["es", "en"]

[hours]
monday = ["9:30-14:00", "16:30-20:00"]
friday = ["9:30-15:00"]
saturday = ["10:00-13:30"]

[[holidays]]
date = 2026-12-25
name = "Navidad"

[[holidays]]
date = "2027-01-06"
name = "Reyes"

[[offices]]
name = "Ruzafa"
address = "Calle de Cádiz 12, 46006 Valencia"
map = "https://www.openstreetmap.org/?mlat=39.462&mlon=-0.373"

[[zones]]
city = "Valencia"
areas = ["Ruzafa", "Benimaclet"]

[policies]
deposit = "Un mes de fianza."
"#;

#[test]
fn a_complete_file_reads_into_the_business() {
    let business = parse(GOOD).unwrap();
    assert_eq!(business.name.as_deref(), Some("Casas Ribera"));
    assert_eq!(
        business.contact_line().as_deref(),
        Some("Tel. 960 000 000 · hola@casasribera.example")
    );
    let hours = business.hours.as_ref().unwrap();
    assert_eq!(hours.day(chrono::Weekday::Mon).len(), 2);
    assert!(hours.day(chrono::Weekday::Sun).is_empty());
    assert_eq!(business.holidays.len(), 2);
    assert_eq!(
        business.holidays[1].date,
        NaiveDate::from_ymd_opt(2027, 1, 6).unwrap()
    );
    assert_eq!(business.zones[0].areas, ["Ruzafa", "Benimaclet"]);
    assert_eq!(business.policies["deposit"], "Un mes de fianza.");
    let lines = Business::hours_lines(hours);
    assert_eq!(lines[0], "lunes: 9:30–14:00 y 16:30–20:00");
    assert_eq!(lines[6], "domingo: cerrado");
}

#[test]
fn an_empty_file_is_a_business_open_at_all_hours_with_nothing_said() {
    let business = parse("").unwrap();
    assert_eq!(business, Business::default());
    assert_eq!(*business.opening_hours(), WeeklyHours::always());
    assert_eq!(business.contact_line(), None);
}

/// Each broken file, with the line its problem is reported on.
#[test]
fn a_broken_file_is_refused_with_the_line_of_each_problem() {
    let cases: &[(&str, usize, &str)] = &[
        ("name = \"A\"\nopening = 1\n", 2, "unknown field `opening`"),
        (
            "name = \"A\"\n[hours]\nmonday = [\"9-14\"]\n",
            3,
            "not a span",
        ),
        (
            "[hours]\nfunday = [\"9:00-14:00\"]\n",
            2,
            "unknown field `funday`",
        ),
        (
            "[hours]\nmonday = [\"9:00-14:00\", \"13:00-15:00\"]\n",
            2,
            "overlap",
        ),
        (
            "\n\n[[holidays]]\ndate = \"25/12/2026\"\nname = \"Navidad\"\n",
            4,
            "must be a date",
        ),
        ("languages = [\"es\", \"English\"]\n", 1, "ISO 639-1"),
        (
            "[[offices]]\nname = \"Centro\"\naddress = \"\"\n",
            3,
            "`address` is empty",
        ),
        (
            "[[offices]]\nname = \"C\"\naddress = \"Calle 1\"\nmap = \"calle 1\"\n",
            4,
            "http(s) link",
        ),
        ("name = [1, 2]\n", 1, "string"),
        (
            "[[seasons]]\nname = \"verano\"\nfrom = \"13-01\"\nto = \"08-31\"\nhours = { monday = [\"8:00-15:00\"] }\n",
            3,
            "season `verano`: `from`",
        ),
        (
            "[[seasons]]\nname = \"verano\"\nfrom = \"07-01\"\nto = \"08-31\"\nhours = { monday = [\"8-15\"] }\n",
            5,
            "not a span",
        ),
        ("name = \"unterminated\n", 1, ""),
    ];
    for (text, line, message) in cases {
        let problems = parse(text).expect_err(text);
        assert!(
            problems
                .iter()
                .any(|p| p.line == *line && p.message.contains(message)),
            "{text:?}: {problems:?}"
        );
    }
}

#[test]
fn seasons_read_for_the_agency_and_for_an_office() {
    let business = parse(
        r#"
[hours]
monday = ["9:30-14:00", "16:30-20:00"]
[[seasons]]
name = "verano"
from = "07-01"
to = "08-31"
hours = { monday = ["8:00-15:00"] }
[[offices]]
name = "Centro"
address = "Calle Granada 20"
seasons = [{ name = "agosto", from = "08-01", to = "08-31", hours = {} }]
"#,
    )
    .unwrap();
    assert_eq!(business.seasons.len(), 1);
    assert_eq!(
        (business.seasons[0].from, business.seasons[0].to),
        ((7, 1), (8, 31))
    );
    assert_eq!(business.offices[0].seasons[0].name, "agosto");
    assert!(business.offices[0].seasons[0].hours.is_empty());
}

#[test]
fn a_staff_members_hours_read_like_the_agencys() {
    let days: BTreeMap<String, Vec<String>> = [
        ("monday".to_owned(), vec!["9:00-14:00".to_owned()]),
        ("saturday".to_owned(), vec!["10:00-13:00".to_owned()]),
    ]
    .into();
    let week = week_from(&days).unwrap();
    assert_eq!(week.day(chrono::Weekday::Sat)[0].from, 600);
    assert!(week.day(chrono::Weekday::Tue).is_empty());
    let bad: BTreeMap<String, Vec<String>> = [("lunes".to_owned(), vec![])].into();
    assert!(week_from(&bad).unwrap_err().contains("not a weekday"));
}
