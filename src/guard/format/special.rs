//! Code, links, tables and HTML: what WhatsApp has no markup for, written as plain text.

use crate::guard::format::tags::{is_block_tag, is_line_break_tag, same_target};
use crate::guard::format::{HtmlState, SpanKind, Writer};

impl<'a> Writer<'a> {
    pub(super) fn code_text(&mut self, text: &str) {
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

    pub(super) fn end_code_block(&mut self) {
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

    pub(super) fn end_link(&mut self) {
        let Some(link) = self.links.pop() else {
            return;
        };
        let text = self.out[mark(&self.out, link.text_start)..].trim();
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

    pub(super) fn start_cell(&mut self) {
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

    pub(super) fn end_cell(&mut self) {
        let Some(table) = &mut self.table else {
            return;
        };
        if table.in_head {
            let start = mark(&self.out, table.cell_start);
            let header = self.out[start..].trim().to_owned();
            self.out.truncate(start);
            table.headers.push(header);
            return;
        }
        let cell = table.cell;
        table.cell += 1;
        if cell == 0 {
            self.close_span(SpanKind::Bold, None);
        } else if self.out.len() == table.label_end {
            let start = mark(&self.out, table.cell_start);
            self.out.truncate(start);
        } else {
            table.pairs += 1;
        }
    }

    pub(super) fn end_table(&mut self) {
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

    /// Writes the text of HTML without its tags; `<br>` and block tags break the line.
    pub(super) fn html(&mut self, html: &str) {
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

/// A position taken in `out` earlier, as it stands now: a new line since then may have trimmed
/// the whitespace it was after (an ideographic space is three bytes).
fn mark(out: &str, at: usize) -> usize {
    let mut at = at.min(out.len());
    while !out.is_char_boundary(at) {
        at -= 1;
    }
    at
}
