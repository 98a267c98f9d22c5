//! `zaguan::engine::history::clean` on histories decoded from the input (with `arbitrary`): human
//! messages, assistant messages with or without tool calls, tool results; ids from a small set so
//! that calls and results match, half-match, repeat or answer nothing.
//!
//! Checks what the doc comments of `clean` (and of the module) promise:
//! - every tool call is answered by a tool message in the run right after it, every tool message
//!   answers a call of the assistant message right before its run, once ("whatever cannot be
//!   paired is left out"); no assistant message is left with neither a call nor text;
//! - no two human messages in a row, "with no text lost" (with an unlimited window, the human
//!   texts joined by newlines are the input's);
//! - at most `window` messages, starting at a human message; the window is exceeded only to keep
//!   the last human message (it is then the only one, first), or for a history with no human
//!   message at all (kept whole from its first message that is not a tool answer);
//! - the current question is never dropped: the last human message ends with the input's last;
//! - "the result keeps the stored order": it is a suffix of the result with an unlimited window,
//!   whose assistant and tool messages are a subsequence of the input's;
//! - "cleaning it again changes nothing".
#![no_main]

use std::collections::HashSet;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use zaguan::engine::history::clean;
use zaguan::domain::ToolCall;
use zaguan::llm::ChatMessage;

#[derive(Arbitrary, Debug)]
enum Op {
    Human(Text),
    Ai { content: Text, calls: Vec<u8> },
    Tool { id: u8, content: Text },
}

#[derive(Arbitrary, Debug)]
enum Text {
    Empty,
    Blank,
    Word(u8),
    Free(String),
}

impl Text {
    fn render(self) -> String {
        match self {
            Text::Empty => String::new(),
            Text::Blank => " \n ".to_owned(),
            Text::Word(n) => format!("m{n}"),
            Text::Free(s) => s,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    window: u8,
    ops: Vec<Op>,
}

fn id(n: u8) -> String {
    format!("call_{}", n % 8)
}

fuzz_target!(|input: Input| {
    let window = usize::from(input.window % 64);
    let messages: Vec<ChatMessage> = input
        .ops
        .into_iter()
        .map(|op| match op {
            Op::Human(text) => ChatMessage::human(text.render()),
            Op::Ai { content, calls } => ChatMessage::Ai {
                content: content.render(),
                tool_calls: calls
                    .into_iter()
                    .map(|n| ToolCall {
                        id: id(n),
                        name: format!("tool_{}", n % 3),
                        args: serde_json::json!({ "n": n }).into(),
                    })
                    .collect(),
            },
            Op::Tool { id: n, content } => ChatMessage::tool(id(n), content.render()),
        })
        .collect();

    let out = clean(&messages, window);
    let full = clean(&messages, usize::MAX);
    for cleaned in [&out, &full] {
        check_pairing(cleaned);
        check_humans(cleaned);
    }

    // Window and start.
    let input_has_human = messages.iter().any(is_human);
    if input_has_human {
        assert!(
            out.first().is_some_and(is_human),
            "does not start at a human: {out:?}"
        );
        if out.len() > window {
            let humans = out.iter().filter(|m| is_human(m)).count();
            assert_eq!(
                humans, 1,
                "window {window} exceeded with {humans} humans: {out:?}"
            );
        }
        let last_in = messages.iter().rev().find_map(human_text).unwrap();
        let last_out = out.iter().rev().find_map(human_text).unwrap();
        assert!(
            last_out.ends_with(last_in),
            "last question dropped: {out:?}"
        );
    } else {
        assert_eq!(out, full, "a history without humans is kept whole");
        assert!(out.first().is_none_or(|m| !is_tool(m)));
    }

    // Order: a suffix of the unwindowed result, which is the input's messages in their order.
    assert!(
        out.len() <= full.len() && full.ends_with(&out),
        "not a suffix: {out:?} of {full:?}"
    );
    let joined_in: Vec<&str> = messages.iter().filter_map(human_text).collect();
    let joined_out: Vec<&str> = full.iter().filter_map(human_text).collect();
    assert_eq!(
        joined_out.join("\n"),
        joined_in.join("\n"),
        "human text lost"
    );
    check_subsequence(&full, &messages);

    // Idempotent.
    assert_eq!(clean(&out, window), out, "cleaning again changed it");
    assert_eq!(clean(&full, usize::MAX), full, "cleaning again changed it");
});

/// Calls and answers pair up exactly; no empty assistant message.
fn check_pairing(messages: &[ChatMessage]) {
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            ChatMessage::Tool { .. } => panic!("tool message {i} answers nothing: {messages:?}"),
            ChatMessage::Human { .. } => i += 1,
            ChatMessage::Ai {
                content,
                tool_calls,
            } => {
                assert!(
                    !tool_calls.is_empty() || !content.trim().is_empty(),
                    "empty assistant message {i}: {messages:?}"
                );
                let calls: HashSet<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
                assert_eq!(
                    calls.len(),
                    tool_calls.len(),
                    "repeated call id: {messages:?}"
                );
                i += 1;
                let mut answered = HashSet::new();
                while let Some(ChatMessage::Tool { tool_call_id, .. }) = messages.get(i) {
                    assert!(
                        calls.contains(tool_call_id.as_str()),
                        "tool message {i} answers no call of its assistant: {messages:?}"
                    );
                    assert!(
                        answered.insert(tool_call_id.as_str()),
                        "answered twice: {messages:?}"
                    );
                    i += 1;
                }
                assert_eq!(answered, calls, "unanswered tool call: {messages:?}");
            }
        }
    }
}

fn check_humans(messages: &[ChatMessage]) {
    for pair in messages.windows(2) {
        assert!(
            !(is_human(&pair[0]) && is_human(&pair[1])),
            "two human messages in a row: {messages:?}"
        );
    }
}

/// The assistant and tool messages of `out` are, in order, input messages: tool messages as they
/// were, assistant messages with their text and some of their calls, in their order.
fn check_subsequence(out: &[ChatMessage], input: &[ChatMessage]) {
    let mut rest = input.iter();
    for message in out.iter().filter(|m| !is_human(m)) {
        let found = rest.any(|candidate| match (message, candidate) {
            (ChatMessage::Tool { .. }, ChatMessage::Tool { .. }) => message == candidate,
            (
                ChatMessage::Ai {
                    content,
                    tool_calls,
                },
                ChatMessage::Ai {
                    content: original,
                    tool_calls: original_calls,
                },
            ) => {
                let mut calls = original_calls.iter();
                content == original && tool_calls.iter().all(|c| calls.any(|o| o == c))
            }
            _ => false,
        });
        assert!(
            found,
            "{message:?} is not from the input in order: {out:?} of {input:?}"
        );
    }
}

fn is_human(message: &ChatMessage) -> bool {
    matches!(message, ChatMessage::Human { .. })
}

fn is_tool(message: &ChatMessage) -> bool {
    matches!(message, ChatMessage::Tool { .. })
}

fn human_text(message: &ChatMessage) -> Option<&str> {
    match message {
        ChatMessage::Human { content } => Some(content),
        _ => None,
    }
}
