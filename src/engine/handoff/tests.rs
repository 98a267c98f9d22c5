use std::sync::Mutex;

use chrono::TimeZone as _;

use super::*;
use crate::business::Business;
use crate::domain::{Content, Role, WaMessageId};
use crate::engine::Tool as _;
use crate::store::{InboxEntry, InboxStatus, MemoryStore, OutboxEntry, Store};
use crate::templates::Purpose;
use serde_json::json;

/// The staff of a test, as the business data would give them.
struct Roster(Mutex<Vec<StaffOnCall>>);

#[async_trait]
impl StaffRoster for Roster {
    async fn handoff_staff(&self) -> crate::store::StoreResult<Vec<StaffOnCall>> {
        Ok(self.0.lock().unwrap().clone())
    }
}

fn wa(id: &str) -> WaId {
    WaId::parse(id).unwrap()
}

/// "Hola" from `wa_id` to the business number `PN-1`.
fn hola(wamid: &str, wa_id: &str) -> InboxEntry {
    InboxEntry {
        wamid: WaMessageId::parse(wamid).unwrap(),
        wa_id: wa(wa_id),
        phone_number_id: "PN-1".into(),
        kind: "text".into(),
        text: Some("Hola".into()),
        payload: "{}".into(),
        content: Content::Text {
            body: "Hola".into(),
        },
        context_id: None,
        sent_at: None,
        status: InboxStatus::Pending,
        received_at: Utc::now(),
        attempts: 0,
    }
}

fn member(id: &str, name: &str, wa_id: &str) -> StaffOnCall {
    StaffOnCall {
        id: id.into(),
        name: name.into(),
        wa_id: wa(wa_id),
        hours: None,
        works_holidays: false,
    }
}

/// Madrid local time → UTC.
fn madrid(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
    chrono_tz::Europe::Madrid
        .with_ymd_and_hms(y, m, d, h, min, 0)
        .unwrap()
        .to_utc()
}

/// Weekdays 9:00–14:00 and 16:00–20:00, Saturday mornings.
fn business() -> Business {
    crate::business::parse(
        r#"
contact = ["Tel. 960 000 000"]
[hours]
monday = ["9:00-14:00", "16:00-20:00"]
tuesday = ["9:00-14:00", "16:00-20:00"]
wednesday = ["9:00-14:00", "16:00-20:00"]
thursday = ["9:00-14:00", "16:00-20:00"]
friday = ["9:00-14:00", "16:00-20:00"]
saturday = ["10:00-13:30"]
"#,
    )
    .unwrap()
}

const CUSTOMER: &str = "34611000777";

struct Desk {
    store: Arc<dyn Store>,
    desk: HandoffDesk,
}

impl Desk {
    async fn new(staff: Vec<StaffOnCall>) -> Self {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        // The customer wrote to the business number `PN-1`.
        store
            .insert_inbox(&[hola("wamid.customer-1", CUSTOMER)])
            .await
            .unwrap();
        let desk = HandoffDesk::new(
            store.clone(),
            Some(Arc::new(Roster(Mutex::new(staff)))),
            HandoffSettings {
                public_url: Some("https://zaguan.example/".parse().unwrap()),
                ..HandoffSettings::default()
            },
        );
        Self { store, desk }
    }

    /// What was queued to `staff`'s number.
    async fn notices(&self, staff: &str) -> Vec<OutboxEntry> {
        self.store.unsent_outbox(&wa(staff)).await.unwrap()
    }

    async fn request(&self, reason: &str, key: &str, now: DateTime<Utc>) -> HandoffOutcome {
        self.request_in(&business(), reason, key, now).await
    }

    /// The customer asks for a person at `now`, in `business`'s hours.
    async fn request_in(
        &self,
        business: &Business,
        reason: &str,
        key: &str,
        now: DateTime<Utc>,
    ) -> HandoffOutcome {
        self.desk
            .request(&wa(CUSTOMER), reason, key, business, now)
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn in_working_hours_the_first_on_duty_is_told_at_once_with_who_what_and_a_link() {
    let desk = Desk::new(vec![
        member("A-01", "Lucía", "34699000001"),
        member("A-02", "Javier", "34699000002"),
    ])
    .await;
    // Friday 27 November 2026, 10:00.
    let now = madrid(2026, 11, 27, 10, 0);
    assert_eq!(
        desk.request("Quiere negociar el precio", "call_1", now)
            .await,
        HandoffOutcome::Told
    );
    let sent = desk.notices("34699000001").await;
    assert_eq!(sent.len(), 1);
    let notice = &sent[0];
    assert!(notice.body.contains("+34611000777"), "{}", notice.body);
    assert!(
        notice.body.contains("Motivo: Quiere negociar el precio"),
        "{}",
        notice.body
    );
    assert!(
        notice
            .body
            .contains("https://zaguan.example/console/conversations/34611000777"),
        "{}",
        notice.body
    );
    assert_eq!(notice.phone_number_id.as_deref(), Some("PN-1"));
    // Lucía never wrote to the business number: outside her window, the template goes.
    let template = notice
        .template
        .as_ref()
        .expect("a template outside the window");
    assert_eq!(template.name, "staff_handoff");
    assert_eq!(template.parameters[1], "Quiere negociar el precio");
    assert!(desk.notices("34699000002").await.is_empty());

    // Asked again: the reason is added, nobody is told twice; the same step again adds nothing.
    assert_eq!(
        desk.request("Y que le llamen", "call_2", now).await,
        HandoffOutcome::Told
    );
    desk.request("Y que le llamen", "call_2", now).await;
    let request = desk
        .store
        .conversation(&wa(CUSTOMER))
        .await
        .unwrap()
        .unwrap()
        .handoff_requested
        .unwrap();
    assert_eq!(request.reasons.len(), 2);
    assert_eq!(
        request.reason,
        "Quiere negociar el precio · Y que le llamen"
    );
    assert_eq!(request.notified, ["A-01"]);
    assert_eq!(desk.notices("34699000001").await.len(), 1);
}

#[tokio::test]
async fn a_staff_member_who_wrote_today_gets_the_notice_as_text() {
    let desk = Desk::new(vec![member("A-01", "Lucía", "34699000001")]).await;
    let now = madrid(2026, 11, 27, 10, 0);
    desk.store
        .record_contact(&crate::store::ContactSeen {
            wa_id: wa("34699000001"),
            phone: None,
            user_id: None,
            name: Some("Lucía".into()),
            username: None,
            seen_at: now - chrono::Duration::hours(2),
        })
        .await
        .unwrap();
    desk.request("Quiere hablar con alguien", "call_1", now)
        .await;
    let sent = desk.notices("34699000001").await;
    assert_eq!(sent.len(), 1);
    assert!(sent[0].template.is_none(), "inside the window: text");
}

#[tokio::test]
async fn nobody_taking_it_tells_the_next_one_after_the_sla_then_all_of_them() {
    let desk = Desk::new(vec![
        member("A-01", "Lucía", "34699000001"),
        member("A-02", "Javier", "34699000002"),
        member("A-03", "Marta", "34699000003"),
    ])
    .await;
    let start = madrid(2026, 11, 27, 10, 0);
    desk.request("Quiere una persona", "call_1", start).await;
    // Before the SLA: nothing more.
    assert_eq!(
        desk.desk
            .escalate(&business(), start + chrono::Duration::minutes(14))
            .await
            .unwrap(),
        0
    );
    let after = start + chrono::Duration::minutes(15);
    assert_eq!(desk.desk.escalate(&business(), after).await.unwrap(), 1);
    assert_eq!(desk.notices("34699000002").await.len(), 1);
    assert!(desk.notices("34699000003").await.is_empty());
    assert!(
        desk.notices("34699000002").await[0]
            .body
            .contains("Sigue esperando")
    );
    // Another 15 minutes: all of them (Lucía and Javier again, Marta for the first time).
    let later = after + chrono::Duration::minutes(15);
    desk.desk.escalate(&business(), later).await.unwrap();
    assert_eq!(desk.notices("34699000001").await.len(), 2);
    assert_eq!(desk.notices("34699000002").await.len(), 2);
    assert_eq!(desk.notices("34699000003").await.len(), 1);
    // And then no more.
    assert_eq!(
        desk.desk
            .escalate(&business(), later + chrono::Duration::hours(3))
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn taking_the_conversation_stops_the_escalation() {
    let desk = Desk::new(vec![
        member("A-01", "Lucía", "34699000001"),
        member("A-02", "Javier", "34699000002"),
    ])
    .await;
    let start = madrid(2026, 11, 27, 10, 0);
    desk.request("Quiere una persona", "call_1", start).await;
    take(
        desk.store.as_ref(),
        &wa(CUSTOMER),
        "Lucía",
        DEFAULT_HANDOFF_TTL,
        start + chrono::Duration::minutes(5),
    )
    .await
    .unwrap();
    desk.desk
        .escalate(&business(), start + chrono::Duration::minutes(20))
        .await
        .unwrap();
    assert!(desk.notices("34699000002").await.is_empty());
}

#[tokio::test]
async fn after_hours_nobody_is_woken_and_the_customer_hears_when_the_office_opens() {
    let desk = Desk::new(vec![member("A-01", "Lucía", "34699000001")]).await;
    // Saturday 28 November 2026, 23:00: next opening Monday 9:00.
    let now = madrid(2026, 11, 28, 23, 0);
    let outcome = desk.request("Quiere una persona", "call_1", now).await;
    assert_eq!(
        outcome,
        HandoffOutcome::AfterHours {
            opens_at: madrid(2026, 11, 30, 9, 0)
        }
    );
    let said = outcome.customer_text(
        Some("es"),
        &business(),
        None,
        chrono_tz::Europe::Madrid,
        now,
    );
    assert!(said.contains("el lunes 30 a partir de las 9:00"), "{said}");
    let english = outcome.customer_text(
        Some("en"),
        &business(),
        None,
        chrono_tz::Europe::Madrid,
        now,
    );
    assert!(
        english.contains("on Monday the 30th from 9:00"),
        "{english}"
    );
    assert!(desk.notices("34699000001").await.is_empty());
    // Sunday: still nothing. Monday at 9:00: Lucía is told.
    desk.desk
        .escalate(&business(), madrid(2026, 11, 29, 12, 0))
        .await
        .unwrap();
    assert!(desk.notices("34699000001").await.is_empty());
    desk.desk
        .escalate(&business(), madrid(2026, 11, 30, 9, 0))
        .await
        .unwrap();
    assert_eq!(desk.notices("34699000001").await.len(), 1);
}

#[tokio::test]
async fn a_staff_member_with_hours_of_their_own_is_told_only_then() {
    let mut javier = member("A-02", "Javier", "34699000002");
    javier.hours = Some(
        crate::business::week_from(&[("friday".to_owned(), vec!["16:00-20:00".to_owned()])].into())
            .unwrap(),
    );
    let desk = Desk::new(vec![javier]).await;
    // Friday 10:00: the agency is open, Javier is not on duty until 16:00.
    let now = madrid(2026, 11, 27, 10, 0);
    assert_eq!(
        desk.request("Quiere una persona", "call_1", now).await,
        HandoffOutcome::AfterHours {
            opens_at: madrid(2026, 11, 27, 16, 0)
        }
    );
    assert!(desk.notices("34699000002").await.is_empty());
}

#[tokio::test]
async fn without_staff_to_tell_the_customer_gets_the_contact_line() {
    let desk = Desk::new(Vec::new()).await;
    let now = madrid(2026, 11, 27, 10, 0);
    let outcome = desk.request("Quiere una persona", "call_1", now).await;
    assert_eq!(outcome, HandoffOutcome::Unreachable);
    let said = outcome.customer_text(
        Some("es"),
        &business(),
        None,
        chrono_tz::Europe::Madrid,
        now,
    );
    assert!(said.ends_with("Tel. 960 000 000"), "{said}");
    // Still recorded for the console.
    let conversation = desk
        .store
        .conversation(&wa(CUSTOMER))
        .await
        .unwrap()
        .unwrap();
    assert!(conversation.handoff_requested.is_some());
}

#[tokio::test]
async fn request_human_tells_the_model_the_truth_and_records_the_event() {
    let desk = Desk::new(vec![member("A-01", "Lucía", "34699000001")]).await;
    let tool = RequestHuman::new(Arc::new(desk.desk));
    let mut context = ToolContext::new(wa(CUSTOMER), Role::Prospect, madrid(2026, 11, 28, 23, 0));
    context.business = Arc::new(business());
    context.call_id = "call_9".into();
    let output = tool
        .run(json!({"reason": "Quiere negociar el precio"}), &context)
        .await
        .unwrap();
    assert!(
        output.text.contains("the office is closed now"),
        "{}",
        output.text
    );
    assert_eq!(
        output.events,
        [BusinessEvent::HandoffRequested {
            reason: "Quiere negociar el precio".into()
        }]
    );
    assert!(matches!(
        tool.run(json!({"reason": " "}), &context).await,
        Err(ToolError::InvalidArgs(_))
    ));
}

impl Desk {
    /// A second customer who wrote to `PN-1`, so notices about them go from there too.
    async fn customer(&self, wa_id: &str) {
        let entry = hola(&format!("wamid.{wa_id}"), wa_id);
        self.store.insert_inbox(&[entry]).await.unwrap();
    }

    async fn request_of(&self, customer: &str) -> crate::store::HandoffRequest {
        self.store
            .conversation(&wa(customer))
            .await
            .unwrap()
            .unwrap()
            .handoff_requested
            .unwrap()
    }

    /// `staff` wrote to the business `ago` before `now`: their 24-hour window is open.
    async fn wrote(&self, staff: &str, at: DateTime<Utc>) {
        self.store
            .record_contact(&crate::store::ContactSeen {
                wa_id: wa(staff),
                phone: None,
                user_id: None,
                name: None,
                username: None,
                seen_at: at,
            })
            .await
            .unwrap();
    }

    /// Without any staff template: a member outside their window cannot be told.
    fn without_templates(&self) {
        self.desk
            .use_templates(Arc::new(crate::templates::Templates::default()));
    }
}

#[tokio::test]
async fn a_member_who_cannot_be_reached_is_passed_over_and_the_customer_hears_only_the_truth() {
    let desk = Desk::new(vec![
        member("A-01", "Lucía", "34699000001"),
        member("A-02", "Javier", "34699000002"),
    ])
    .await;
    desk.without_templates();
    let now = madrid(2026, 11, 27, 10, 0);
    // Javier wrote this morning; Lucía did not, and there is no template for her.
    desk.wrote("34699000002", now - chrono::Duration::hours(1))
        .await;
    assert_eq!(
        desk.request("Quiere una persona", "call_1", now).await,
        HandoffOutcome::Told
    );
    assert!(desk.notices("34699000001").await.is_empty());
    assert_eq!(desk.notices("34699000002").await.len(), 1);
    let request = desk.request_of(CUSTOMER).await;
    assert_eq!(request.notified, ["A-02"]);
    assert!(request.failed_for(&wa("34699000001")));
    assert!(
        request.failures[0].reason.contains("no approved template"),
        "{:?}",
        request.failures
    );
}

#[tokio::test]
async fn when_nobody_can_be_reached_the_customer_is_not_told_a_person_knows() {
    let desk = Desk::new(vec![
        member("A-01", "Lucía", "34699000001"),
        member("A-02", "Javier", "34699000002"),
    ])
    .await;
    desk.without_templates();
    let now = madrid(2026, 11, 27, 10, 0);
    let outcome = desk.request("Quiere una persona", "call_1", now).await;
    assert_eq!(outcome, HandoffOutcome::Unreachable);
    let said = outcome.customer_text(
        Some("es"),
        &business(),
        None,
        chrono_tz::Europe::Madrid,
        now,
    );
    assert_eq!(
        said,
        "Lo siento, desde este chat no puedo pasar tu petición a una persona. Puedes contactar \
         directamente con la agencia: Tel. 960 000 000"
    );
    // Asked again a minute later: still the truth, not «he avisado».
    assert_eq!(
        desk.request(
            "Sigue queriendo una persona",
            "call_2",
            now + chrono::Duration::minutes(1)
        )
        .await,
        HandoffOutcome::Unreachable
    );
    // The request still waits in the queue, with why each notice failed.
    let request = desk.request_of(CUSTOMER).await;
    assert_eq!(request.failures.len(), 2);
    assert!(request.notified.is_empty());
    assert!(desk.notices("34699000001").await.is_empty());
    assert!(desk.notices("34699000002").await.is_empty());
}

#[tokio::test]
async fn a_refused_notice_goes_back_to_the_desk_and_the_next_member_is_told_at_once() {
    let desk = Desk::new(vec![
        member("A-01", "Lucía", "34699000001"),
        member("A-02", "Javier", "34699000002"),
    ])
    .await;
    let now = madrid(2026, 11, 27, 10, 0);
    assert_eq!(
        desk.request("Quiere una persona", "call_1", now).await,
        HandoffOutcome::Told
    );
    let sent = desk.notices("34699000001").await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].purpose, Some(Purpose::StaffHandoff));
    assert_eq!(sent[0].about, [wa(CUSTOMER)]);
    // Meta refuses Lucía's notice (her number is not on WhatsApp).
    let refused = crate::domain::GraphError {
        code: Some(131026),
        title: None,
        message: Some("Message undeliverable".into()),
        error_data: None,
    };
    let later = now + chrono::Duration::seconds(30);
    assert!(
        crate::outbound::failures::undelivered(desk.store.as_ref(), &sent[0], &refused, later)
            .await
            .unwrap()
    );
    // Her own conversation is not flagged: she is not the one waiting.
    let hers = desk.store.conversation(&wa("34699000001")).await.unwrap();
    assert!(hers.is_none_or(|c| c.handoff_requested.is_none()));
    // The next pass tells Javier, long before the SLA.
    assert_eq!(desk.desk.escalate(&business(), later).await.unwrap(), 1);
    assert_eq!(desk.notices("34699000002").await.len(), 1);
    let request = desk.request_of(CUSTOMER).await;
    assert_eq!(
        request.failures[0].reason,
        "WhatsApp refused it (131026: Message undeliverable)"
    );
    // Asked again: Javier's notice is on its way, so a person was told.
    assert_eq!(
        desk.request("¿Hola?", "call_2", later).await,
        HandoffOutcome::Told
    );
}

#[tokio::test]
async fn requests_within_the_digest_time_reach_a_member_as_one_message_listing_each_customer() {
    let desk = Desk::new(vec![member("A-01", "Lucía", "34699000001")]).await;
    // Monday 30 November at 9:00, the office opens after a weekend of requests.
    let opening = madrid(2026, 11, 30, 9, 0);
    let customers: Vec<String> = (0..40).map(|n| format!("346110010{n:02}")).collect();
    for customer in &customers {
        desk.customer(customer).await;
        desk.desk
            .request(
                &wa(customer),
                "Quiere una persona",
                &format!("asked:{customer}"),
                &business(),
                madrid(2026, 11, 28, 22, 0),
            )
            .await
            .unwrap();
    }
    assert!(desk.notices("34699000001").await.is_empty(), "after hours");
    desk.desk.escalate(&business(), opening).await.unwrap();
    // One message now, with every customer of the pass in it.
    let first = desk.notices("34699000001").await;
    assert_eq!(first.len(), 1, "{first:#?}");
    // Within two minutes, more passes send nothing more.
    for seconds in [5, 30, 90, 119] {
        desk.desk
            .escalate(&business(), opening + chrono::Duration::seconds(seconds))
            .await
            .unwrap();
    }
    let all: Vec<OutboxEntry> = desk.notices("34699000001").await;
    let listed: usize = all
        .iter()
        .map(|n| {
            n.about
                .iter()
                .filter(|c| customers.contains(&c.as_str().to_owned()))
                .count()
        })
        .sum();
    assert!(all.len() <= 2, "{} messages", all.len());
    desk.desk
        .escalate(&business(), opening + chrono::Duration::seconds(121))
        .await
        .unwrap();
    let all: Vec<OutboxEntry> = desk.notices("34699000001").await;
    let listed_after: usize = all.iter().map(|n| n.about.len()).sum();
    assert!(listed_after >= listed);
    assert_eq!(
        listed_after, 40,
        "every customer in one message or the next"
    );
    assert!(all.len() <= 3, "{} messages for 40 customers", all.len());
    let digest = all.iter().find(|n| n.about.len() > 1).expect("a digest");
    assert!(
        digest.body.contains("clientes esperan a una persona"),
        "{}",
        digest.body
    );
    assert!(
        digest
            .body
            .contains("Cola: https://zaguan.example/console/queue"),
        "{}",
        digest.body
    );
    assert!(digest.body.contains("… y "), "{}", digest.body);
    assert!(digest.body.chars().count() < 4096);
}

#[tokio::test]
async fn a_notice_step_replayed_or_run_by_two_instances_tells_once() {
    let desk = Desk::new(vec![member("A-01", "Lucía", "34699000001")]).await;
    // A second instance: its own desk over the same store.
    let other = HandoffDesk::new(
        desk.store.clone(),
        Some(Arc::new(Roster(Mutex::new(vec![member(
            "A-01",
            "Lucía",
            "34699000001",
        )])))),
        HandoffSettings {
            public_url: Some("https://zaguan.example/".parse().unwrap()),
            ..HandoffSettings::default()
        },
    );
    let start = madrid(2026, 11, 27, 10, 0);
    // The request is recorded while nobody is on duty's notice is due yet.
    desk.store
        .request_handoff(
            &wa(CUSTOMER),
            &crate::store::HandoffReason {
                at: start,
                reason: "Quiere una persona".into(),
                key: "asked:1".into(),
            },
            Some(start),
        )
        .await
        .unwrap();
    let request = desk.request_of(CUSTOMER).await;
    // Both instances run the due step, a second apart; the first one's step is then replayed
    // as after a crash before it recorded the level.
    desk.desk
        .escalate(&business(), start + chrono::Duration::seconds(1))
        .await
        .unwrap();
    other
        .escalate(&business(), start + chrono::Duration::seconds(2))
        .await
        .unwrap();
    let (_, paged) = desk
        .desk
        .notify(
            &wa(CUSTOMER),
            &request,
            &business(),
            &[member("A-01", "Lucía", "34699000001")],
            start + chrono::Duration::seconds(3),
        )
        .await
        .unwrap();
    for member in &paged {
        desk.desk
            .flush(member, start + chrono::Duration::seconds(3))
            .await
            .unwrap();
    }
    assert_eq!(desk.notices("34699000001").await.len(), 1);
}

#[tokio::test]
async fn staff_with_hours_of_their_own_keep_the_agencys_holidays_unless_they_work_them() {
    let own_hours = || {
        crate::business::week_from(
            &crate::business::WEEKDAYS[..5]
                .iter()
                .map(|day| ((*day).to_owned(), vec!["9:00-14:00".to_owned()]))
                .collect(),
        )
        .unwrap()
    };
    let mut javier = member("A-02", "Javier", "34699000002");
    javier.hours = Some(own_hours());
    let mut business = business();
    business.holidays.push(crate::business::Holiday {
        date: chrono::NaiveDate::from_ymd_opt(2026, 12, 8).unwrap(),
        name: "Inmaculada".into(),
    });
    // Tuesday 8 December, a holiday, 10:00: Javier's own hours would have him on duty.
    let now = madrid(2026, 12, 8, 10, 0);
    let desk = Desk::new(vec![javier.clone()]).await;
    let outcome = desk
        .request_in(&business, "Quiere una persona", "call_1", now)
        .await;
    assert_eq!(
        outcome,
        HandoffOutcome::AfterHours {
            opens_at: madrid(2026, 12, 9, 9, 0)
        }
    );
    assert!(desk.notices("34699000002").await.is_empty());
    // One who works holidays is told.
    javier.works_holidays = true;
    let desk = Desk::new(vec![javier]).await;
    let outcome = desk
        .request_in(&business, "Quiere una persona", "call_1", now)
        .await;
    assert_eq!(outcome, HandoffOutcome::Told);
    assert_eq!(desk.notices("34699000002").await.len(), 1);
}

#[tokio::test]
async fn a_season_of_the_business_file_sets_who_is_on_duty() {
    let business = crate::business::parse(
        r#"
[hours]
monday = ["9:00-14:00", "16:00-20:00"]
tuesday = ["9:00-14:00", "16:00-20:00"]
wednesday = ["9:00-14:00", "16:00-20:00"]
thursday = ["9:00-14:00", "16:00-20:00"]
friday = ["9:00-14:00", "16:00-20:00"]

[[seasons]]
name = "verano"
from = "07-01"
to = "08-31"
hours = { monday = ["8:00-15:00"], tuesday = ["8:00-15:00"], wednesday = ["8:00-15:00"], thursday = ["8:00-15:00"], friday = ["8:00-15:00"] }
"#,
    )
    .unwrap();
    let desk = Desk::new(vec![member("A-01", "Lucía", "34699000001")]).await;
    // Wednesday 15 July 2026, 17:00: open the rest of the year, closed in summer.
    let outcome = desk
        .request_in(
            &business,
            "Quiere una persona",
            "call_1",
            madrid(2026, 7, 15, 17, 0),
        )
        .await;
    assert_eq!(
        outcome,
        HandoffOutcome::AfterHours {
            opens_at: madrid(2026, 7, 16, 8, 0)
        }
    );
}
