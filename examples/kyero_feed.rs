//! Writes a Kyero v3 feed of N listings to standard output, as an agency's CRM exports it
//! (for `scripts/bench-feed`): `cargo run --release --example kyero_feed -- 5000 > feed.xml`.

use std::io::Write as _;

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000);
    let towns = [
        "Valencia", "Alboraya", "Paterna", "Madrid", "Málaga", "Sevilla",
    ];
    let kinds = [
        "Apartment",
        "Villa",
        "Penthouse",
        "Town House",
        "Studio",
        "Duplex",
    ];
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(
        out,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root>\n<kyero><feed_version>3</feed_version></kyero>"
    )
    .unwrap();
    for i in 0..count {
        let rent = i % 5 == 4;
        writeln!(
            out,
            "<property><id>{id}</id><date>2026-11-20 10:00:00</date><ref>INM-{i:05}</ref>\
             <price>{price}</price><currency>EUR</currency><price_freq>{freq}</price_freq>\
             <type><![CDATA[ {kind} ]]></type><town>{town}</town><province>{town}</province>\
             <location_detail>Zona {zone}</location_detail>\
             <location><latitude>39.{lat:04}</latitude><longitude>-0.{lon:04}</longitude></location>\
             <beds>{beds}</beds><baths>{baths}</baths><surface_area><built>{area}</built></surface_area>\
             <desc><es><![CDATA[ Vivienda {i}: luminosa, exterior, cerca de todos los servicios. ]]></es>\
             <en>Home {i}: bright, outward-facing, close to everything.</en>\
             <de>Wohnung {i}: hell, nach außen, nah an allem.</de></desc>\
             <features><feature>Lift</feature><feature>Terrace</feature><feature>Air conditioning</feature></features>\
             <images>{images}</images><agent><name>Oficina</name><email>info@inmo.example</email></agent></property>",
            id = 100_000 + i,
            price = if rent { 700 + (i % 900) as u64 } else { 90_000 + 1_000 * (i % 600) as u64 },
            freq = if rent { "month" } else { "sale" },
            kind = kinds[i % kinds.len()],
            town = towns[i % towns.len()],
            zone = i % 40,
            lat = i % 9_999,
            lon = (i * 7) % 9_999,
            beds = 1 + i % 5,
            baths = 1 + i % 3,
            area = 40 + i % 200,
            images = (1..=8)
                .map(|n| format!("<image id=\"{n}\"><url>https://img.inmo.example/{i}/{n}.jpg</url></image>"))
                .collect::<String>(),
        )
        .unwrap();
    }
    writeln!(out, "</root>").unwrap();
}
