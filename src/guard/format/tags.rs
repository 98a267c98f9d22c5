//! HTML tags as WhatsApp writers send them, and links whose text is their target.

/// The lowercase name of an HTML tag (`<br/>` → `br`, `</P>` → `p`).
pub(super) fn tag_name(tag: &str) -> &[u8] {
    let bytes = tag.as_bytes();
    let start = match bytes {
        [b'<', b'/', ..] => 2,
        [b'<', ..] => 1,
        _ => 0,
    };
    let len = bytes[start..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    &bytes[start..start + len]
}

pub(super) fn is_line_break_tag(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"br")
}

pub(super) fn is_block_tag(name: &[u8]) -> bool {
    const BLOCK_TAGS: [&[u8]; 16] = [
        b"p",
        b"div",
        b"li",
        b"tr",
        b"ul",
        b"ol",
        b"table",
        b"blockquote",
        b"h1",
        b"h2",
        b"h3",
        b"h4",
        b"h5",
        b"h6",
        b"pre",
        b"hr",
    ];
    BLOCK_TAGS.iter().any(|t| t.eq_ignore_ascii_case(name))
}

/// Whether a link's text already says its URL (`[https://x.es](https://x.es/)`, `www.x.es`).
pub(super) fn same_target(text: &str, url: &str) -> bool {
    fn bare(s: &str) -> &str {
        let s = s.trim();
        let s = s.strip_prefix("mailto:").unwrap_or(s);
        let s = s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))
            .unwrap_or(s);
        let s = s.strip_prefix("www.").unwrap_or(s);
        s.trim_end_matches('/')
    }
    !text.is_empty() && bare(text).eq_ignore_ascii_case(bare(url))
}
