//! Cuts a WhatsApp-formatted reply into messages WhatsApp accepts.
//!
//! A text message body holds at most [`MAX_CHARS`] characters, and a long answer (a list of
//! properties, a mortgage simulation) can exceed it: [`split`] cuts it into parts sent in order,
//! each as full as possible and cut where a reader expects a pause.
//!
//! The heuristic, for each part: take the longest window that fits (`max_chars` characters,
//! counted as `char`s), then look back for the last boundary of each kind inside it, in this
//! order of preference: a paragraph break (blank line), a line break, a sentence end (`. `, `? `,
//! `! `, `… `, possibly after a closing `)`, `"`, `»`, `*`, `_`, `~`; or a space before `¿`/`¡`),
//! a word boundary (whitespace). The first kind found in the last half of the window wins; if no
//! kind has one there, the first kind found anywhere in the window; a word longer than the window
//! is cut at the window's end. So a part gives up at most half of its room to end at a better
//! boundary.
//!
//! Formatting is never cut: a boundary inside a `*…*`, `_…_`, `~…~` or `` `…` `` span on one line
//! (WhatsApp's rules: the opening marker not after a letter or digit and before a non-space, the
//! closing one after a non-space and not before a letter or digit) or inside a ```` ```…``` ````
//! block is not a boundary; the cut moves before the span. Only when no boundary outside spans
//! exists in the window (a span longer than a part) is a span cut. A code block longer than a part
//! is cut inside: the part ends with ```` ``` ```` and the next one starts with ```` ``` ````
//! again, both markers counted within `max_chars`. Inside code, spaces rank below every other
//! boundary in the window, so code is cut between its lines unless a line is longer than a part.
//! (Below 16 characters per part there is no room for the markers, and code fences are treated
//! as plain text.)
//!
//! A cut does not separate a character from a following zero-width joiner, variation selector,
//! combining mark, emoji modifier or tag, nor a character from a preceding zero-width joiner, nor
//! two regional indicators (a flag) — unless a whole part's worth of text is such a joined run,
//! which is then cut at the window's end like an overlong word. Parts are trimmed; empty parts
//! are dropped.

use std::ops::Range;

/// WhatsApp's limit for a text message body, in characters.
pub const MAX_CHARS: usize = 4096;

/// Cuts a WhatsApp-formatted text into parts of at most `max_chars` characters (chars, not bytes),
/// in order.
pub fn split(text: &str, max_chars: usize) -> Vec<String> {
    parts(text, max_chars)
        .into_iter()
        .map(|part| part.text)
        .collect()
}

/// The fence that opens or closes a monospace block.
const FENCE: &str = "```";
/// Added at the start of a part that continues a code block cut by the previous part.
const REOPEN: &str = "```\n";
/// Added at the end of a part that cuts a code block.
const RECLOSE: &str = "\n```";
/// Characters [`REOPEN`] and [`RECLOSE`] take each.
const FENCE_COST: usize = 4;
/// Below this many characters per part, code fences are plain text.
const MIN_CHARS_FOR_FENCES: usize = 16;

/// One message, with the fences the splitter added to it.
struct Part {
    text: String,
    /// Starts with an added [`REOPEN`].
    #[cfg_attr(not(test), allow(dead_code))]
    reopened: bool,
    /// Ends with an added [`RECLOSE`].
    #[cfg_attr(not(test), allow(dead_code))]
    closed: bool,
}

fn parts(text: &str, max_chars: usize) -> Vec<Part> {
    let max_chars = max_chars.max(1);
    let layout = Layout::new(text, max_chars);
    let mut parts = Vec::new();
    let mut pos = 0;
    let mut reopened = false;
    loop {
        pos = skip_blank(text, pos, reopened);
        if pos >= text.len() {
            break;
        }
        let budget = max_chars - if reopened { FENCE_COST } else { 0 };
        let Some(window) = Window::measure(text, pos, budget) else {
            parts.push(Part::new(text[pos..].trim_end(), reopened, false));
            break;
        };
        let cut = [Tier::Strict, Tier::Loose, Tier::Raw]
            .into_iter()
            .find_map(|tier| layout.find_cut(pos, &window, tier))
            .unwrap_or(if layout.inside_code(window.end) {
                window.code_end
            } else {
                window.end
            });
        let closed = layout.inside_code(cut);
        parts.push(Part::new(text[pos..cut].trim_end(), reopened, closed));
        pos = cut;
        reopened = closed;
    }
    parts
}

impl Part {
    fn new(content: &str, reopened: bool, closed: bool) -> Self {
        let mut text = String::with_capacity(content.len() + 2 * FENCE_COST);
        if reopened {
            text.push_str(REOPEN);
        }
        text.push_str(content);
        if closed {
            text.push_str(RECLOSE);
        }
        Part {
            text,
            reopened,
            closed,
        }
    }
}

/// Skips the whitespace a part must not start with; inside a reopened code block only the line
/// breaks and, mid-line, the spaces, so that indentation survives.
fn skip_blank(text: &str, pos: usize, in_code: bool) -> usize {
    let rest = &text[pos..];
    let kept = if in_code {
        let lines_skipped = rest.trim_start_matches(['\n', '\r']);
        if lines_skipped.len() < rest.len() || text[..pos].ends_with('\n') {
            lines_skipped
        } else {
            rest.trim_start_matches([' ', '\t'])
        }
    } else {
        rest.trim_start()
    };
    pos + rest.len() - kept.len()
}

/// The room of one part, as byte offsets into the text.
struct Window {
    /// After `budget` characters: the furthest cut.
    end: usize,
    /// After `budget - 4` characters: the furthest cut inside a code block (room for [`RECLOSE`]).
    code_end: usize,
    /// After `budget / 2` characters: boundaries from here on are "in the last half".
    half: usize,
}

impl Window {
    /// `None` when the rest of the text from `pos` fits in `budget` characters.
    fn measure(text: &str, pos: usize, budget: usize) -> Option<Window> {
        let code_budget = budget.saturating_sub(FENCE_COST).max(1);
        let mut window = Window {
            end: pos,
            code_end: pos,
            half: pos,
        };
        for (count, (i, _)) in text[pos..].char_indices().enumerate() {
            if count == budget / 2 {
                window.half = pos + i;
            }
            if count == code_budget {
                window.code_end = pos + i;
            }
            if count == budget {
                window.end = pos + i;
                if code_budget >= budget {
                    window.code_end = window.end;
                }
                return Some(window);
            }
        }
        None
    }
}

/// A ```` ```…``` ```` block, as byte offsets.
struct CodeBlock {
    /// From the opening fence to after the closing one.
    span: Range<usize>,
    /// Between the fences.
    content: Range<usize>,
    /// The first and the last non-whitespace character of the content.
    visible: Option<(usize, usize)>,
    /// Longer than a part: may be cut inside.
    oversized: bool,
}

/// Where cuts may not fall.
struct Layout<'t> {
    text: &'t str,
    blocks: Vec<CodeBlock>,
    /// Inline formatting spans, disjoint and sorted.
    spans: Vec<Range<usize>>,
}

/// How hard [`Layout::find_cut`] tries to keep things whole.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tier {
    /// Inline spans whole, cut code blocks with code on both sides, character sequences whole.
    Strict,
    /// Inline spans may be cut (one longer than a part).
    Loose,
    /// Character sequences may be cut too (a window made only of joined characters).
    Raw,
}

/// The kinds of boundary, best first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Boundary {
    Paragraph = 0,
    Line = 1,
    Sentence = 2,
    Word = 3,
    /// A space inside a code block: only when no other boundary is in the window, since code
    /// reads best cut between its lines.
    CodeSpace = 4,
}

impl<'t> Layout<'t> {
    fn new(text: &'t str, max_chars: usize) -> Self {
        let blocks = if max_chars >= MIN_CHARS_FOR_FENCES {
            code_blocks(text, max_chars)
        } else {
            Vec::new()
        };
        let spans = inline_spans(text, &blocks);
        Layout {
            text,
            blocks,
            spans,
        }
    }

    /// The block whose fences enclose `at` (strictly).
    fn block_at(&self, at: usize) -> Option<&CodeBlock> {
        let i = self.blocks.partition_point(|b| b.span.start < at);
        self.blocks[..i].last().filter(|b| at < b.span.end)
    }

    /// Whether a cut at `at` falls inside a code block's content (and so needs added fences).
    fn inside_code(&self, at: usize) -> bool {
        self.block_at(at)
            .is_some_and(|b| b.content.start < at && at < b.content.end)
    }

    fn inside_span(&self, at: usize) -> bool {
        let i = self.spans.partition_point(|s| s.start < at);
        self.spans[..i].last().is_some_and(|s| at < s.end)
    }

    /// Whether a part may end at `at`; `visible_from` is the first non-whitespace character of
    /// the part.
    fn allowed(&self, at: usize, visible_from: usize, window: &Window, tier: Tier) -> bool {
        let Some(block) = self.block_at(at) else {
            return tier != Tier::Strict || !self.inside_span(at);
        };
        if !block.oversized || at > window.code_end {
            return false;
        }
        if at <= block.content.start || at >= block.content.end {
            return false;
        }
        if tier != Tier::Strict {
            return true;
        }
        // Some code on both sides of the cut: no empty monospace block.
        block
            .visible
            .is_some_and(|(first, last)| visible_from.max(first) < at && at <= last)
    }

    /// The best cut for a part starting at `pos` (see the module doc), `None` if no position in
    /// the window is allowed.
    fn find_cut(&self, pos: usize, window: &Window, tier: Tier) -> Option<usize> {
        let text = self.text;
        let visible_from = text[pos..]
            .find(|c: char| !c.is_whitespace())
            .map_or(text.len(), |i| pos + i);
        let mut best: [Option<usize>; 5] = [None; 5];
        let mut hard = None;
        // Cuts from the window's end back to just after `pos`; the char at a cut starts the next
        // part.
        let last_len = text[window.end..].chars().next().map_or(0, char::len_utf8);
        let mut chars = text[pos..window.end + last_len]
            .char_indices()
            .rev()
            .peekable();
        while let Some((i, c)) = chars.next() {
            let at = pos + i;
            if at == pos {
                break;
            }
            let before = chars.peek().map(|&(_, b)| b);
            let boundary = match classify(text, at, c, before) {
                Some(kind) if kind > Boundary::Line && self.inside_code(at) => {
                    Some(Boundary::CodeSpace)
                }
                other => other,
            };
            let wanted = match boundary {
                Some(kind) => best[kind as usize].is_none(),
                None => hard.is_none() && (tier == Tier::Raw || !glued(before, c)),
            };
            if !wanted || !self.allowed(at, visible_from, window, tier) {
                continue;
            }
            match boundary {
                Some(kind) => best[kind as usize] = Some(at),
                None => hard = Some(at),
            }
        }
        let prose = &best[..Boundary::CodeSpace as usize];
        prose
            .iter()
            .flatten()
            .find(|&&at| at >= window.half)
            .or_else(|| prose.iter().flatten().next())
            .or(best[Boundary::CodeSpace as usize].as_ref())
            .copied()
            .or(hard)
    }
}

/// The kind of boundary a cut at `at` (before `c`, after `before`) would be; `None` for inside a
/// word.
fn classify(text: &str, at: usize, c: char, before: Option<char>) -> Option<Boundary> {
    if c == '\n' {
        let next_line = text[at + 1..].trim_start_matches([' ', '\t', '\r']);
        return Some(if next_line.starts_with('\n') {
            Boundary::Paragraph
        } else {
            Boundary::Line
        });
    }
    if !c.is_whitespace() {
        return None;
    }
    let ends_sentence = |c: Option<char>| matches!(c, Some('.' | '?' | '!' | '…'));
    let sentence_end = ends_sentence(before)
        || (matches!(
            before,
            Some(')' | '"' | '\'' | '»' | '”' | '’' | '*' | '_' | '~')
        ) && ends_sentence(text[..at].chars().nth_back(1)));
    let opens_question = text[at + c.len_utf8()..].starts_with(['¿', '¡']);
    Some(if sentence_end || opens_question {
        Boundary::Sentence
    } else {
        Boundary::Word
    })
}

/// Whether a cut between `before` and `c` would break a character sequence shown as one
/// (emoji ZWJ sequences, variation selectors, combining marks, skin tones, flags, keycaps).
fn glued(before: Option<char>, c: char) -> bool {
    let is_regional = |c: char| ('\u{1F1E6}'..='\u{1F1FF}').contains(&c);
    extends(c)
        || before == Some('\u{200D}')
        || (before.is_some_and(is_regional) && is_regional(c))
        || (before == Some('\r') && c == '\n')
}

/// Characters that attach to the one before them.
fn extends(c: char) -> bool {
    matches!(c,
        '\u{200D}'                      // zero-width joiner
        | '\u{FE00}'..='\u{FE0F}'       // variation selectors
        | '\u{E0100}'..='\u{E01EF}'     // variation selectors supplement
        | '\u{0300}'..='\u{036F}'       // combining diacritical marks
        | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}'       // combining marks for symbols (keycap U+20E3)
        | '\u{FE20}'..='\u{FE2F}'
        | '\u{1F3FB}'..='\u{1F3FF}'     // emoji skin tone modifiers
        | '\u{E0020}'..='\u{E007F}' // tags (subdivision flags)
    )
}

/// ```` ``` ```` fences paired in order; an unpaired last fence is plain text.
fn code_blocks(text: &str, max_chars: usize) -> Vec<CodeBlock> {
    let mut blocks = Vec::new();
    let mut fences = text.match_indices(FENCE).map(|(i, _)| i);
    while let (Some(open), Some(close)) = (fences.next(), fences.next()) {
        let span = open..close + FENCE.len();
        let content = open + FENCE.len()..close;
        let code = &text[content.clone()];
        let visible = code.find(|c: char| !c.is_whitespace()).map(|first| {
            let last = code
                .char_indices()
                .rev()
                .find(|(_, c)| !c.is_whitespace())
                .map_or(first, |(i, _)| i);
            (content.start + first, content.start + last)
        });
        let oversized = text[span.clone()].chars().count() > max_chars;
        blocks.push(CodeBlock {
            span,
            content,
            visible,
            oversized,
        });
    }
    blocks
}

/// WhatsApp's inline spans (`*…*`, `_…_`, `~…~`, `` `…` ``) outside code blocks, each on one
/// line, merged into disjoint sorted ranges.
fn inline_spans(text: &str, blocks: &[CodeBlock]) -> Vec<Range<usize>> {
    const MARKERS: [char; 4] = ['*', '_', '~', '`'];
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut open: [Option<usize>; 4] = [None; 4];
    let mut blocks = blocks.iter().peekable();
    let mut chars = text.char_indices().peekable();
    let mut before: Option<char> = None;
    while let Some((i, c)) = chars.next() {
        if let Some(block) = blocks.peek()
            && i >= block.span.start
        {
            // Skip the block; it is a line of its own as far as spans go.
            let end = block.span.end;
            blocks.next();
            while chars.next_if(|&(j, _)| j < end).is_some() {}
            open = [None; 4];
            before = Some('`');
            continue;
        }
        let after = chars.peek().map(|&(_, c)| c);
        if c == '\n' {
            open = [None; 4];
        } else if let Some(k) = MARKERS.iter().position(|&m| m == c) {
            let fence_part = c == '`' && (before == Some('`') || after == Some('`'));
            let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
            let space = |c: Option<char>| c.is_none_or(char::is_whitespace);
            match open[k] {
                _ if fence_part => {}
                Some(start) if !space(before) && !word(after) && i > start + c.len_utf8() => {
                    spans.push(start..i + c.len_utf8());
                    open[k] = None;
                }
                None if !word(before) && !space(after) => open[k] = Some(i),
                _ => {}
            }
        }
        before = Some(c);
    }
    spans.sort_unstable_by_key(|s| s.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start < last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

#[cfg(test)]
mod tests;
