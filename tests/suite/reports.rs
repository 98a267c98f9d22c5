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
