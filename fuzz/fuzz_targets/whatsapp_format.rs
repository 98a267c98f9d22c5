//! The last step of every reply: `zaguan::guard::format::to_whatsapp` (Markdown → WhatsApp markup)
//! and `zaguan::guard::split::split` (cut into messages). The first input byte picks the part
//! size (1..=255 characters, or `MAX_CHARS` for 0), the rest is the text.
//!
//! Checks only what the doc comments promise:
//! - `to_whatsapp`: "no line has trailing spaces; there is never more than one blank line in a
//!   row (code blocks included); the result is trimmed";
//! - `split`, on the raw text and on the formatted one: every part is at most `max_chars`
//!   characters, "parts are trimmed; empty parts are dropped", and the parts are the text cut in
//!   order: the same non-whitespace characters, except the ```` ``` ```` fences the splitter adds
//!   around a code block it cuts (only from 16 characters per part up; below that fences are
//!   plain text and nothing is added);
//! - `guard::whatsapp_parts` is `split(to_whatsapp(md), MAX_CHARS)`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zaguan::guard::format::to_whatsapp;
use zaguan::guard::split::{MAX_CHARS, split};

/// Below this many characters per part, code fences are plain text (`split`'s module doc).
const MIN_CHARS_FOR_FENCES: usize = 16;

fuzz_target!(|data: &[u8]| {
    let Some((&size, text)) = data.split_first() else {
        return;
    };
    let max = if size == 0 {
        MAX_CHARS
    } else {
        usize::from(size)
    };
    let markdown = String::from_utf8_lossy(text);

    let formatted = to_whatsapp(&markdown);
    assert_eq!(formatted.trim(), formatted, "not trimmed: {formatted:?}");
    assert!(
        !formatted.contains("\n\n\n"),
        "two blank lines in a row: {formatted:?}"
    );
    for line in formatted.lines() {
        assert_eq!(line.trim_end(), line, "trailing space in {formatted:?}");
    }

    check_split(&markdown, max);
    check_split(&formatted, max);
    if size == 0 {
        assert_eq!(
            zaguan::guard::whatsapp_parts(&markdown),
            split(&formatted, MAX_CHARS)
        );
    }
});

fn check_split(text: &str, max: usize) {
    let parts = split(text, max);
    for part in &parts {
        assert!(!part.is_empty(), "empty part of {text:?}");
        assert_eq!(part.trim(), part, "untrimmed part of {text:?} at {max}");
        let chars = part.chars().count();
        assert!(
            chars <= max,
            "{chars} > {max} characters: {part:?} of {text:?}"
        );
    }
    let joined = parts.concat();
    if max < MIN_CHARS_FOR_FENCES {
        assert_eq!(
            visible(&joined),
            visible(text),
            "text lost or altered at {max}: {parts:?}"
        );
    } else {
        // The splitter may add ``` (reopening or closing a cut code block): compare without
        // backticks, and the extra backticks must be whole fences.
        let no_ticks = |s: &str| visible(s).replace('`', "");
        assert_eq!(
            no_ticks(&joined),
            no_ticks(text),
            "text lost or altered at {max}: {parts:?}"
        );
        let ticks = |s: &str| s.matches('`').count();
        let (before, after) = (ticks(text), ticks(&joined));
        assert!(
            after >= before && (after - before) % 3 == 0,
            "backticks {before} → {after} at {max}: {parts:?}"
        );
    }
}

fn visible(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}
