//! A scripted week of demo traffic, written straight into the stores as the service would have
//! written it: customers writing, assistants answering (some by the fast path), searches,
//! visits booked and held, offers, handoffs taken, an opt-out. What the reports must find is
//! counted here from the script itself, not by the report's code.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use zaguan::domain::{CallOutcome, LlmCall, MessageRole, ToolCall, WaId};
use zaguan::realestate::RealEstateStore;
use zaguan::realestate::model::{Appointment, AppointmentStatus, Offer, OfferStatus};
use zaguan::store::{BusinessEvent, Event, NewMessage, OptOut, Store};

/// What a week of [`week`] holds, step by step.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Expected {
    pub inquiry: u64,
    pub qualified: u64,
    pub visit_booked: u64,
    pub visit_attended: u64,
    pub offer: u64,
    pub opt_outs: u64,
    pub fast_path: u64,
    pub model: u64,
    pub conversations_per_day: Vec<u64>,
}

fn message(
    wa_id: &WaId,
    role: MessageRole,
    text: &str,
    agent: Option<&str>,
    tools: &[&str],
    at: DateTime<Utc>,
) -> NewMessage {
    NewMessage {
        wa_id: wa_id.clone(),
        role,
        content: text.into(),
        agent: agent.map(Into::into),
        tool_calls: tools
            .iter()
            .map(|name| ToolCall {
                id: format!("call_{name}"),
                name: (*name).into(),
                args: json!({}).into(),
            })
            .collect(),
        tool_call_id: None,
        wamids: Vec::new(),
        attachments: Vec::new(),
        at,
    }
}

fn call(wa_id: &WaId, provider: &str, tokens: (u64, u64), at: DateTime<Utc>) -> LlmCall {
    LlmCall {
        conversation: Some(wa_id.as_str().to_owned()),
        agent: "primary_assistant".into(),
        provider: provider.into(),
        model: if provider == "openai" {
            "gpt-4o-mini".into()
        } else {
            "-".into()
        },
        outcome: CallOutcome::Ok,
        input_tokens: tokens.0,
        output_tokens: tokens.1,
        latency: std::time::Duration::from_millis(800),
        error: None,
        at,
    }
}

/// Seven days up to `today` (00:00 UTC of each day, plus an hour): 3 to 5 customers a day.
pub async fn week(
    store: &dyn Store,
    realestate: &dyn RealEstateStore,
    today: chrono::NaiveDate,
) -> Expected {
    let mut expected = Expected::default();
    for d in 0..7u32 {
        let day = today - Duration::days(6 - i64::from(d));
        let start = day.and_hms_opt(1, 0, 0).unwrap().and_utc();
        let customers = 3 + d % 3;
        expected.conversations_per_day.push(u64::from(customers));
        for k in 0..customers {
            let wa_id = WaId::parse(&format!("3460010{d}{k:02}")).unwrap();
            let at = start + Duration::minutes(i64::from(k) * 7);
            store
                .append_message(message(
                    &wa_id,
                    MessageRole::Human,
                    "Hola, busco piso en Valencia",
                    None,
                    &[],
                    at,
                ))
                .await
                .unwrap();
            expected.inquiry += 1;
            let qualified = k % 2 == 0;
            let mut calls = vec![call(
                &wa_id,
                "openai",
                (1_200, 150),
                at + Duration::seconds(2),
            )];
            expected.model += 1;
            if qualified {
                store
                    .append_message(message(
                        &wa_id,
                        MessageRole::Ai,
                        "",
                        Some("property_search_assistant"),
                        &["search_properties"],
                        at + Duration::seconds(3),
                    ))
                    .await
                    .unwrap();
                expected.qualified += 1;
            } else {
                calls.push(call(&wa_id, "fast_path", (0, 0), at + Duration::seconds(1)));
                expected.fast_path += 1;
            }
            store
                .append_message(message(
                    &wa_id,
                    MessageRole::Ai,
                    "Tengo tres pisos que encajan.",
                    Some("primary_assistant"),
                    &[],
                    at + Duration::seconds(30),
                ))
                .await
                .unwrap();
            store.insert_llm_calls(&calls).await.unwrap();
            if k == 0 {
                let attended = d < 4;
                realestate
                    .save_appointment(&Appointment {
                        id: format!("A-W{d}"),
                        property_id: "P-1001".into(),
                        slot_id: format!("S-W{d}"),
                        wa_id: wa_id.clone(),
                        starts_at: at + Duration::hours(20),
                        status: AppointmentStatus::Booked,
                        created_at: at + Duration::minutes(2),
                        reminder_sent_at: None,
                        moved_from: None,
                        follow_up: Default::default(),
                    })
                    .await
                    .unwrap();
                if attended {
                    // As the agent's «Realizada» records it: the funnel's "visited" step is
                    // read from what outcomes write.
                    let recorded = zaguan::realestate::follow_up::record_outcome(
                        realestate,
                        store,
                        &format!("A-W{d}"),
                        zaguan::realestate::follow_up::Outcome::Done,
                        "agent:A-01",
                        at + Duration::hours(21),
                    )
                    .await
                    .unwrap();
                    assert!(matches!(
                        recorded,
                        Some(zaguan::realestate::Settled::Now(_))
                    ));
                }
                expected.visit_booked += 1;
                expected.visit_attended += u64::from(attended);
                if d % 2 == 0 {
                    realestate
                        .upsert_offers(&[Offer {
                            id: format!("F-W{d}"),
                            property_id: "P-1001".into(),
                            wa_id: wa_id.clone(),
                            amount: 180_000 + u64::from(d) * 1_000,
                            currency: "EUR".into(),
                            conditions: None,
                            status: OfferStatus::Submitted,
                            created_at: at + Duration::minutes(3),
                            answer: Default::default(),
                        }])
                        .await
                        .unwrap();
                    expected.offer += 1;
                }
            }
            if k == 1 {
                // Asked for a person; an operator took it five minutes later.
                store
                    .insert_events(&[
                        Event::new(
                            &wa_id,
                            BusinessEvent::HandoffRequested {
                                reason: "Quiere hablar con una persona".into(),
                            },
                            at + Duration::minutes(1),
                        ),
                        Event::new(
                            &wa_id,
                            BusinessEvent::HandoffTaken {
                                operator: "lucia".into(),
                                until: at + Duration::hours(2),
                            },
                            at + Duration::minutes(6),
                        ),
                    ])
                    .await
                    .unwrap();
                if d == 2 {
                    store
                        .set_opt_out(
                            &wa_id,
                            Some(&OptOut {
                                at: at + Duration::minutes(9),
                                source: "BAJA".into(),
                            }),
                        )
                        .await
                        .unwrap();
                    expected.opt_outs += 1;
                }
            }
        }
    }
    expected
}
