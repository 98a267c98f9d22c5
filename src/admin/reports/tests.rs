use super::*;
use crate::domain::{CallOutcome, ToolCall};
use crate::store::NewMessage;
use chrono::TimeZone as _;

fn at(day: u32, hour: u32, minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, day, hour, minute, 0)
        .unwrap()
}

fn message(
    wa: &str,
    role: MessageRole,
    text: &str,
    agent: Option<&str>,
    tools: &[&str],
    when: DateTime<Utc>,
) -> StoredMessage {
    StoredMessage {
        seq: 0,
        message: NewMessage {
            wa_id: WaId::parse(wa).unwrap(),
            role,
            content: text.into(),
            agent: agent.map(Into::into),
            tool_calls: tools
                .iter()
                .map(|name| ToolCall {
                    id: "c".into(),
                    name: (*name).into(),
                    args: serde_json::json!({}).into(),
                })
                .collect(),
            tool_call_id: None,
            wamids: Vec::new(),
            attachments: Vec::new(),
            at: when,
        },
    }
}

fn call(provider: &str, model: &str, tokens: (u64, u64), when: DateTime<Utc>) -> LlmCall {
    LlmCall {
        conversation: None,
        agent: "primary_assistant".into(),
        provider: provider.into(),
        model: model.into(),
        outcome: CallOutcome::Ok,
        input_tokens: tokens.0,
        output_tokens: tokens.1,
        latency: std::time::Duration::ZERO,
        error: None,
        at: when,
    }
}

fn appointment(wa: &str, status: AppointmentStatus) -> Appointment {
    Appointment {
        id: format!("A-{wa}"),
        property_id: "P-1".into(),
        slot_id: "S-1".into(),
        wa_id: WaId::parse(wa).unwrap(),
        starts_at: at(26, 10, 0),
        status,
        created_at: at(24, 10, 0),
        reminder_sent_at: None,
        moved_from: None,
        follow_up: Default::default(),
    }
}

#[test]
fn the_funnel_times_shares_and_costs_follow_the_records() {
    let period = Period::new(
        NaiveDate::from_ymd_opt(2026, 11, 23).unwrap(),
        NaiveDate::from_ymd_opt(2026, 11, 25).unwrap(),
        chrono_tz::UTC,
    )
    .unwrap();
    let (a, b, c, d) = ("34600000001", "34600000002", "34600000003", "34600000004");
    use MessageRole::{Ai, Human};
    let inputs = Inputs {
        messages: vec![
            message(a, Human, "Busco piso", None, &[], at(23, 10, 0)),
            message(
                a,
                Ai,
                "",
                Some("primary_assistant"),
                &["ToProperty_Search_Assistant"],
                at(23, 10, 0),
            ),
            message(
                a,
                Ai,
                "",
                Some("property_search_assistant"),
                &["search_properties"],
                at(23, 10, 0),
            ),
            message(
                a,
                Ai,
                "Tengo tres pisos",
                Some("property_search_assistant"),
                &[],
                at(23, 10, 1),
            ),
            message(b, Human, "Hola", None, &[], at(23, 11, 0)),
            message(
                b,
                Ai,
                "Hola, ¿qué buscas?",
                Some("primary_assistant"),
                &[],
                at(23, 11, 3),
            ),
            message(c, Human, "¿El P-1 sigue?", None, &[], at(24, 9, 0)),
            message(
                c,
                Ai,
                "",
                Some("property_assistant"),
                &["get_property_details"],
                at(24, 9, 0),
            ),
            message(c, Ai, "Sí", Some("property_assistant"), &[], at(24, 9, 2)),
            message(a, Human, "Otra vez", None, &[], at(25, 9, 0)),
        ],
        calls: vec![
            call("openai", "gpt-4o-mini", (1_000_000, 0), at(23, 10, 0)),
            call("anthropic", "claude-x", (0, 1_000), at(24, 9, 0)),
            call(FAST_PATH, "-", (0, 0), at(23, 10, 0)),
            call(OFFLINE, "-", (0, 0), at(24, 9, 0)),
        ],
        // d booked but never wrote in the period: outside the cohort.
        appointments: vec![
            appointment(a, AppointmentStatus::Done),
            appointment(c, AppointmentStatus::Booked),
            appointment(d, AppointmentStatus::Done),
        ],
        offers: Vec::new(),
        handoff_events: vec![
            Event::new(
                &WaId::parse(b).unwrap(),
                BusinessEvent::HandoffRequested {
                    reason: "persona".into(),
                },
                at(23, 11, 5),
            ),
            Event::new(
                &WaId::parse(b).unwrap(),
                BusinessEvent::HandoffTaken {
                    operator: "lucia".into(),
                    until: at(23, 13, 0),
                },
                at(23, 11, 15),
            ),
        ],
        failed_deliveries: 2,
        opt_outs: 1,
        lead_sources: [(WaId::parse(b).unwrap(), "idealista".to_owned())].into(),
        billed: Vec::new(),
        cut: Vec::new(),
    };
    let prices = Prices::parse("gpt-4o-mini=0.15/0.60").unwrap();
    let report = compute(&inputs, &period, &prices);
    let counts: Vec<u64> = report.funnel.iter().map(|s| s.count).collect();
    assert_eq!(counts, [3, 2, 2, 1, 0]);
    assert_eq!(report.funnel[0].rate, None);
    assert!((report.funnel[1].rate.unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(report.funnel[4].rate, Some(0.0));
    // b came from Idealista; the others wrote first. Each step's customers are split between
    // the sources, none lost or counted twice.
    let sources: Vec<&str> = report
        .funnel_by_source
        .iter()
        .map(|s| s.source.as_str())
        .collect();
    assert_eq!(sources, ["idealista", "organic"]);
    assert_eq!(report.funnel_by_source[0].counts[0], 1);
    assert_eq!(report.funnel_by_source[1].counts[0], 2);
    for (step, total) in counts.iter().enumerate() {
        let split: u64 = report.funnel_by_source.iter().map(|s| s.counts[step]).sum();
        assert_eq!(split, *total, "step {step}");
    }
    let per_day: Vec<u64> = report.days.iter().map(|d| d.conversations).collect();
    assert_eq!(per_day, [2, 1, 1]);
    // a: 60 s, b: 180 s, c: 120 s.
    assert_eq!(report.first_reply_median, Some(120));
    assert_eq!(report.first_reply_samples, 3);
    assert_eq!(report.person_median, Some(600));
    assert_eq!(
        (
            report.steps.model,
            report.steps.fast_path,
            report.steps.offline
        ),
        (2, 1, 1)
    );
    assert_eq!(report.steps.fast_path_share, Some(0.25));
    assert_eq!(report.providers, ["anthropic", "openai"]);
    assert_eq!(report.days[0].cost.get("openai"), Some(&0.15));
    assert_eq!(report.days[1].tokens.get("anthropic"), Some(&1_000));
    assert_eq!(report.unpriced, ["claude-x"]);
    let names: Vec<&str> = report
        .turns_per_assistant
        .iter()
        .map(|(a, _)| a.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "primary_assistant",
            "property_assistant",
            "property_search_assistant"
        ],
        "two steps each: ties by name"
    );
    let csv = super::csv(&report, "funnel").unwrap();
    assert!(
        csv.starts_with("step,customers,rate_of_previous\ninquiry,3,\nqualified,2,0.6667\n"),
        "{csv}"
    );
    assert!(super::csv(&report, "nope").is_none());
}

#[test]
fn prices_and_periods_refuse_what_they_cannot_read() {
    assert!(Prices::parse("").unwrap().is_empty());
    assert!(Prices::parse("gpt=1").is_err());
    assert!(Prices::parse("gpt=a/b").is_err());
    assert!(Prices::parse("=1/2").is_err());
    assert!(Prices::parse("gpt=-1/2").is_err());
    let day = |d| NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
    assert!(Period::new(day(20), day(10), chrono_tz::UTC).is_err());
    assert!(
        Period::new(
            day(1),
            day(1) + chrono::Duration::days(MAX_DAYS),
            chrono_tz::UTC
        )
        .is_err()
    );
    let madrid = Period::new(day(23), day(23), chrono_tz::Europe::Madrid).unwrap();
    assert_eq!(madrid.from(), at(22, 23, 0), "local midnight");
    assert_eq!(madrid.days().len(), 1);
}

#[test]
fn the_deployment_is_offline_from_the_first_offline_step_after_the_last_answer() {
    let failed = |when| LlmCall {
        outcome: CallOutcome::Unavailable,
        ..call("openai", "gpt-test", (0, 0), when)
    };
    // Two instances' records, out of order: answers until 10:00, then a failure and offline
    // steps from 10:05 (the fast path's steps say nothing either way).
    let calls = vec![
        call(OFFLINE, "", (0, 0), at(27, 10, 30)),
        call("openai", "gpt-test", (10, 5), at(27, 9, 0)),
        call(OFFLINE, "", (0, 0), at(27, 9, 30)),
        call("anthropic", "claude", (10, 5), at(27, 10, 0)),
        failed(at(27, 10, 4)),
        call(FAST_PATH, "", (0, 0), at(27, 10, 20)),
        call(OFFLINE, "", (0, 0), at(27, 10, 5)),
    ];
    assert_eq!(
        offline_spell(&calls),
        Some(OfflineSpell {
            since: at(27, 10, 5),
            began_in_period: true,
            last: at(27, 10, 30),
            steps: 2,
        })
    );

    // A model answers again: the spell is over.
    let mut back = calls.clone();
    back.push(call("openai", "gpt-test", (10, 5), at(27, 10, 31)));
    assert_eq!(offline_spell(&back), None);

    // No model answered in the period at all: offline since at least its first offline step.
    let only_offline = vec![
        call(OFFLINE, "", (0, 0), at(27, 8, 0)),
        failed(at(27, 7, 59)),
        call(OFFLINE, "", (0, 0), at(27, 8, 1)),
    ];
    let spell = offline_spell(&only_offline).unwrap();
    assert_eq!(
        (spell.since, spell.began_in_period, spell.steps),
        (at(27, 8, 0), false, 2)
    );

    // Nothing served offline: no spell.
    assert_eq!(
        offline_spell(&[call("openai", "gpt-test", (1, 1), at(27, 9, 0))]),
        None
    );
    assert_eq!(offline_spell(&[]), None);
}
