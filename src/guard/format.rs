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
//! - `[text](url)` → `text: url`; a link whose text is its URL (autolinks, `[https://x](https://x)`)
//!   → just the URL; `![alt](url)` → `alt: url`.
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

use std::fmt::Write as _;
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

    /// Blocks inside a list item are tight; elsewhere they are separated by a blank line.
    fn block_gap(&self) -> u8 {
        match self.containers.last() {
            Some(Container::Item { .. }) => 1,
            _ => 2,
        }
    }

    /// Owes `newlines` (1 = a line break, 2 = a blank line) before whatever comes next.
    fn gap(&mut self, newlines: u8) {
        if self.pending == 0 {
            self.pending_depth = self.containers.len();
        }
        self.pending = self.pending.max(newlines);
        self.pending_depth = self.pending_depth.min(self.containers.len());
        self.at_line_start = true;
    }

    /// The gap after a container replaces the one its last block asked for (a quote ending
    /// inside a list item is followed by the next item, not by a blank line).
    fn gap_after_container(&mut self, newlines: u8) {
        self.pending = 0;
        self.gap(newlines);
    }

    fn pop_container(&mut self) {
        self.containers.pop();
        self.pending_depth = self.pending_depth.min(self.containers.len());
    }

    /// A line break inside a block: spans are closed before it and reopened after it.
    fn line_break(&mut self) {
        self.interrupt_spans();
        self.gap(1);
    }

    /// Writes the closing markers of the open spans; they reopen before the next character.
    fn interrupt_spans(&mut self) {
        for i in (0..self.spans.len()).rev() {
            let span = &self.spans[i];
            if span.open_at != LAZY {
                let (kind, open_at) = (span.kind, span.open_at);
                self.write_closer(kind, open_at, false, None);
                self.spans[i].open_at = LAZY;
                self.lazy_spans += 1;
            }
        }
    }

    /// A soft, hard or `<br>` break; a space inside a table cell, which must stay on one line.
    fn hard_break(&mut self) {
        if self.table.is_some() {
            self.begin_inline();
            self.out.push(' ');
        } else if self.at_line_start && !self.out.is_empty() {
            self.gap(2);
        } else {
            self.line_break();
        }
    }

    /// Writes what is owed before a new line: the newlines, then the containers' prefix.
    fn ensure_line(&mut self) {
        if !self.at_line_start || self.capture {
            return;
        }
        self.at_line_start = false;
        if !self.out.is_empty() && self.pending > 0 {
            // Also drops a line left empty (its only content was a marker taken back).
            let end = self.out.trim_end().len();
            self.out.truncate(end);
            self.out.push('\n');
            if self.pending >= 2 {
                self.write_prefix(self.pending_depth, true);
                self.trim_trailing_blanks();
                self.out.push('\n');
            }
        }
        self.pending = 0;
        self.write_prefix(self.containers.len(), false);
    }

    fn write_prefix(&mut self, depth: usize, blank: bool) {
        let Writer {
            out, containers, ..
        } = self;
        for container in &mut containers[..depth] {
            match container {
                Container::Quote => out.push_str("> "),
                Container::List { .. } => {}
                Container::Item { number, marker_due } => {
                    if *marker_due && !blank {
                        *marker_due = false;
                        match number {
                            Some(n) => {
                                let _ = write!(out, "{n}. ");
                            }
                            None => out.push_str("- "),
                        }
                    } else {
                        out.push_str("  ");
                    }
                }
            }
        }
    }

    fn trim_trailing_blanks(&mut self) {
        let end = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(end);
    }

    /// Called before any visible character: starts the line and writes the opening markers of
    /// spans that have not been written yet.
    fn begin_inline(&mut self) {
        if self.at_line_start {
            self.ensure_line();
        }
        if self.lazy_spans > 0 {
            for span in &mut self.spans {
                if span.open_at == LAZY {
                    span.open_at = self.out.len();
                    self.out.push(span.kind.marker());
                }
            }
            self.lazy_spans = 0;
        }
    }

    fn push_inline(&mut self, text: &str) {
        let text = if self.at_line_start {
            text.trim_start()
        } else {
            text
        };
        if !text.is_empty() {
            self.begin_inline();
            self.out.push_str(text);
        }
    }

    // ---- spans ----

    fn open_emphasis(&mut self, kind: SpanKind, range: Range<usize>) {
        if self.inside_bare_url(range.clone()) {
            let source = self.source;
            self.push_inline(&source[range]);
            self.skip = 1;
        } else {
            let bytes = &self.source.as_bytes()[range];
            let delimiter = match (kind, bytes) {
                (SpanKind::Bold, [b'_', ..]) => "__",
                (SpanKind::Bold, _) => "**",
                (SpanKind::Italic, [b'_', ..]) => "_",
                (SpanKind::Italic, _) => "*",
                (SpanKind::Strike, [b'~', b'~', ..]) => "~~",
                (SpanKind::Strike, _) => "~",
            };
            self.open_span_from(kind, Some(delimiter));
        }
    }

    fn open_span(&mut self, kind: SpanKind) {
        self.open_span_from(kind, None);
    }

    fn open_span_from(&mut self, kind: SpanKind, delimiter: Option<&'static str>) {
        self.depth[kind as usize] += 1;
        if self.depth[kind as usize] == 1 {
            self.spans.push(OpenSpan {
                kind,
                open_at: LAZY,
                delimiter,
            });
            self.lazy_spans += 1;
        }
    }

    /// Closes a span; `source_end` is where it ends in the Markdown, to see what follows it.
    fn close_span(&mut self, kind: SpanKind, source_end: Option<usize>) {
        self.depth[kind as usize] -= 1;
        if self.depth[kind as usize] > 0 {
            return;
        }
        let Some(span) = self.spans.pop() else {
            return;
        };
        debug_assert_eq!(span.kind, kind);
        if span.open_at == LAZY {
            // Never written: nothing inside it.
            self.lazy_spans -= 1;
            return;
        }
        let after = source_end.and_then(|end| self.source[end..].chars().next());
        let glued_after = CharClass::of(after) == CharClass::Word;
        self.write_closer(kind, span.open_at, glued_after, span.delimiter);
    }

    /// Writes the closing marker of a span opened at `open_at`, keeping whitespace outside the
    /// markers (WhatsApp needs `*x*`, not `* x *`). Drops the span when it holds only whitespace.
    /// A span glued to a word on either side (`a*b*c`, `un**gran**piso`) would not be formatted
    /// by WhatsApp: it gets its Markdown `delimiter` back as literal text (math stays math), or no
    /// markers at all when it has none.
    fn write_closer(
        &mut self,
        kind: SpanKind,
        open_at: usize,
        glued_after: bool,
        delimiter: Option<&str>,
    ) {
        let marker = kind.marker();
        let inner = &self.out[open_at + 1..];
        let lead = inner.len() - inner.trim_start().len();
        if lead == inner.len() {
            self.out.remove(open_at);
            return;
        }
        let mut open_at = open_at;
        if lead > 0 {
            self.out.remove(open_at);
            open_at += lead;
            self.out.insert(open_at, marker);
        }
        let before = self.out[..open_at].chars().next_back();
        if glued_after || CharClass::of(before) == CharClass::Word {
            match delimiter {
                Some(delimiter) => {
                    self.out.replace_range(open_at..open_at + 1, delimiter);
                    self.out.push_str(delimiter);
                }
                None => {
                    self.out.remove(open_at);
                }
            }
            return;
        }
        let content_end = self.out.trim_end().len();
        if content_end == self.out.len() {
            self.out.push(marker);
        } else {
            self.out.insert(content_end, marker);
        }
    }

    /// For `***x***` (emphasis around strong, both just written): swaps the two opening markers
    /// and the spans so that bold is outside. False when the layout is anything else.
    fn put_bold_outside(&mut self) -> bool {
        let n = self.spans.len();
        if n < 2 || self.depth[SpanKind::Bold as usize] != 1 {
            return false;
        }
        if self.depth[SpanKind::Italic as usize] != 1 {
            return false;
        }
        let (outer, inner) = (&self.spans[n - 2], &self.spans[n - 1]);
        if outer.kind != SpanKind::Italic
            || inner.kind != SpanKind::Bold
            || outer.open_at == LAZY
            || inner.open_at != outer.open_at + 1
        {
            return false;
        }
        let at = outer.open_at;
        self.out.replace_range(at..at + 2, "*_");
        self.spans.swap(n - 2, n - 1);
        self.spans[n - 2].open_at = at;
        self.spans[n - 1].open_at = at + 1;
        true
    }

    /// Whether emphasis starting at `range` is part of a bare URL (`https://x.es/_a_/b`).
    fn inside_bare_url(&self, range: Range<usize>) -> bool {
        let bytes = self.source.as_bytes();
        if bytes[range.clone()].iter().any(u8::is_ascii_whitespace) {
            return false;
        }
        let floor = range.start.saturating_sub(256);
        let mut start = range.start;
        while start > floor
            && !matches!(bytes[start - 1], b' ' | b'\t' | b'\n' | b'\r' | b'(' | b'<')
        {
            start -= 1;
        }
        let token = &bytes[start..range.start];
        token.starts_with(b"www.") || token.windows(3).any(|w| w == b"://")
    }

    // ---- text ----

    fn text(&mut self, text: &str) {
        let mut rest = text;
        while !rest.is_empty() {
            match rest.bytes().position(|b| matches!(b, b'*' | b'_' | b'~')) {
                None => {
                    self.resolve_run(CharClass::of(rest.chars().next()));
                    self.push_inline(rest);
                    return;
                }
                Some(i) => {
                    if i > 0 {
                        self.resolve_run(CharClass::of(rest.chars().next()));
                        self.push_inline(&rest[..i]);
                    }
                    let marker = char::from(rest.as_bytes()[i]);
                    match &mut self.run {
                        Some(run) if run.marker == marker => run.count += 1,
                        _ => {
                            self.resolve_run(CharClass::Other);
                            let before = if self.at_line_start {
                                CharClass::Other
                            } else {
                                CharClass::of(self.out.chars().next_back())
                            };
                            self.run = Some(MarkerRun {
                                marker,
                                count: 1,
                                before,
                            });
                        }
                    }
                    rest = &rest[i + 1..];
                }
            }
        }
    }

    fn flush_run(&mut self) {
        self.resolve_run(CharClass::Other);
    }

    /// Keeps a single literal marker and underscores (`__init__`); drops a run of two or more `*`
    /// or `~` unless it stands between two spaces (`2 ** 3`) or inside a word (`2**10`).
    fn resolve_run(&mut self, after: CharClass) {
        let Some(run) = self.run.take() else {
            return;
        };
        let keep = run.count == 1
            || run.marker == '_'
            || (run.before == CharClass::Space && after == CharClass::Space)
            || (run.before == CharClass::Word && after == CharClass::Word);
        if keep {
            self.begin_inline();
            for _ in 0..run.count {
                self.out.push(run.marker);
            }
        }
    }

    // ---- code blocks ----

    fn code_text(&mut self, text: &str) {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 && self.code_fence_open {
                // A line ends; an empty line owes a blank line (at most one in a row).
                let newlines = if self.at_line_start { 2 } else { 1 };
                self.gap(newlines);
            }
            if !line.trim().is_empty() {
                if !self.code_fence_open {
                    self.ensure_line();
                    self.out.push_str("```");
                    self.code_fence_open = true;
                    self.gap(1);
                }
                self.ensure_line();
                self.out.push_str(line);
            }
        }
    }

    fn end_code_block(&mut self) {
        self.in_code_block = false;
        if !self.code_fence_open {
            // Nothing was written: no empty monospace block.
            return;
        }
        self.code_fence_open = false;
        self.pending = 1;
        self.at_line_start = true;
        self.ensure_line();
        self.out.push_str("```");
        self.gap(self.block_gap());
    }

    // ---- links ----

    fn end_link(&mut self) {
        let Some(link) = self.links.pop() else {
            return;
        };
        let text = self.out[link.text_start..].trim();
        if link.url.is_empty() || link.autolink || same_target(text, &link.url) {
            return;
        }
        if text.is_empty() {
            self.push_inline(&link.url);
        } else {
            // The URL stays out of the formatting so that WhatsApp links it whole.
            self.interrupt_spans();
            self.out.push_str(": ");
            self.out.push_str(&link.url);
        }
    }

    // ---- tables ----

    fn start_cell(&mut self) {
        let Some(table) = &mut self.table else {
            return;
        };
        if table.in_head {
            table.cell_start = self.out.len();
            return;
        }
        if table.cell == 0 {
            self.ensure_line();
            if let Some(table) = &mut self.table {
                table.row_start = self.out.len();
            }
            self.open_span(SpanKind::Bold);
            return;
        }
        self.ensure_line();
        let Writer { out, table, .. } = self;
        let Some(table) = table else {
            return;
        };
        table.cell_start = out.len();
        if out.len() > table.row_start {
            out.push_str(if table.pairs == 0 { " — " } else { " · " });
        }
        if let Some(header) = table.headers.get(table.cell).filter(|h| !h.is_empty()) {
            out.push_str(header);
            out.push_str(": ");
        }
        table.label_end = out.len();
    }

    fn end_cell(&mut self) {
        let Some(table) = &mut self.table else {
            return;
        };
        if table.in_head {
            let header = self.out[table.cell_start..].trim().to_owned();
            self.out.truncate(table.cell_start);
            table.headers.push(header);
            return;
        }
        let cell = table.cell;
        table.cell += 1;
        if cell == 0 {
            self.close_span(SpanKind::Bold, None);
        } else if self.out.len() == table.label_end {
            self.out.truncate(table.cell_start);
        } else {
            table.pairs += 1;
        }
    }

    fn end_table(&mut self) {
        let Some(table) = self.table.take() else {
            return;
        };
        if table.rows == 0 {
            let mut first = true;
            for header in table.headers.iter().filter(|h| !h.is_empty()) {
                if !first {
                    self.out.push_str(" · ");
                }
                self.push_inline(header);
                first = false;
            }
        }
        self.gap(self.block_gap());
    }

    // ---- HTML ----

    /// Writes the text of HTML without its tags; `<br>` and block tags break the line.
    fn html(&mut self, html: &str) {
        for c in html.chars() {
            let state = &mut self.html;
            if state.in_tag {
                if c == '>' {
                    state.in_tag = false;
                    let name = &state.name[..state.name_len];
                    if is_line_break_tag(name) {
                        self.hard_break();
                    } else if is_block_tag(name) {
                        self.gap(1);
                    }
                } else if !state.name_done {
                    if c.is_ascii_alphanumeric() && state.name_len < state.name.len() {
                        state.name[state.name_len] = c.to_ascii_lowercase() as u8;
                        state.name_len += 1;
                    } else if !(c == '/' && state.name_len == 0) {
                        state.name_done = true;
                    }
                }
            } else if c == '<' {
                *state = HtmlState {
                    in_tag: true,
                    ..HtmlState::default()
                };
            } else if c == '\n' {
                if !self.at_line_start {
                    self.line_break();
                }
            } else if !(self.at_line_start && c.is_whitespace()) {
                self.begin_inline();
                self.out.push(c);
            }
        }
    }
}

/// The lowercase name of an HTML tag (`<br/>` → `br`, `</P>` → `p`).
fn tag_name(tag: &str) -> &[u8] {
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

fn is_line_break_tag(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"br")
}

fn is_block_tag(name: &[u8]) -> bool {
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
fn same_target(text: &str, url: &str) -> bool {
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

#[cfg(test)]
mod tests;
