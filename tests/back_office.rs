//! The agency loads its own business through the real binary on MongoDB (FerretDB in CI), with
//! no demo data and no hand-written documents: staff and owners made with `zaguan staff|owners`
//! and with the admin API are listed by both; a customer asking for a person reaches a member
//! the API created; an owner the CLI created a moment ago is an owner on their first message.

mod common;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use common::TestMongo;
use common::service::{Options, Service, say};

fn rule_model(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    if system.contains("Propietario ") {
        say("Hola, te cuento cómo van tus inmuebles.")
    } else {
        say("¿En qué te ayudo?")
    }
}

/// Open all day, every day: a handoff goes out whenever the test runs.
fn business_open_always() -> String {
    let mut text = String::from("name = \"Inmobiliaria Prueba\"\n[hours]\n");
    for day in zaguan::business::WEEKDAYS {
        text.push_str(&format!("{day} = [\"0:00-24:00\"]\n"));
    }
    text
}

/// Open 9:00–14:00, Monday to Friday.
fn business_weekday_mornings() -> String {
    let mut text = String::from("name = \"Inmobiliaria Prueba\"\n[hours]\n");
    for weekday in ["monday", "tuesday", "wednesday", "thursday", "friday"] {
        text.push_str(&format!("{weekday} = [\"9:00-14:00\"]\n"));
    }
    text
}

/// `zaguan ARGS` against the test's database.
fn cli(db: &TestMongo, args: &[&str]) -> Output {
    common::zaguan()
        .args(args)
        .env("MONGODB_URI", std::env::var("MONGODB_URI").unwrap())
        .env("MONGODB_DATABASE", db.store.database().name())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_people_made_by_the_cli_and_the_api_are_the_same_people() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let mut service = Service::start(Options {
        rules: rule_model,
        business: Some(business_open_always()),
        env: vec![("ZAGUAN_HANDOFF_DIGEST", "1s".to_owned())],
        mongo: Some(&db),
    })
    .await;

    // A member by the CLI, one by the API; each listed by the other.
    let added = stdout(&cli(
        &db,
        &[
            "staff",
            "add",
            "--name",
            "Lucía Ferrer",
            "--wa-id",
            "699 00 01 11",
            "--zones",
            "Valencia;Ruzafa",
        ],
    ));
    assert!(
        added.starts_with("added A-01  Lucía Ferrer  …0111"),
        "{added}"
    );
    let (status, body) = service
        .admin(
            "POST",
            "/admin/staff",
            Some(json!({"name": "Marta Ruiz", "wa_id": "+34 699 000 777",
                        "notify_handoffs": true, "visit_minutes": 45})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body[0]["id"], json!("A-02"));
    assert_eq!(body[0]["wa_id"], json!("34699000777"));
    let (_, listed) = service.admin("GET", "/admin/staff", None).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Lucía Ferrer", "Marta Ruiz"]);
    let listed: Value =
        serde_json::from_str(&stdout(&cli(&db, &["staff", "list", "--json"]))).unwrap();
    assert_eq!(listed[1]["wa_id"], json!("34699000777"));
    assert_eq!(listed[1]["visit_minutes"], json!(45));

    // Refusals name the field and write nothing.
    let (status, body) = service
        .admin(
            "POST",
            "/admin/staff",
            Some(json!([{"name": "Otra", "wa_id": "699 000 777"}])),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("A-02"), "{body}");
    let (status, body) = service
        .admin(
            "PATCH",
            "/admin/staff/A-01",
            Some(json!({"visit_minutes": 3})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("visit_minutes"),
        "{body}"
    );
    let refused = cli(&db, &["staff", "add", "--name", "X", "--wa-id", "12"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("wa_id"));

    // A customer asking for a person reaches Marta, whom the API created.
    service
        .customer_says("34611400001", "Ana Torres", "Quiero hablar con una persona")
        .await;
    service
        .wait_for_message("34699000777", "+34611400001", Duration::from_secs(10))
        .await;
    assert_eq!(service.mentions("34699000111", "+34611400001"), 0);

    // An owner by the CLI, listed by the API; on their first message, an owner.
    let added = stdout(&cli(
        &db,
        &[
            "owners",
            "add",
            "--name",
            "Rosa Marín",
            "--wa-id",
            "+34 611 22 33 44",
            "--agent-id",
            "A-01",
        ],
    ));
    assert!(added.starts_with("added O-01  Rosa Marín"), "{added}");
    let (_, owners) = service.admin("GET", "/admin/owners", None).await;
    assert_eq!(owners[0]["agent_id"], json!("A-01"));
    assert_eq!(owners[0]["wa_id"], json!("34611223344"));
    let (status, body) = service
        .admin(
            "PATCH",
            "/admin/owners/O-01",
            Some(json!({"agent_id": "A-99"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    // Past the directory's miss refresh, as a real owner writes seconds after being added.
    tokio::time::sleep(zaguan::engine::roles::MISS_REFRESH).await;
    service
        .customer_says("34611223344", "Rosa", "Hola, ¿cómo va lo mío?")
        .await;
    service
        .wait_for_message("34611223344", "tus inmuebles", Duration::from_secs(10))
        .await;
    let owners_prompt = service
        .model
        .requests
        .lock()
        .unwrap()
        .iter()
        .any(|r| r.to_string().contains("Propietario O-01 (Rosa Marín)"));
    assert!(owners_prompt, "the owner's context reached the assistants");

    // Disabled: out of handoffs, the record kept.
    let disabled = stdout(&cli(&db, &["staff", "disable", "A-02"]));
    assert!(disabled.contains("disabled"), "{disabled}");
    let (_, listed) = service.admin("GET", "/admin/staff", None).await;
    assert!(listed[1]["disabled_at"].is_string(), "{listed}");
    drop(service);
    db.drop().await;
}

/// A Kyero v3 feed of the listings numbered `refs`, as a CRM exports it (CDATA with spaces,
/// an `<agent>` block, `x` for a price on request where asked).
fn kyero_feed(refs: impl IntoIterator<Item = usize>) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root>\n<kyero><feed_version>3</feed_version></kyero>\n",
    );
    for i in refs {
        let kind = ["Apartment", "VILLA", "penthouse", "Town House"][i % 4];
        xml.push_str(&format!(
            "<property>\n  <id>{}</id>\n  <date>2026-11-20 10:00:00</date>\n  <ref>INM-{i:04}</ref>\n\
             \x20 <price>{}</price>\n  <currency>EUR</currency>\n  <price_freq>{}</price_freq>\n\
             \x20 <type><![CDATA[ {kind} ]]></type>\n  <town>{}</town>\n  <province>Valencia</province>\n\
             \x20 <location><latitude>39.4{}</latitude><longitude>-0.3{}</longitude></location>\n\
             \x20 <beds>{}</beds>\n  <baths>{}</baths>\n  <surface_area><built>{}</built></surface_area>\n\
             \x20 <desc><es><![CDATA[ Vivienda {i} con mucha luz. ]]></es><en>Home {i}, full of light.</en></desc>\n\
             \x20 <features><feature>Lift</feature><feature>Private pool</feature></features>\n\
             \x20 <images><image id=\"1\"><url>https://img.inmo.example/{i}/1.jpg</url></image></images>\n\
             \x20 <agent><name>Oficina centro</name><tel>960000000</tel></agent>\n</property>\n",
            70_000 + i,
            if i % 5 == 4 { 900 + i as u64 } else { 180_000 + 1_000 * i as u64 },
            if i % 5 == 4 { "month" } else { "sale" },
            ["Valencia", "Alboraya", "Paterna"][i % 3],
            i % 10,
            i % 7,
            1 + i % 4,
            1 + i % 2,
            60 + i % 90,
        ));
    }
    xml.push_str("</root>\n");
    xml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_the_feed_is_the_inventory_and_a_bad_feed_changes_nothing() {
    use zaguan::realestate::{ListingStatus, MongoRealEstate, PropertyFilter, PropertyStore};
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let realestate = MongoRealEstate::new(db.store.pool().clone());
    let listings = || async {
        realestate
            .properties(&PropertyFilter::default())
            .await
            .unwrap()
    };

    let full = write("full.xml", &kyero_feed(0..200));
    let out = stdout(&cli(
        &db,
        &["listings", "import", &full, "--format", "kyero"],
    ));
    assert!(out.starts_with("200 in the feed: 200 added"), "{out}");
    let first = listings().await;
    assert_eq!(first.len(), 200);
    let villa = first.iter().find(|p| p.id == "INM-0001").unwrap();
    assert_eq!(villa.kind.as_str(), "house");
    assert_eq!(villa.feed_id.as_deref(), Some("70001"));
    assert_eq!(villa.amenities, ["ascensor", "piscina"]);
    assert_eq!(villa.description, "Vivienda 1 con mucha luz.");
    assert_eq!(
        villa.descriptions.get("en").map(String::as_str),
        Some("Home 1, full of light.")
    );

    // Ten fewer: exactly those ten withdrawn, nothing else changed.
    let fewer = write(
        "fewer.xml",
        &kyero_feed((0..200).filter(|i| !(50..60).contains(i))),
    );
    let out = stdout(&cli(&db, &["listings", "import", &fewer]));
    assert!(
        out.starts_with(
            "190 in the feed: 0 added, 0 updated (0 cheaper), 10 withdrawn, 0 back, 190 unchanged"
        ),
        "{out}"
    );
    let second = listings().await;
    for (before, after) in first.iter().zip(&second) {
        assert_eq!(before.id, after.id);
        if (50..60).any(|i| before.id == format!("INM-{i:04}")) {
            assert_eq!(after.status, ListingStatus::Withdrawn);
            let mut kept = after.clone();
            kept.status = before.status;
            assert_eq!(&kept, before, "only the status changed");
        } else {
            assert_eq!(after, before);
        }
    }

    // Cut short, empty, not XML: refused with the reason, nothing changed.
    let text = kyero_feed(0..200);
    let cut = write("cut.xml", &text[..text.len() * 2 / 3]);
    let empty = write("empty.xml", &kyero_feed(0..0));
    let garbage = write("garbage.xml", "<html><body>502 Bad Gateway</body></html>");
    for (file, why) in [
        (&cut, "cut short"),
        (&empty, "fewer than 50 %"),
        (&garbage, "not a Kyero feed"),
    ] {
        let refused = cli(&db, &["listings", "import", file]);
        assert!(!refused.status.success(), "{file}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains(why) && stderr.contains("nothing was changed"),
            "{why}: {stderr}"
        );
    }
    assert_eq!(listings().await, second);

    // One broken property: named, the rest imported.
    let broken = write(
        "broken.xml",
        &kyero_feed((0..200).filter(|i| !(50..60).contains(i))).replacen(
            "<ref>INM-0007</ref>\n  <price>187000</price>",
            "<ref>INM-0007</ref>\n  <price>consultar</price>",
            1,
        ),
    );
    let out = stdout(&cli(&db, &["listings", "import", &broken]));
    assert!(out.contains("1 skipped"), "{out}");
    assert!(
        out.contains("skipped property 8 (INM-0007)"),
        "named by position and ref: {out}"
    );
    db.drop().await;
}

/// Two instances with the same feed: it is fetched and imported once per period, by one of
/// them, and the round is recorded for the console.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_serve_imports_the_feed_on_one_instance_at_a_time() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use zaguan::realestate::{FeedImportStore, MongoRealEstate, PropertyFilter, PropertyStore};
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let fetched = Arc::new(AtomicUsize::new(0));
    let feed = kyero_feed(0..30);
    let counter = fetched.clone();
    let url = common::serve_local(axum::Router::new().route(
        "/export/kyero.xml",
        axum::routing::get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let feed = feed.clone();
            async move { feed }
        }),
    ))
    .await;
    let env = vec![(
        "ZAGUAN_LISTINGS_FEED_URL",
        format!("{url}/export/kyero.xml"),
    )];
    let first = Service::start(Options {
        rules: rule_model,
        business: Some(business_open_always()),
        env: env.clone(),
        mongo: Some(&db),
    })
    .await;
    let second = Service::start(Options {
        rules: rule_model,
        business: Some(business_open_always()),
        env,
        mongo: Some(&db),
    })
    .await;
    let realestate = MongoRealEstate::new(db.store.pool().clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while realestate
        .properties(&PropertyFilter::default())
        .await
        .unwrap()
        .len()
        < 30
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the feed was not imported"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Both instances have looked by now (each looks at start); one took the round.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(fetched.load(Ordering::SeqCst), 1, "fetched once");
    let rounds = realestate.feed_imports(10).await.unwrap();
    assert_eq!(rounds.len(), 1, "{rounds:?}");
    assert_eq!(
        rounds[0].summary.as_deref(),
        Some(
            "30 in the feed: 30 added, 0 updated (0 cheaper), 0 withdrawn, 0 back, 0 unchanged, 0 skipped"
        )
    );
    let imported: f64 = [first.metrics().await, second.metrics().await]
        .iter()
        .map(|text| {
            common::service::metric(
                text,
                "zaguan_listings_feed_imports_total",
                &["outcome=\"imported\""],
            )
        })
        .sum();
    assert_eq!(imported, 1.0);
    drop((first, second));
    db.drop().await;
}

/// Asks the slots of P-7001 on the day the customer names: through the appointment
/// assistant, as a model would.
fn slots_model(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    let content = last["content"].as_str().unwrap_or_default();
    let can_list = body["tools"].as_array().is_some_and(|tools| {
        tools
            .iter()
            .any(|t| t["function"]["name"] == json!("list_available_slots"))
    });
    let asked_day = messages.iter().rev().find_map(|m| {
        (m["role"] == json!("user"))
            .then(|| {
                m["content"]
                    .as_str()?
                    .strip_prefix("huecos ")
                    .map(str::to_owned)
            })
            .flatten()
    });
    let list = |day: String| {
        common::service::call(
            messages.len(),
            "list_available_slots",
            json!({"property_id": "P-7001", "from_date": day, "days": 1}),
        )
    };
    match (last["role"].as_str(), asked_day) {
        (Some("user"), Some(day)) if can_list => list(day),
        (Some("user"), Some(_)) => common::service::call(
            messages.len(),
            "ToAppointmentAssistant",
            json!({"query": content}),
        ),
        (Some("tool"), Some(day)) if can_list && !content.contains("P-7001") => list(day),
        _ => say("Te paso los huecos."),
    }
}

/// An agent's own calendar, served by a local server, blocks exactly its busy times: a weekly
/// recurring meeting and an all-day absence; the business file's holiday has no visits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_an_agents_own_calendar_and_the_holidays_shape_their_visits() {
    use chrono::{Datelike as _, Duration as Days, NaiveDate, TimeZone as _};
    use zaguan::realestate::{CalendarStore, MongoRealEstate, PropertyStore};
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let madrid = chrono_tz::Europe::Madrid;
    let today = chrono::Utc::now().with_timezone(&madrid).date_naive();
    // Next week's Monday to Thursday.
    let monday = today + Days::days(7 - i64::from(today.weekday().num_days_from_monday()));
    let day = |n: i64| monday + Days::days(n);
    let stamp = |date: NaiveDate, hour: u32| {
        madrid
            .from_local_datetime(&date.and_hms_opt(hour, 0, 0).unwrap())
            .unwrap()
            .to_utc()
            .format("%Y%m%d%H%M")
            .to_string()
    };
    let ics = format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Google Inc//Google Calendar 70.9054//EN\r\n\
         BEGIN:VEVENT\r\nUID:weekly@google.com\r\nDTSTART;TZID=Europe/Madrid:{}T101500\r\n\
         DTEND;TZID=Europe/Madrid:{}T104500\r\nRRULE:FREQ=WEEKLY;BYDAY=TU\r\nSUMMARY:Reunión de equipo\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nUID:away@google.com\r\nDTSTART;VALUE=DATE:{}\r\nDTEND;VALUE=DATE:{}\r\nSUMMARY:Médico\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nUID:free@google.com\r\nDTSTART;TZID=Europe/Madrid:{}T120000\r\n\
         DTEND;TZID=Europe/Madrid:{}T130000\r\nTRANSP:TRANSPARENT\r\nSUMMARY:Recordatorio\r\nEND:VEVENT\r\n\
         END:VCALENDAR\r\n",
        (day(1) - Days::days(14)).format("%Y%m%d"),
        (day(1) - Days::days(14)).format("%Y%m%d"),
        day(2).format("%Y%m%d"),
        day(3).format("%Y%m%d"),
        day(0).format("%Y%m%d"),
        day(0).format("%Y%m%d"),
    );
    let calendar = common::serve_local(axum::Router::new().route(
        "/calendar/lucia/basic.ics",
        axum::routing::get(move || {
            let ics = ics.clone();
            async move { ics }
        }),
    ))
    .await;
    let mut business = business_weekday_mornings();
    business.push_str(&format!(
        "[[holidays]]\ndate = {}\nname = \"Fiesta local\"\n",
        day(3)
    ));
    stdout(&cli(
        &db,
        &[
            "staff",
            "add",
            "--name",
            "Lucía Ferrer",
            "--visit-minutes",
            "45",
            "--calendar-url",
            &format!("{calendar}/calendar/lucia/basic.ics"),
        ],
    ));
    let realestate = MongoRealEstate::new(db.store.pool().clone());
    let set = zaguan::realestate::demo::demo_set(today, madrid);
    let mut listing = set.properties[0].clone();
    listing.id = "P-7001".into();
    listing.status = zaguan::realestate::ListingStatus::Available;
    listing.agent_id = Some("A-01".into());
    realestate.upsert_properties(&[listing]).await.unwrap();
    let mut service = Service::start(Options {
        rules: slots_model,
        business: Some(business),
        env: vec![],
        mongo: Some(&db),
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while realestate
        .calendar("A-01")
        .await
        .unwrap()
        .and_then(|c| c.read_at)
        .is_none()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the calendar was not read"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let customer = "34611800001";
    // What the tool told the model (the reply itself keeps slot ids out of the customer's
    // sight).
    let mut asked = 0;
    let mut slots_on = async |date: NaiveDate| -> Vec<String> {
        asked += 1;
        service
            .customer_says(customer, "Ana", &format!("huecos {date}"))
            .await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let answers: Vec<String> = service
                .model
                .requests
                .lock()
                .unwrap()
                .iter()
                .filter_map(|r| {
                    let last = r["messages"].as_array()?.last()?;
                    let content = last["content"].as_str()?;
                    (last["role"] == json!("tool") && content.contains("P-7001"))
                        .then(|| content.to_owned())
                })
                .collect();
            if answers.len() >= asked {
                return answers[asked - 1]
                    .lines()
                    .filter_map(|l| l.strip_prefix("- S-P7001-"))
                    .map(|l| l[..12].to_owned())
                    .collect();
            }
            assert!(std::time::Instant::now() < deadline, "no answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let all = |date| [9, 10, 11, 12, 13].map(|h| stamp(date, h)).to_vec();
    assert_eq!(
        slots_on(day(0)).await,
        all(day(0)),
        "a transparent event blocks nothing"
    );
    let mut tuesday = all(day(1));
    tuesday.remove(1);
    assert_eq!(
        slots_on(day(1)).await,
        tuesday,
        "the weekly 10:15 meeting takes 10:00 only"
    );
    assert!(slots_on(day(2)).await.is_empty(), "away all day");
    assert!(slots_on(day(3)).await.is_empty(), "the holiday");
    drop(service);
    db.drop().await;
}

/// Lists the slots of the listing and day a customer names («huecos P-7001 2027-01-04»), or
/// books the slot they name («reserva S-…»), through the appointment assistant as a model
/// would.
fn race_model(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    let has = |tool: &str| {
        body["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["function"]["name"] == json!(tool)))
    };
    let said = messages
        .iter()
        .rev()
        .find(|m| m["role"] == json!("user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    // A tool's answer is said in a word, unless it is a delegation's: then the assistant acts.
    let delegated = messages
        .iter()
        .rev()
        .find_map(|m| m["tool_calls"].as_array()?.first()?["function"]["name"].as_str())
        .is_some_and(|name| name.starts_with("To"));
    if last["role"] == json!("tool") && !delegated {
        return say("Hecho.");
    }
    let words: Vec<&str> = said.split_whitespace().collect();
    match words.as_slice() {
        ["huecos", listing, day] if has("list_available_slots") => common::service::call(
            messages.len(),
            "list_available_slots",
            json!({"property_id": listing, "from_date": day, "days": 1}),
        ),
        ["reserva", slot] if has("book_appointment") => {
            common::service::call(messages.len(), "book_appointment", json!({"slot_id": slot}))
        }
        ["huecos", ..] | ["reserva", ..] => common::service::call(
            messages.len(),
            "ToAppointmentAssistant",
            json!({"query": said}),
        ),
        _ => say("¿En qué te ayudo?"),
    }
}

/// Two customers, each on an instance of their own, confirm at the same moment a visit with the
/// same agent at the same hour (her first of the day), at two of her listings: one gets the visit, the other is told the
/// time was just taken, and the agent has one visit at that hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_two_customers_racing_for_an_agents_hour_get_one_visit() {
    use chrono::{Datelike as _, Duration as Days, TimeZone as _};
    use zaguan::domain::WaId;
    use zaguan::realestate::{MongoRealEstate, PropertyStore};
    use zaguan::store::HistoryStore as _;
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let madrid = chrono_tz::Europe::Madrid;
    let today = chrono::Utc::now().with_timezone(&madrid).date_naive();
    let monday = today + Days::days(7 - i64::from(today.weekday().num_days_from_monday()));
    let business = business_weekday_mornings();
    stdout(&cli(&db, &["staff", "add", "--name", "Lucía Ferrer"]));
    let realestate = MongoRealEstate::new(db.store.pool().clone());
    let set = zaguan::realestate::demo::demo_set(today, madrid);
    let listings: Vec<_> = ["P-7001", "P-7002"]
        .iter()
        .zip(&set.properties)
        .map(|(id, p)| {
            let mut listing = p.clone();
            listing.id = (*id).into();
            listing.status = zaguan::realestate::ListingStatus::Available;
            listing.agent_id = Some("A-01".into());
            listing
        })
        .collect();
    realestate.upsert_properties(&listings).await.unwrap();
    let start = || {
        Service::start(Options {
            rules: race_model,
            business: Some(business.clone()),
            env: vec![],
            mongo: Some(&db),
        })
    };
    let mut first = start().await;
    let mut second = start().await;
    // Her first slot of the day, at either listing.
    let nine = madrid
        .from_local_datetime(&monday.and_hms_opt(9, 0, 0).unwrap())
        .unwrap()
        .to_utc()
        .format("%Y%m%d%H%M")
        .to_string();
    let customers = [
        ("34611900001", "Ana", "P-7001", "S-P7001"),
        ("34611900002", "Luis", "P-7002", "S-P7002"),
    ];
    for ((customer, name, listing, slot), service) in
        customers.iter().zip([&mut first, &mut second])
    {
        service
            .customer_says(customer, name, &format!("huecos {listing} {monday}"))
            .await;
        service
            .wait_for_message(customer, "Hecho", Duration::from_secs(15))
            .await;
        let slot = format!("{slot}-{nine}-A01");
        service
            .customer_says(customer, name, &format!("reserva {slot}"))
            .await;
        let waited = service
            .wait_for_message(
                customer,
                &format!("Visita a {listing}"),
                Duration::from_secs(15),
            )
            .await;
        assert!(
            waited < Duration::from_secs(15),
            "{customer} was not asked to confirm: {:?}",
            service.texts_to(customer)
        );
    }
    // Both say yes at once, each to their own instance.
    let (a, b) = (&mut first, &mut second);
    tokio::join!(
        a.customer_says(customers[0].0, customers[0].1, "confirmo"),
        b.customer_says(customers[1].0, customers[1].1, "confirmo"),
    );
    let appointments = db
        .store
        .database()
        .collection::<bson::Document>("appointments");
    let outcome = |customer: &'static str| {
        let store = db.store.clone();
        async move {
            let history = store
                .recent_messages(&WaId::parse(customer).unwrap(), 30)
                .await
                .unwrap();
            let tool = |needle: &str| {
                history.iter().any(|m| {
                    m.message.role == zaguan::domain::MessageRole::Tool
                        && m.message.content.contains(needle)
                })
            };
            (tool("Visita reservada"), tool("just taken"))
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (ana, luis) = loop {
        let (ana, luis) = (outcome(customers[0].0).await, outcome(customers[1].0).await);
        if (ana.0 || ana.1) && (luis.0 || luis.1) {
            break (ana, luis);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "both confirmations were not run: {ana:?} {luis:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        ana.0 != luis.0 && ana.1 != luis.1,
        "one visit and one refusal: Ana {ana:?}, Luis {luis:?}"
    );
    let booked = appointments
        .count_documents(bson::doc! {"status": "booked"})
        .await
        .unwrap();
    assert_eq!(booked, 1, "the agent has one visit at 9:00");
    drop((first, second));
    db.drop().await;
}

const LEADS_TOKEN: &str = "leads-test-token-of-at-least-32-characters";

/// Says one thing whatever it is asked: what the leads' test reads is the model's request.
fn lead_model(_body: &Value) -> Value {
    say("Claro, te cuento lo que quieras del piso.")
}

/// `POST path` with `body`, the leads token unless `token` is `None`: the status and the JSON
/// answer.
async fn post_lead(
    service: &Service,
    path: &str,
    body: Vec<u8>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}{path}", service.port))
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The `lead_first_contact` templates the fake Graph API received for `to`.
fn first_contacts(service: &Service, to: &str) -> usize {
    service
        .messages_to(to)
        .iter()
        .filter(|m| {
            m["type"] == json!("template") && m["template"]["name"] == json!("lead_first_contact")
        })
        .count()
}

async fn wait_first_contact(service: &Service, to: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while first_contacts(service, to) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{to} got no lead_first_contact within 60 s: {:?}",
            service.messages_to(to)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Leads from the portals through the binary on FerretDB: a CRM's JSON push with a spaced
/// international number gets one template, within a minute, pushed again none; a wrong token
/// is refused, a malformed body named; one e-mail per portal's layout and an unreadable one,
/// posted raw, are stored with what was read and the readable ones contacted; a number
/// WhatsApp refuses (131026) is marked unreachable and the staff asked to write; and when the
/// lead answers, the model is asked about the listing of the lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_portal_leads_are_answered_on_whatsapp_once() {
    use zaguan::realestate::{MongoRealEstate, PropertyStore};
    use zaguan::store::{ConversationStore as _, LeadFilter, LeadStatus, LeadStore as _};
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let madrid = chrono_tz::Europe::Madrid;
    let today = chrono::Utc::now().with_timezone(&madrid).date_naive();
    let set = zaguan::realestate::demo::demo_set(today, madrid);
    let listings: Vec<_> = set.properties[..5]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut listing = p.clone();
            listing.id = format!("P-100{}", i + 1);
            listing.status = zaguan::realestate::ListingStatus::Available;
            listing
        })
        .collect();
    MongoRealEstate::new(db.store.pool().clone())
        .upsert_properties(&listings)
        .await
        .unwrap();
    // The member on duty (the business is open all day) who is told of what needs a person.
    stdout(&cli(
        &db,
        &[
            "staff",
            "add",
            "--name",
            "Lucía Ferrer",
            "--wa-id",
            "699 00 01 11",
            "--notify-handoffs",
            "true",
        ],
    ));
    // The agency's CRM, receiving the business events.
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let received = events.clone();
    let crm = common::serve_local(axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let received = received.clone();
            async move {
                received.lock().unwrap().push(body);
                axum::http::StatusCode::OK
            }
        }),
    ))
    .await;
    let mut service = Service::start(Options {
        rules: lead_model,
        business: Some(business_open_always()),
        env: vec![
            ("ZAGUAN_EVENTS_URL", format!("{crm}/hook")),
            (
                "ZAGUAN_EVENTS_SECRET",
                "events-secret-of-the-crm".to_owned(),
            ),
            ("ZAGUAN_LEADS_TOKEN", LEADS_TOKEN.to_owned()),
            (
                "WHATSAPP_PHONE_NUMBER_ID",
                common::service::PHONE_NUMBER_ID.to_owned(),
            ),
        ],
        mongo: Some(&db),
    })
    .await;
    let lead = json!({
        "source": "idealista", "lead_id": "IDL-98765", "name": "Marta Giménez Soler",
        "phone": "+34 612 34 56 78", "email": "marta.gimenez@example.com",
        "listing_ref": "P-1001", "message": "Hola, ¿se puede visitar el sábado?",
        "received_at": chrono::Utc::now().to_rfc3339(),
    });
    let body = serde_json::to_vec(&lead).unwrap();
    assert_eq!(
        post_lead(&service, "/leads", body.clone(), None).await.0,
        401
    );
    assert_eq!(
        post_lead(&service, "/leads", body.clone(), Some("wrong-token"))
            .await
            .0,
        401
    );
    let (status, answer) = post_lead(
        &service,
        "/leads",
        br#"{"source": "idealista", "phone": ["612345678"]}"#.to_vec(),
        Some(LEADS_TOKEN),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        answer["error"].as_str().unwrap().starts_with("phone:"),
        "{answer}"
    );
    let (status, answer) = post_lead(&service, "/leads", body.clone(), Some(LEADS_TOKEN)).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["duplicate"], json!(false));
    wait_first_contact(&service, "34612345678").await;
    let (status, answer) = post_lead(&service, "/leads", body, Some(LEADS_TOKEN)).await;
    assert_eq!((status, &answer["duplicate"]), (202, &json!(true)));
    // The CRM hears of it, the contact's source on the event.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let heard = events.lock().unwrap().iter().any(|e| {
            e["type"] == json!("lead.received")
                && e["conversation"] == json!("34612345678")
                && e["source"] == json!("idealista")
                && e["data"]["listing_id"] == json!("P-1001")
        });
        if heard {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no lead.received with its source: {:?}",
            events.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A lead in English is written to in English: the portal's `lang`, else their message's.
    let english = json!({"source": "mycrm", "phone": "+44 7911 123456", "listing_ref": "P-1003",
                         "message": "Hello, I would like to visit the flat next week, is it still available?"});
    assert_eq!(
        post_lead(
            &service,
            "/leads",
            serde_json::to_vec(&english).unwrap(),
            Some(LEADS_TOKEN)
        )
        .await
        .0,
        202
    );
    wait_first_contact(&service, "447911123456").await;
    let template = service
        .messages_to("447911123456")
        .into_iter()
        .find(|m| m["type"] == json!("template"))
        .unwrap();
    assert_eq!(
        template["template"]["language"]["code"],
        json!("en"),
        "{template}"
    );

    // The portals' e-mails, raw, as an inbound-mail service forwards them.
    let emails: [(&str, &[u8], Option<&str>); 6] = [
        (
            "idealista",
            include_bytes!("data/leads/idealista.eml"),
            Some("34612345678"),
        ),
        (
            "fotocasa",
            include_bytes!("data/leads/fotocasa.eml"),
            Some("34623456789"),
        ),
        (
            "habitaclia",
            include_bytes!("data/leads/habitaclia.eml"),
            Some("34645678901"),
        ),
        (
            "pisos.com",
            include_bytes!("data/leads/pisoscom.eml"),
            Some("34634567890"),
        ),
        (
            "tablondecasas.example",
            include_bytes!("data/leads/generic.eml"),
            Some("34655123456"),
        ),
        (
            "idealista.com",
            include_bytes!("data/leads/unreadable.eml"),
            None,
        ),
    ];
    for (source, raw, _) in &emails {
        let (status, answer) =
            post_lead(&service, "/leads/email", raw.to_vec(), Some(LEADS_TOKEN)).await;
        assert_eq!(status, 202, "{source}: {answer}");
    }
    for (_, _, number) in &emails[1..5] {
        wait_first_contact(&service, number.unwrap()).await;
    }
    let stored = db
        .store
        .leads(&LeadFilter {
            limit: 20,
            ..LeadFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        stored.len(),
        8,
        "two JSON leads and six e-mails: {stored:#?}"
    );
    for (source, _, number) in &emails {
        let lead = stored
            .iter()
            .find(|l| l.source == *source && l.raw_email.is_some())
            .unwrap_or_else(|| panic!("no lead from {source}: {stored:#?}"));
        match number {
            Some(number) => {
                assert_eq!(
                    lead.wa_id.as_ref().map(|w| w.as_str()),
                    Some(*number),
                    "{source}"
                );
                assert!(
                    lead.listing_id
                        .as_deref()
                        .is_some_and(|l| l.starts_with("P-100")),
                    "{source}"
                );
            }
            None => {
                assert_eq!(lead.status, LeadStatus::Unreadable, "{source}");
                assert!(lead.why.is_some());
            }
        }
    }
    // Idealista's e-mail and the CRM's push are two leads (two sources), about one listing on
    // one day from one number: Marta is written to once.
    let marta: Vec<_> = stored
        .iter()
        .filter(|l| {
            l.wa_id
                .as_ref()
                .is_some_and(|w| w.as_str() == "34612345678")
        })
        .collect();
    assert_eq!(marta.len(), 2, "{marta:#?}");
    assert!(
        marta.iter().all(|l| l.status != LeadStatus::New),
        "{marta:#?}"
    );
    assert_eq!(first_contacts(&service, "34612345678"), 1);

    // A number WhatsApp refuses: the lead is unreachable, and the staff are asked to write.
    *service.graph.refused.lock().unwrap() = Some("34699887766".to_owned());
    let refused = json!({"source": "fotocasa", "phone": "699 887 766", "email": "nadie@example.com",
                         "listing_ref": "P-1002", "message": "Me interesa"});
    assert_eq!(
        post_lead(
            &service,
            "/leads",
            serde_json::to_vec(&refused).unwrap(),
            Some(LEADS_TOKEN)
        )
        .await
        .0,
        202
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        let leads = db
            .store
            .leads(&LeadFilter {
                status: Some(LeadStatus::Unreachable),
                limit: 5,
                ..LeadFilter::default()
            })
            .await
            .unwrap();
        if let Some(lead) = leads.first() {
            assert_eq!(lead.email.as_deref(), Some("nadie@example.com"));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the refused lead was not marked unreachable"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let waiting = db
        .store
        .conversation(&zaguan::domain::WaId::parse("34699887766").unwrap())
        .await
        .unwrap()
        .and_then(|c| c.handoff_requested)
        .expect("the staff are asked to write to the lead");
    assert!(
        waiting.reason.contains("nadie@example.com"),
        "{}",
        waiting.reason
    );
    service
        .wait_for_message("34699000111", "nadie@example.com", Duration::from_secs(20))
        .await;

    // The console's leads page, in Spanish: per source, each lead, an unreadable one's e-mail.
    let base = format!("http://127.0.0.1:{}", service.port);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed = client
        .post(format!("{base}/console/sign-in"))
        .form(&[
            ("operator", "admin"),
            ("password", common::service::ADMIN_TOKEN),
        ])
        .send()
        .await
        .unwrap();
    let cookie = signed.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = client
        .get(format!("{base}/console/leads"))
        .header("cookie", &cookie)
        .header("accept-language", "es-ES,es;q=0.9")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for needle in [
        "Contactos de los portales y del CRM",
        "data-source=\"idealista\"",
        "data-source=\"pisos.com\"",
        "data-status=\"unreachable\"",
        "data-status=\"unreadable\"",
        "ilegible",
    ] {
        assert!(
            page.contains(needle),
            "{needle} not on the leads page:\n{page}"
        );
    }
    let unreadable = stored
        .iter()
        .find(|l| l.status == LeadStatus::Unreadable)
        .unwrap();
    let original = client
        .get(format!("{base}/console/leads/{}/email", unreadable.id))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(original.contains("Novedades de diciembre"), "{original}");

    // The lead answers: the model is asked about the listing the lead was about.
    service
        .customer_says("34623456789", "Javier", "sí, me interesa")
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let asked = service.model.requests.lock().unwrap().iter().any(|r| {
            let text = r.to_string();
            text.contains("sí, me interesa") && text.contains("P-1002")
        });
        if asked {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the model was not asked about P-1002"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Javier's lead is answered; in the funnel by source he wrote from Fotocasa, and the leads
    // who never wrote back are not counted as writing to us.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !db
        .store
        .leads(&LeadFilter {
            status: Some(LeadStatus::Answered),
            limit: 5,
            ..LeadFilter::default()
        })
        .await
        .unwrap()
        .iter()
        .any(|l| l.source == "fotocasa" && l.answered_at.is_some())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the answer was not recorded on the lead"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reports = client
        .get(format!("{base}/console/reports?days=1"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let by_source = &reports[reports
        .find("id=\"funnel-by-source\"")
        .expect("the funnel by source")..];
    let by_source = &by_source[..by_source.find("</table>").unwrap()];
    assert!(
        by_source.contains("<tr data-source=\"fotocasa\"><td>fotocasa</td><td>1</td>"),
        "{by_source}"
    );
    assert!(
        !by_source.contains("data-source=\"idealista\""),
        "{by_source}"
    );
    drop(service);
    db.drop().await;
}

/// Without any model, a lead who answers is answered about the listing they asked about on the
/// portal: the offline engine reads it from the portal's message in the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_without_a_model_a_lead_is_answered_about_their_listing() {
    use zaguan::realestate::{MongoRealEstate, PropertyStore};
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let realestate = MongoRealEstate::new(db.store.pool().clone());
    let madrid = chrono_tz::Europe::Madrid;
    let today = chrono::Utc::now().with_timezone(&madrid).date_naive();
    let mut listing = zaguan::realestate::demo::demo_set(today, madrid).properties[0].clone();
    listing.id = "P-1001".into();
    listing.status = zaguan::realestate::ListingStatus::Available;
    realestate
        .upsert_properties(std::slice::from_ref(&listing))
        .await
        .unwrap();
    let unset = |name: &'static str| (name, String::new());
    let mut service = Service::start(Options {
        rules: lead_model,
        business: Some(business_open_always()),
        env: vec![
            unset("LLM_PRIMARY"),
            unset("LLM_FALLBACK"),
            unset("OPENAI_API_KEY"),
            unset("OPENAI_BASE_URL"),
            ("ZAGUAN_LEADS_TOKEN", LEADS_TOKEN.to_owned()),
            (
                "WHATSAPP_PHONE_NUMBER_ID",
                common::service::PHONE_NUMBER_ID.to_owned(),
            ),
        ],
        mongo: Some(&db),
    })
    .await;
    let lead = json!({"source": "idealista", "lead_id": "IDL-1", "name": "Rocío",
                      "phone": "+34 622 11 22 33", "listing_ref": "P-1001",
                      "message": "¿Sigue disponible?"});
    assert_eq!(
        post_lead(
            &service,
            "/leads",
            serde_json::to_vec(&lead).unwrap(),
            Some(LEADS_TOKEN)
        )
        .await
        .0,
        202
    );
    wait_first_contact(&service, "34622112233").await;
    let before = service.messages_to("34622112233").len();
    service
        .customer_says("34622112233", "Rocío", "sí, me interesa, ¿cuánto cuesta?")
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        // What was sent after the customer wrote (the first contact names the listing too).
        let texts: Vec<String> = service.messages_to("34622112233")[before..]
            .iter()
            .map(Value::to_string)
            .collect();
        if texts
            .iter()
            .any(|t| t.contains("P-1001") || t.contains(&listing.title))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not answered about P-1001 ({}): {texts:#?}",
            listing.title
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(service.model_calls(), 0, "no model was asked");
    drop(service);
    db.drop().await;
}
