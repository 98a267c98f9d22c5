//! Charts drawn on the server as SVG (no script bundle to build): horizontal bars for the
//! funnel and the assistants, columns per day for activity and cost. Every label is escaped;
//! each chart carries its numbers as text as well as in its shapes.

use std::fmt::Write as _;

const WIDTH: f64 = 640.0;
const BAR: f64 = 22.0;
const GAP: f64 = 8.0;
const LABEL: f64 = 230.0;
const COLOURS: &[&str] = &["#2f6f9f", "#d08a2e", "#5a9e4b", "#9b4f96", "#c4493c"];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Horizontal bars, one per `(label, value, shown)`; `shown` is the text beside the bar.
pub fn bars(id: &str, title: &str, rows: &[(String, f64, String)]) -> String {
    let height = rows.len() as f64 * (BAR + GAP) + GAP;
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    let room = WIDTH - LABEL - 90.0;
    let mut svg = format!(
        r#"<svg id="{id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{}">"#,
        escape(title)
    );
    for (i, (label, value, shown)) in rows.iter().enumerate() {
        let y = GAP + i as f64 * (BAR + GAP);
        let w = if max > 0.0 { value / max * room } else { 0.0 };
        let _ = write!(
            svg,
            r##"<text x="{x}" y="{ty}" text-anchor="end" font-size="13">{label}</text><rect x="{LABEL}" y="{y}" width="{w:.1}" height="{BAR}" fill="{colour}"/><text x="{vx:.1}" y="{ty}" font-size="13" class="value">{shown}</text>"##,
            x = LABEL - 8.0,
            ty = y + BAR * 0.72,
            label = escape(label),
            colour = COLOURS[0],
            vx = LABEL + w + 6.0,
            shown = escape(shown),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Columns per day, stacked by series (`(name, values per day)`), with a legend.
pub fn columns(id: &str, title: &str, days: &[String], series: &[(String, Vec<f64>)]) -> String {
    let (top, chart, bottom) = (24.0, 160.0, 36.0);
    let height = top + chart + bottom;
    let left = 40.0;
    let slot = if days.is_empty() {
        0.0
    } else {
        (WIDTH - left - 10.0) / days.len() as f64
    };
    let totals: Vec<f64> = (0..days.len())
        .map(|d| {
            series
                .iter()
                .map(|(_, v)| v.get(d).copied().unwrap_or(0.0))
                .sum()
        })
        .collect();
    let max = totals.iter().copied().fold(0.0, f64::max);
    let mut svg = format!(
        r#"<svg id="{id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{}">"#,
        escape(title)
    );
    for (s, (name, _)) in series.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<rect x="{x}" y="4" width="10" height="10" fill="{c}"/><text x="{tx}" y="13" font-size="12">{n}</text>"#,
            x = left + s as f64 * 140.0,
            c = COLOURS[s % COLOURS.len()],
            tx = left + s as f64 * 140.0 + 14.0,
            n = escape(name),
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{x}" y="{y}" font-size="11" text-anchor="end">{max}</text><line x1="{left}" y1="{y2}" x2="{WIDTH}" y2="{y2}" stroke="#999"/>"##,
        x = left - 4.0,
        y = top + 10.0,
        max = trim(max),
        y2 = top + chart,
    );
    for (d, day) in days.iter().enumerate() {
        let x = left + d as f64 * slot + slot * 0.15;
        let mut base = top + chart;
        for (s, (_, values)) in series.iter().enumerate() {
            let v = values.get(d).copied().unwrap_or(0.0);
            let h = if max > 0.0 { v / max * chart } else { 0.0 };
            base -= h;
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{base:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"><title>{day}: {v}</title></rect>"#,
                w = slot * 0.7,
                c = COLOURS[s % COLOURS.len()],
                day = escape(day),
                v = trim(v),
            );
        }
        // A day label where there is room: every day up to 16, else about 12 of them.
        let every = days.len().div_ceil(12).max(1);
        if d % every == 0 {
            let _ = write!(
                svg,
                r#"<text x="{cx:.1}" y="{ty}" font-size="11" text-anchor="middle">{label}</text>"#,
                cx = x + slot * 0.35,
                ty = top + chart + 16.0,
                label = escape(day.get(5..).unwrap_or(day)),
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// `12`, `0.35`: a number without trailing zeros.
fn trim(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_bars_scale_to_the_largest() {
        let svg = bars(
            "funnel",
            "Funnel <test>",
            &[
                ("Wrote <b>".into(), 10.0, "10".into()),
                ("Booked".into(), 5.0, "5 (50%)".into()),
            ],
        );
        assert!(svg.contains("Wrote &lt;b&gt;") && !svg.contains("<b>"));
        assert!(svg.contains(r#"width="320.0""#), "{svg}");
        assert!(svg.contains(r#"width="160.0""#), "{svg}");
        assert!(svg.contains("5 (50%)"));
        let empty = columns("c", "t", &[], &[]);
        assert!(empty.starts_with("<svg") && empty.ends_with("</svg>"));
    }
}
