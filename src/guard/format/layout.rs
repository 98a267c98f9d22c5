//! Block layout: blank lines between blocks, list and quote prefixes, line breaks.

use std::fmt::Write as _;

use crate::guard::format::{Container, LAZY, Writer};

impl<'a> Writer<'a> {
    /// Blocks inside a list item are tight; elsewhere they are separated by a blank line.
    pub(super) fn block_gap(&self) -> u8 {
        match self.containers.last() {
            Some(Container::Item { .. }) => 1,
            _ => 2,
        }
    }

    /// Owes `newlines` (1 = a line break, 2 = a blank line) before whatever comes next.
    pub(super) fn gap(&mut self, newlines: u8) {
        if self.pending == 0 {
            self.pending_depth = self.containers.len();
        }
        self.pending = self.pending.max(newlines);
        self.pending_depth = self.pending_depth.min(self.containers.len());
        self.at_line_start = true;
    }

    /// The gap after a container replaces the one its last block asked for (a quote ending
    /// inside a list item is followed by the next item, not by a blank line).
    pub(super) fn gap_after_container(&mut self, newlines: u8) {
        self.pending = 0;
        self.gap(newlines);
    }

    pub(super) fn pop_container(&mut self) {
        self.containers.pop();
        self.pending_depth = self.pending_depth.min(self.containers.len());
    }

    /// A line break inside a block: spans are closed before it and reopened after it.
    pub(super) fn line_break(&mut self) {
        self.interrupt_spans();
        self.gap(1);
    }

    /// Writes the closing markers of the open spans; they reopen before the next character.
    pub(super) fn interrupt_spans(&mut self) {
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
    pub(super) fn hard_break(&mut self) {
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
    pub(super) fn ensure_line(&mut self) {
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

    pub(super) fn write_prefix(&mut self, depth: usize, blank: bool) {
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

    pub(super) fn trim_trailing_blanks(&mut self) {
        let end = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(end);
    }
}
