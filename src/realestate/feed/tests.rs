use chrono::{Duration, TimeZone, Utc};

use super::*;
use crate::realestate::MemoryRealEstate;

/// A Kyero feed of the listings `refs`, each priced `price(i)`.
fn feed(refs: &[usize], price: impl Fn(usize) -> u64) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root><kyero><feed_version>3</feed_version></kyero>\n",
    );
    for &i in refs {
        xml.push_str(&format!(
            "<property><id>{}</id><date>2026-11-0{} 10:00:00</date><ref>VAL-{i:04}</ref>\
             <price>{}</price><currency>EUR</currency><price_freq>{}</price_freq>\
             <type><![CDATA[ Apartment ]]></type><town>Valencia</town><province>Valencia</province>\
             <location_detail>Ruzafa</location_detail>\
             <location><latitude>39.46</latitude><longitude>-0.37</longitude></location>\
             <beds>{}</beds><baths>1</baths><surface_area><built>8{}</built></surface_area>\
             <desc><es><![CDATA[Piso luminoso en Ruzafa.]]></es><en>Bright flat in Ruzafa.</en></desc>\
             <features><feature>Lift</feature><feature>Terrace</feature></features>\
             <images><image id=\"2\"><url>https://img.example.es/{i}/2.jpg</url></image>\
             <image id=\"1\"><url>http://img.example.es/{i}/1.jpg</url></image></images>\
             <agent><name>Oficina</name><email>info@example.es</email></agent></property>\n",
            9000 + i,
            1 + i % 9,
            price(i),
            if i % 3 == 0 { "month" } else { "sale" },
            1 + i % 4,
            i % 10,
        ));
    }
    xml.push_str("</root>\n");
    xml
}

fn at(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, day, 6, 0, 0).unwrap()
}

fn ids(range: std::ops::Range<usize>) -> Vec<usize> {
    range.collect()
}

#[tokio::test]
async fn a_feed_is_the_whole_inventory() {
    let store = MemoryRealEstate::new();
    let first = feed(&ids(0..40), |i| 200_000 + i as u64);
    let report = import_kyero(&store, first.as_bytes(), ImportOptions::at(at(1)))
        .await
        .unwrap();
    assert_eq!(report.added.len(), 40);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let flat = store.property("VAL-0001").await.unwrap().unwrap();
    assert_eq!(flat.feed_id.as_deref(), Some("9001"));
    assert_eq!(flat.operation, Operation::Sale);
    assert_eq!(flat.kind, PropertyType::Flat);
    assert_eq!(flat.title, "Piso de 2 habitaciones en Valencia");
    assert_eq!(flat.amenities, ["ascensor", "terraza"]);
    assert_eq!(
        flat.photos,
        [
            "https://img.example.es/1/1.jpg",
            "https://img.example.es/1/2.jpg"
        ]
    );
    assert_eq!(flat.description_in(Some("en")), "Bright flat in Ruzafa.");
    assert_eq!(flat.description_in(Some("de")), "Piso luminoso en Ruzafa.");
    assert_eq!(
        store.property("VAL-0003").await.unwrap().unwrap().operation,
        Operation::Rent
    );
    assert_eq!(flat.listed_at, at(1));

    // The same feed again changes nothing.
    let again = import_kyero(&store, first.as_bytes(), ImportOptions::at(at(2)))
        .await
        .unwrap();
    assert_eq!(again.unchanged, 40, "{}", again.summary());
    assert!(again.added.is_empty() && again.updated.is_empty() && again.withdrawn.is_empty());

    // Without five of them, one cheaper: those five withdrawn, that one stamped.
    let second = feed(&ids(5..40), |i| {
        200_000 + i as u64 - u64::from(i == 7) * 10_000
    });
    let report = import_kyero(&store, second.as_bytes(), ImportOptions::at(at(3)))
        .await
        .unwrap();
    assert_eq!(
        report.withdrawn,
        ["VAL-0000", "VAL-0001", "VAL-0002", "VAL-0003", "VAL-0004"]
    );
    assert_eq!(report.cheaper, ["VAL-0007"]);
    assert_eq!(report.unchanged, 34);
    let flat = store.property("VAL-0001").await.unwrap().unwrap();
    assert_eq!(flat.status, ListingStatus::Withdrawn, "kept, not deleted");
    let cheaper = store.property("VAL-0007").await.unwrap().unwrap();
    assert_eq!(cheaper.price_dropped_at, Some(at(3)));
    assert!(
        store
            .properties_news_since(at(3) - Duration::minutes(1))
            .await
            .unwrap()
            .iter()
            .any(|p| p.id == "VAL-0007"),
        "saved searches hear of the cheaper one"
    );

    // Back in the feed: available again.
    let report = import_kyero(&store, first.as_bytes(), ImportOptions::at(at(4)))
        .await
        .unwrap();
    assert_eq!(report.back.len(), 5);
    assert_eq!(
        store.property("VAL-0001").await.unwrap().unwrap().status,
        ListingStatus::Available
    );
}

#[tokio::test]
async fn a_bad_feed_changes_nothing_and_a_bad_property_is_named() {
    let store = MemoryRealEstate::new();
    let full = feed(&ids(0..20), |_| 150_000);
    import_kyero(&store, full.as_bytes(), ImportOptions::at(at(1)))
        .await
        .unwrap();
    let before = store.properties(&PropertyFilter::default()).await.unwrap();

    let cut = &full.as_bytes()[..full.len() - 400];
    let empty = feed(&[], |_| 0);
    let small = feed(&ids(0..9), |_| 150_000);
    for (what, xml) in [
        ("cut short", cut),
        ("not well-formed", b"<root><property></root>".as_slice()),
        ("fewer than", empty.as_bytes()),
        ("fewer than", small.as_bytes()),
    ] {
        let error = import_kyero(&store, xml, ImportOptions::at(at(2)))
            .await
            .unwrap_err();
        assert!(error.to_string().contains(what), "{what}: {error}");
        assert!(error.to_string().contains("nothing was changed"));
    }
    assert_eq!(
        store.properties(&PropertyFilter::default()).await.unwrap(),
        before
    );
    // Shrinking on purpose.
    let report = import_kyero(
        &store,
        small.as_bytes(),
        ImportOptions {
            allow_shrink: true,
            ..ImportOptions::at(at(2))
        },
    )
    .await
    .unwrap();
    assert_eq!(report.withdrawn.len(), 11);

    // One broken property: named by position and id; the rest in.
    let broken = feed(&ids(0..20), |i| 150_000 + i as u64)
        .replacen("<price>150005</price>", "<price>mucho</price>", 1)
        .replacen("<price>150006</price>", "<price>x</price>", 1);
    let report = import_kyero(&store, broken.as_bytes(), ImportOptions::at(at(3)))
        .await
        .unwrap();
    assert_eq!(report.in_feed, 18);
    let named: Vec<(usize, Option<&str>)> = report
        .skipped
        .iter()
        .map(|s| (s.position, s.id.as_deref()))
        .collect();
    assert_eq!(named, [(6, Some("VAL-0005")), (7, Some("VAL-0006"))]);
    assert!(report.skipped[1].reason.contains("price"));
}
