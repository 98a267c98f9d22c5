//! Inline text: emphasis spans opened and closed as WhatsApp reads them, bare links left alone.

use std::ops::Range;

use crate::guard::format::{CharClass, LAZY, MarkerRun, OpenSpan, SpanKind, Writer};

impl<'a> Writer<'a> {
    /// Called before any visible character: starts the line and writes the opening markers of
    /// spans that have not been written yet.
    pub(super) fn begin_inline(&mut self) {
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

    pub(super) fn push_inline(&mut self, text: &str) {
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

    pub(super) fn open_emphasis(&mut self, kind: SpanKind, range: Range<usize>) {
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

    pub(super) fn open_span(&mut self, kind: SpanKind) {
        self.open_span_from(kind, None);
    }

    pub(super) fn open_span_from(&mut self, kind: SpanKind, delimiter: Option<&'static str>) {
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
    pub(super) fn close_span(&mut self, kind: SpanKind, source_end: Option<usize>) {
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
    pub(super) fn write_closer(
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
    pub(super) fn put_bold_outside(&mut self) -> bool {
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
    pub(super) fn inside_bare_url(&self, range: Range<usize>) -> bool {
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

    pub(super) fn text(&mut self, text: &str) {
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

    pub(super) fn flush_run(&mut self) {
        self.resolve_run(CharClass::Other);
    }

    /// Keeps a single literal marker and underscores (`__init__`); drops a run of two or more `*`
    /// or `~` unless it stands between two spaces (`2 ** 3`) or inside a word (`2**10`).
    pub(super) fn resolve_run(&mut self, after: CharClass) {
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
}
