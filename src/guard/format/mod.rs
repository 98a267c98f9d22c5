//! Markdown as LLMs write it → WhatsApp markup.
//!
//! The assistants answer in Markdown, but WhatsApp shows its own markup: `*bold*`, `_italic_`,
//! `~strike~`, ```` ``` ```` monospace blocks, `` `inline code` ``, `- ` / `1. ` list lines and
//! `> ` quotes. Every reply goes through [`to_whatsapp`] before being split into messages
//! (`guard::split`). The conversion walks pulldown-cmark's events (CommonMark + GFM tables and
//! strikethrough) and writes into one pre-sized `String`.
//!
//! The scheme:
//! - `**b**`/`__b__` → `*b*`; `*i*`/`_i_` → `_i_`; `~~s~~` → `~s~`; bold + italic → `*_x_*`.
//!   Only the outermost span of a kind is marked (a bold inside a heading is not doubled), a span
//!   is never emitted empty, and a span crossing a line break is closed before it and reopened
//!   after it (WhatsApp formats within a line).
//! - Headings of any level → a bold line `*Heading*`, then a blank line.
//! - `[text](url)` → `text: url`; a link whose text is its URL (autolinks,
//!   `[https://x](https://x)`) → just the URL; `![alt](url)` → `alt: url`.
//! - Tables → one line per body row: the first cell in bold, then `Header: value` pairs, the first
//!   one after ` — `, the next ones after ` · `:
//!   `*P-102* — Zona: Chamberí · Precio: 450.000 €`. Empty cells are left out; a table with no
//!   body rows becomes its headers joined by ` · `.
//! - Lists: `- item` (unordered), `N. item` (ordered, from the list's own start number), nested
//!   lists indented two spaces per level, continuation lines indented like the nesting, item
//!   paragraphs tight.
//! - Code blocks → ```` ``` ```` on its own line, the code, ```` ``` ```` (language tag dropped);
//!   inline code → `` `code` ``.
//! - Block quotes → lines prefixed `> `. Horizontal rules → a blank line.
//! - HTML (blocks and inline) → its text without tags; `<br>` and block tags (`<p>`, `<div>`,
//!   `<li>`, …) → line breaks.
//! - Soft and hard breaks → a newline. Paragraphs and blocks are separated by one blank line; no
//!   line has trailing spaces; there is never more than one blank line in a row (code blocks
//!   included); the result is trimmed.
//!
//! Literal markers: WhatsApp has no escape, so a single literal `*`, `_` or `~` that CommonMark did
//! not take as emphasis (`5 * 3`, `snake_case_name`, `precio*`) is kept as is: WhatsApp only
//! formats at word boundaries with a closing marker on the same line, which such text rarely
//! forms. Emphasis glued to a word on either side (`a*b*c`, `un**gran**piso`), which WhatsApp
//! would not format, keeps its Markdown delimiters as literal text. A run of two or more literal
//! `*` or `~` (`**hola` with no closing, `**` alone, `hola~~`) is a broken Markdown marker and is
//! dropped, unless it sits between two spaces (`2 ** 3`) or inside a word (`2**10`); runs of `_`
//! are kept (`__init_data`). Emphasis that CommonMark found inside a bare URL
//! (`https://x.es/_promo_/piso`) is written back verbatim, so URLs are never altered.

mod layout;

mod inline;

mod special;

mod tags;

use crate::guard::format::tags::{is_line_break_tag, tag_name};

use std::ops::Range;

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Markdown as LLMs write it → WhatsApp markup.
pub fn to_whatsapp(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut events = Parser::new_ext(markdown, options)
        .into_offset_iter()
        .peekable();
    let mut writer = Writer::new(markdown);
    while let Some((event, range)) = events.next() {
        if writer.skipped(&event) {
            continue;
        }
        // `***x***` parses as emphasis around strong: written `*_x_*` (bold outside), the usual
        // WhatsApp order.
        if matches!(event, Event::End(TagEnd::Strong))
            && matches!(events.peek(), Some((Event::End(TagEnd::Emphasis), _)))
            && writer.put_bold_outside()
        {
            let (_, outer) = events.next().expect("peeked");
            writer.flush_run();
            writer.close_span(SpanKind::Italic, Some(range.end));
            writer.close_span(SpanKind::Bold, Some(outer.end));
            continue;
        }
        writer.event(event, range);
    }
    writer.finish()
}

/// A formatting span WhatsApp knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SpanKind {
    Bold = 0,
    Italic = 1,
    Strike = 2,
}

impl SpanKind {
    fn marker(self) -> char {
        match self {
            SpanKind::Bold => '*',
            SpanKind::Italic => '_',
            SpanKind::Strike => '~',
        }
    }
}

/// Where a span's opening marker sits in the output; [`LAZY`] while it is still to be written
/// (before its first character, and again after a line break closed it).
struct OpenSpan {
    kind: SpanKind,
    open_at: usize,
    /// The Markdown delimiter (`*`, `**`, `__`, `~~`…), for emphasis from the source.
    delimiter: Option<&'static str>,
}

const LAZY: usize = usize::MAX;

/// A block that prefixes the lines written inside it.
enum Container {
    Quote,
    List {
        next_number: Option<u64>,
    },
    Item {
        number: Option<u64>,
        marker_due: bool,
    },
}

/// A link or image whose text is being written: the URL follows it unless the text is the URL.
struct OpenLink<'a> {
    url: CowStr<'a>,
    autolink: bool,
    text_start: usize,
}

/// A table being turned into lines.
#[derive(Default)]
struct TableState {
    headers: Vec<String>,
    in_head: bool,
    cell: usize,
    cell_start: usize,
    label_end: usize,
    row_start: usize,
    pairs: usize,
    rows: usize,
}

/// A run of literal `*`, `_` or `~` in text, kept or dropped once the character after it is known.
struct MarkerRun {
    marker: char,
    count: usize,
    before: CharClass,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CharClass {
    Space,
    Word,
    Other,
}

impl CharClass {
    fn of(c: Option<char>) -> Self {
        match c {
            Some(c) if c.is_whitespace() => CharClass::Space,
            Some(c) if c.is_alphanumeric() => CharClass::Word,
            _ => CharClass::Other,
        }
    }
}

/// Tag stripping state for HTML.
#[derive(Default)]
struct HtmlState {
    in_tag: bool,
    name: [u8; 12],
    name_len: usize,
    name_done: bool,
}

struct Writer<'a> {
    source: &'a str,
    out: String,
    containers: Vec<Container>,
    /// Newlines owed before the next line (2 = a blank line), and how many containers the blank
    /// line belongs to.
    pending: u8,
    pending_depth: usize,
    at_line_start: bool,
    spans: Vec<OpenSpan>,
    lazy_spans: usize,
    depth: [u32; 3],
    run: Option<MarkerRun>,
    links: Vec<OpenLink<'a>>,
    table: Option<TableState>,
    in_code_block: bool,
    /// The opening fence of the current code block is written (it waits for the first line).
    code_fence_open: bool,
    html: HtmlState,
    /// Events left to skip (emphasis written back verbatim inside a URL).
    skip: usize,
    /// Writing a table header cell: no line handling, the text is taken out afterwards.
    capture: bool,
}

impl<'a> Writer<'a> {
    fn new(source: &'a str) -> Self {
        Writer {
            source,
            out: String::with_capacity(source.len() + source.len() / 8 + 16),
            containers: Vec::new(),
            pending: 0,
            pending_depth: 0,
            at_line_start: true,
            spans: Vec::new(),
            lazy_spans: 0,
            depth: [0; 3],
            run: None,
            links: Vec::new(),
            table: None,
            in_code_block: false,
            code_fence_open: false,
            html: HtmlState::default(),
            skip: 0,
            capture: false,
        }
    }

    fn skipped(&mut self, event: &Event<'a>) -> bool {
        if self.skip == 0 {
            return false;
        }
        match event {
            Event::Start(_) => self.skip += 1,
            Event::End(_) => self.skip -= 1,
            _ => {}
        }
        true
    }

    fn event(&mut self, event: Event<'a>, range: Range<usize>) {
        if let Event::Text(text) = &event {
            if self.in_code_block {
                self.code_text(text);
            } else {
                self.text(text);
            }
            return;
        }
        self.flush_run();
        match event {
            Event::Start(tag) => self.start(tag, range),
            Event::End(tag) => self.end(tag, range),
            Event::Text(_) => unreachable!("handled above"),
            Event::Code(code) => {
                self.begin_inline();
                self.out.push('`');
                self.out.push_str(&code);
                self.out.push('`');
            }
            Event::Html(html) => self.html(&html),
            Event::InlineHtml(html) => {
                if is_line_break_tag(tag_name(&html)) {
                    self.hard_break();
                }
            }
            Event::SoftBreak | Event::HardBreak => self.hard_break(),
            Event::Rule => self.gap(self.block_gap()),
            Event::InlineMath(math) | Event::DisplayMath(math) => {
                self.begin_inline();
                self.out.push_str(&math);
            }
            Event::FootnoteReference(_) | Event::TaskListMarker(_) => {}
        }
    }

    fn start(&mut self, tag: Tag<'a>, range: Range<usize>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.gap(1),
            Tag::Heading { .. } => {
                self.gap(1);
                self.open_span(SpanKind::Bold);
            }
            Tag::BlockQuote(_) => {
                self.gap(1);
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(_) => {
                self.gap(1);
                self.in_code_block = true;
            }
            Tag::List(start) => {
                self.gap(1);
                self.containers.push(Container::List { next_number: start });
            }
            Tag::Item => {
                self.gap(1);
                let number = match self.containers.last_mut() {
                    Some(Container::List {
                        next_number: Some(n),
                    }) => {
                        let number = *n;
                        *n += 1;
                        Some(number)
                    }
                    _ => None,
                };
                self.containers.push(Container::Item {
                    number,
                    marker_due: true,
                });
            }
            Tag::Emphasis => self.open_emphasis(SpanKind::Italic, range),
            Tag::Strong => self.open_emphasis(SpanKind::Bold, range),
            Tag::Strikethrough => self.open_emphasis(SpanKind::Strike, range),
            Tag::Link {
                link_type,
                dest_url,
                ..
            }
            | Tag::Image {
                link_type,
                dest_url,
                ..
            } => {
                self.begin_inline();
                self.links.push(OpenLink {
                    url: dest_url,
                    autolink: matches!(link_type, LinkType::Autolink | LinkType::Email),
                    text_start: self.out.len(),
                });
            }
            Tag::Table(_) => {
                self.gap(1);
                self.table = Some(TableState::default());
            }
            Tag::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = true;
                    table.cell = 0;
                }
                self.capture = true;
                self.depth[SpanKind::Bold as usize] += 1;
            }
            Tag::TableRow => {
                self.gap(1);
                if let Some(table) = &mut self.table {
                    table.rows += 1;
                    table.cell = 0;
                    table.pairs = 0;
                }
            }
            Tag::TableCell => self.start_cell(),
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.gap(1),
            Tag::Superscript | Tag::Subscript => {}
        }
    }

    fn end(&mut self, tag: TagEnd, range: Range<usize>) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => self.gap(self.block_gap()),
            TagEnd::Heading(_) => {
                self.close_span(SpanKind::Bold, None);
                self.gap(self.block_gap());
            }
            TagEnd::BlockQuote(_) | TagEnd::List(_) => {
                self.pop_container();
                self.gap_after_container(self.block_gap());
            }
            TagEnd::Item => {
                self.pop_container();
                self.gap_after_container(1);
            }
            TagEnd::CodeBlock => self.end_code_block(),
            TagEnd::Emphasis => self.close_span(SpanKind::Italic, Some(range.end)),
            TagEnd::Strong => self.close_span(SpanKind::Bold, Some(range.end)),
            TagEnd::Strikethrough => self.close_span(SpanKind::Strike, Some(range.end)),
            TagEnd::Link | TagEnd::Image => self.end_link(),
            TagEnd::Table => self.end_table(),
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = false;
                }
                self.capture = false;
                self.depth[SpanKind::Bold as usize] -= 1;
            }
            TagEnd::TableRow => self.gap(1),
            TagEnd::TableCell => self.end_cell(),
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.gap(self.block_gap()),
            TagEnd::Superscript | TagEnd::Subscript => {}
        }
    }

    fn finish(mut self) -> String {
        self.flush_run();
        let end = self.out.trim_end().len();
        self.out.truncate(end);
        let lead = self.out.len() - self.out.trim_start().len();
        if lead > 0 {
            self.out.drain(..lead);
        }
        self.out
    }

    // ---- lines and blocks ----

    // ---- spans ----

    // ---- text ----

    // ---- code blocks ----

    // ---- links ----

    // ---- tables ----

    // ---- HTML ----
}

#[cfg(test)]
mod tests;
