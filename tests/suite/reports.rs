//! The console's reports read the deployment's records: three instances over one database show
//! the same funnel, and it equals what the scripted week wrote. On memory and on MongoDB.

use crate::common::{self, Backend, Stores, TestApp, traffic};

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Utc;
use zaguan::admin::team::OperatorRole;
use zaguan::store::Store;

/// An instance of the service over the same database: on MongoDB a client of its own.
async fn instance(stores: &Stores) -> TestApp {
    let (store, realestate, team): (
        Arc<dyn Store>,
        Arc<dyn zaguan::realestate::RealEstateStore>,
        Arc<dyn zaguan::admin::team::TeamStore>,
    ) = match stores.database_name() {
        Some(database) => {
            let store = zaguan::store::MongoStore::connect(&zaguan::store::MongoConfig {
                uri: secrecy::SecretString::from(std::env::var("MONGODB_URI").unwrap()),
                database,
            })
            .await
            .unwrap();
            let pool = store.pool().clone();
            (
                Arc::new(store),
                Arc::new(zaguan::realestate::MongoRealEstate::new(pool.clone())),
                Arc::new(zaguan::admin::team::MongoTeam::new(pool)),
            )
        }
        None => (
            stores.store.clone(),
            stores.realestate.clone(),
            stores.team.clone(),
        ),
    };
    TestApp::with_store(store)
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_realestate(realestate).with_team(team))
}

async fn csv(app: &TestApp, cookie: &str, chart: &str) -> String {
    let (status, body) = app
        .request(
            Request::get(format!("/console/reports/{chart}.csv?days=7"))
                .header("cookie", cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn three_instances_show_the_funnel_the_records_hold(backend: Backend) {
    let Some(stores) = Stores::open(backend).await else {
        return;
    };
    let expected = traffic::week(
        stores.store.as_ref(),
        stores.realestate.as_ref(),
        Utc::now().date_naive(),
    )
    .await;
    let first = instance(&stores).await;
    let (viewer, _) = first.operator("pablo", OperatorRole::Viewer).await;
    let mut funnels = Vec::new();
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let app = instance(&stores).await;
        // Signed in on this instance; the session is in the shared database.
        let cookie = common::console_sign_in(&app, "pablo", &viewer.password)
            .await
            .unwrap();
        funnels.push(csv(&app, &cookie, "funnel").await);
        outcomes.push(csv(&app, &cookie, "outcomes").await);
        let steps = csv(&app, &cookie, "steps").await;
        assert!(
            steps.contains(&format!("fast_path,{}\n", expected.fast_path))
                && steps.contains(&format!("model,{}\n", expected.model)),
            "{steps}"
        );
        let per_day = csv(&app, &cookie, "conversations").await;
        let counted: Vec<u64> = per_day
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        assert_eq!(counted, expected.conversations_per_day, "{per_day}");
    }
    assert!(funnels.iter().all(|f| f == &funnels[0]), "{funnels:?}");
    assert!(outcomes.iter().all(|o| o == &outcomes[0]), "{outcomes:?}");
    let counts: Vec<u64> = funnels[0]
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        counts,
        [
            expected.inquiry,
            expected.qualified,
            expected.visit_booked,
            expected.visit_attended,
            expected.offer
        ],
        "{}",
        funnels[0]
    );
    assert!(outcomes[0].contains(&format!("opt_outs,{}\n", expected.opt_outs)));
    assert!(
        outcomes[0].contains("time_to_person_median_seconds,300\n"),
        "{}",
        outcomes[0]
    );
    assert!(outcomes[0].contains("first_reply_median_seconds,30\n"));

    // The page draws the charts with the numbers beside them.
    let cookie = common::console_sign_in(&first, "pablo", &viewer.password)
        .await
        .unwrap();
    let (status, page) = first
        .request(
            Request::get("/console/reports")
                .header("cookie", &cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<svg id=\"funnel-chart\""));
    assert!(page.contains(&format!("<td class=\"count\">{}</td>", expected.inquiry)));
    let (status, _) = first
        .request(
            Request::get("/console/reports?from=2026-11-20&to=2026-01-01")
                .header("cookie", &cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a reversed period");
    stores.close().await;
}

#[tokio::test]
async fn memory_three_instances_show_the_funnel_the_records_hold() {
    three_instances_show_the_funnel_the_records_hold(Backend::Memory).await;
}

#[tokio::test]
async fn mongo_three_instances_show_the_funnel_the_records_hold() {
    three_instances_show_the_funnel_the_records_hold(Backend::Mongo).await;
}

/// What WhatsApp billed, from the parts Meta priced in their status webhooks: a reply, a
/// reminder and an alert delivered and billed, one delivered free, one never delivered; priced
/// per category with a country's own rate; the console shows the bill beside the model's.
async fn the_whatsapp_bill_is_what_meta_priced(backend: Backend) {
    use serde_json::json;
    use zaguan::admin::reports::{self, Period, Prices, WhatsAppPrices};
    use zaguan::domain::{WaId, WaMessageId};
    use zaguan::store::{NewOutbox, OutboxUpdate};
    use zaguan::templates::Purpose;
    let Some(stores) = Stores::open(backend).await else {
        return;
    };
    let store = stores.store.clone();
    let now = Utc::now();
    let parts = [
        ("34600111222", None, "service", true),
        ("34600111222", Some(Purpose::VisitReminder), "utility", true),
        (
            "5215512345678",
            Some(Purpose::ListingAlert),
            "marketing",
            true,
        ),
        ("34600111222", None, "service", false),
        ("34600111222", None, "", true),
    ];
    let mut statuses = Vec::new();
    for (i, (to, purpose, category, billable)) in parts.iter().enumerate() {
        let mut part = NewOutbox::text(WaId::parse(to).unwrap(), None, "hola", now);
        part.purpose = *purpose;
        let id = store.insert_outbox(&[part]).await.unwrap().remove(0);
        let wamid = format!("wamid.BILL{i}");
        store
            .update_outbox(
                &id,
                &OutboxUpdate::Sent {
                    wamid: Some(WaMessageId::parse(&wamid).unwrap()),
                },
            )
            .await
            .unwrap();
        // The last one only ever reached `sent`: Meta bills on delivery.
        let status = if category.is_empty() {
            "sent"
        } else {
            "delivered"
        };
        statuses.push(
            json!({"id": wamid, "status": status, "timestamp": now.timestamp().to_string(),
            "recipient_id": to, "pricing": {"billable": billable, "pricing_model": "PMP",
            "category": if category.is_empty() { "service" } else { category }}}),
        );
    }
    let body = serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "1065"},
            "statuses": statuses}}]}],
    }))
    .unwrap();
    let updates = zaguan::webhook::payload::parse(&body).unwrap();
    zaguan::webhook::store_updates(
        store.as_ref(),
        &zaguan::webhook::RecentContacts::new(),
        &updates,
        now,
    )
    .await
    .unwrap();

    let tz = chrono_tz::Europe::Madrid;
    let period = Period::last_days(1, now, tz).unwrap();
    let inputs = reports::gather(store.as_ref(), Some(stores.realestate.as_ref()), &period)
        .await
        .unwrap();
    let prices = Prices::default().with_whatsapp(
        WhatsAppPrices::parse("service=0.02,utility=0.01,marketing=0.06,52:marketing=0.04")
            .unwrap(),
    );
    let report = reports::compute(&inputs, &period, &prices);
    let bill = &report.whatsapp;
    assert_eq!(bill.total.messages, 3, "{bill:?}");
    assert!((bill.total.usd - 0.07).abs() < 1e-9, "{bill:?}");
    let purposes: Vec<&str> = bill.by_purpose.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(purposes, ["listing_alert", "reply", "visit_reminder"]);
    let per_day = reports::csv(&report, "whatsapp").unwrap();
    assert!(per_day.contains(",3,0.0700,"), "{per_day}");

    // The console: the bill, unpriced without ZAGUAN_WHATSAPP_PRICES, and its CSV.
    let app = instance(&stores).await;
    let (viewer, _) = app.operator("rosa", OperatorRole::Viewer).await;
    let cookie = common::console_sign_in(&app, "rosa", &viewer.password)
        .await
        .unwrap();
    let (status, page) = app
        .request(
            Request::get("/console/reports")
                .header("cookie", &cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<b id=\"whatsapp-billed\">3</b>"), "{page}");
    assert!(
        page.contains("ZAGUAN_WHATSAPP_PRICES"),
        "unpriced, and says how"
    );
    let purposes = csv(&app, &cookie, "whatsapp_purposes").await;
    assert!(purposes.contains("visit_reminder,1,"), "{purposes}");
    stores.close().await;
}

#[tokio::test]
async fn memory_the_whatsapp_bill_is_what_meta_priced() {
    the_whatsapp_bill_is_what_meta_priced(Backend::Memory).await;
}

#[tokio::test]
async fn mongo_the_whatsapp_bill_is_what_meta_priced() {
    the_whatsapp_bill_is_what_meta_priced(Backend::Mongo).await;
}
