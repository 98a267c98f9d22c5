//! History hygiene: the conversation as stored, made acceptable to every provider. The engine runs
//! [`for_model`] on the messages of a conversation right before every LLM call, as the seed's
//! `agent_invoke` cleaned its messages before invoking the model.
//!
//! A stored history is not always well formed: a turn can stop between an assistant's tool call and
//! the tool's answer, a tool can answer twice, several user messages can arrive before the bot
//! answers. OpenAI and Anthropic both reject a request in which an assistant tool call is not
//! answered by a tool message right after it, or a tool message answers nothing. So, in this
//! order:
//!
//! 1. every tool call is paired with its answer, and whatever cannot be paired is left out;
//! 2. consecutive user messages become one, with no text lost;
//! 3. only the last [`WINDOW`] messages are kept, starting at a user message.
//!
//! A conversation the business opened (a visit reminder, an operator's message) starts with
//! the business's words, which step 3 drops; [`for_model`] puts them back into the first user
//! message, who is likely answering them.
//!
//! The result keeps the stored order, and cleaning it again changes nothing.

use crate::llm::ChatMessage;

use crate::domain::ToolCall;

/// Messages kept for an LLM call by default (the seed's limit): enough context for a conversation,
/// a bounded cost per call.
pub const WINDOW: usize = 50;

/// The messages to send to the LLM: `messages` with tool calls paired with their answers,
/// consecutive human messages joined, and at most the last `window` of them, starting at a human
/// message.
///
/// The window is exceeded only to keep the last human message: the current question is never
/// dropped.
pub fn clean(messages: &[ChatMessage], window: usize) -> Vec<ChatMessage> {
    clean_owned(messages.to_vec(), window)
}

/// [`clean`], taking the messages: nothing is copied (before every model call, the history
/// loaded is about twice the window).
fn clean_owned(messages: Vec<ChatMessage>, window: usize) -> Vec<ChatMessage> {
    let paired = pair_tool_calls(messages);
    let joined = join_consecutive_humans(paired);
    keep_window(joined, window)
}

/// The history as the model is sent it: [`clean`], with the business's words that opened the
/// conversation — text of the assistant before any user message — quoted at the start of the
/// first user message, when the window still starts at that first user message.
pub fn for_model(history: Vec<ChatMessage>, window: usize) -> Vec<ChatMessage> {
    let opening = Opening::of(&history);
    opening.apply(clean_owned(history, window))
}

/// [`for_model`] over a stored history, converting only what the window can reach: the history
/// loaded before a model call is over twice the window, and converting all of it was most of
/// the cost of a request. `human` tells a stored user message, `convert` makes a stored message
/// the model's.
///
/// The part converted starts at a user message: no tool answer before it pairs with a call
/// after it, so the cleaned part is the cleaned whole's tail, but for its first message (which
/// a user message right before may join). When the window falls inside that tail and holds a
/// user message, it is the whole history's window, and it leaves out a user message, so no
/// opening words apply. Otherwise the whole history is converted.
pub fn for_model_from<M>(
    stored: &[M],
    window: usize,
    human: impl Fn(&M) -> bool,
    convert: impl Fn(&M) -> ChatMessage,
) -> Vec<ChatMessage> {
    // A little beyond the window: what pairing and joining drop from a usual history.
    let reach = window + window / 4 + 1;
    if let Some(latest) = stored.len().checked_sub(reach) {
        let point = (1..=latest).rev().find(|&i| human(&stored[i]));
        if let Some(point) = point {
            let part: Vec<ChatMessage> = stored[point..].iter().map(&convert).collect();
            let joined = join_consecutive_humans(pair_tool_calls(part));
            let cut = joined.len().saturating_sub(window);
            if cut >= 1 && joined[cut..].iter().any(is_human) {
                return keep_window(joined, window);
            }
        }
    }
    for_model(stored.iter().map(convert).collect(), window)
}

/// Keeps each assistant tool call only if a tool message in the run right after it answers it, and
/// each tool message only if it answers a kept call of the assistant message right before its run.
fn pair_tool_calls(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut paired = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();
    while let Some(message) = rest.next() {
        match message {
            ChatMessage::Human { .. } => paired.push(message),
            ChatMessage::Ai {
                content,
                tool_calls,
            } => {
                let mut run = Vec::new();
                while let Some(tool) = rest.next_if(is_tool) {
                    run.push(tool);
                }
                answered_turn(content, tool_calls, run, &mut paired);
            }
            // Every run of tool messages that follows an assistant message was taken with it above:
            // this one follows a human message or opens the history, so it answers nothing.
            ChatMessage::Tool { .. } => {}
        }
    }
    paired
}

/// One assistant message and the run of tool messages after it, reduced to what pairs up (pushed
/// onto `paired`): the calls that have an answer (the first call of an id, as a repeated id could
/// not be told apart), the first answer to each of them, in their stored order. An assistant
/// message left with neither a call nor text says nothing and is left out (Anthropic refuses
/// empty assistant content).
fn answered_turn(
    content: String,
    tool_calls: Vec<ToolCall>,
    run: Vec<ChatMessage>,
    paired: &mut Vec<ChatMessage>,
) {
    // A message makes a few calls at most: linear scans, no hashing of ids.
    let mut kept_calls: Vec<ToolCall> = Vec::with_capacity(tool_calls.len());
    for call in tool_calls {
        let answered = run
            .iter()
            .any(|m| tool_call_id(m) == Some(call.id.as_str()));
        if answered && !kept_calls.iter().any(|k| k.id == call.id) {
            kept_calls.push(call);
        }
    }
    if kept_calls.is_empty() && content.trim().is_empty() {
        return;
    }
    let mut answers: Vec<ChatMessage> = Vec::with_capacity(kept_calls.len());
    for message in run {
        let first_answer = tool_call_id(&message).is_some_and(|id| {
            kept_calls.iter().any(|call| call.id == id)
                && !answers
                    .iter()
                    .any(|answer| tool_call_id(answer) == Some(id))
        });
        if first_answer {
            answers.push(message);
        }
    }
    paired.push(ChatMessage::Ai {
        content,
        tool_calls: kept_calls,
    });
    paired.extend(answers);
}

/// Joins each run of human messages into one, their contents separated by a newline. The seed kept
/// only the last of them and lost what the user wrote before; this keeps every word, in one user
/// turn between two assistant turns.
fn join_consecutive_humans(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut joined: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    for message in messages {
        if let (Some(ChatMessage::Human { content: previous }), ChatMessage::Human { content }) =
            (joined.last_mut(), &message)
        {
            previous.push('\n');
            previous.push_str(content);
            continue;
        }
        joined.push(message);
    }
    joined
}

/// The last `window` messages, moved forward to start at a human message. A human message is never
/// inside a tool-call turn, so the cut never separates a call from its answers.
///
/// When no human message is left in the window, it starts at the last human message before it
/// instead: the current question comes first, the window second. A history with no human message
/// at all (none is expected) is kept whole, from its first message that is not a tool answer.
fn keep_window(mut messages: Vec<ChatMessage>, window: usize) -> Vec<ChatMessage> {
    let cut = messages.len().saturating_sub(window);
    let start = messages[cut..]
        .iter()
        .position(is_human)
        .map(|offset| cut + offset)
        .or_else(|| messages[..cut].iter().rposition(is_human))
        .or_else(|| messages.iter().position(|m| !is_tool(m)))
        .unwrap_or(messages.len());
    messages.drain(..start);
    messages
}

/// What [`for_model`] needs of the whole history, read before it is cleaned.
struct Opening {
    /// The assistant's texts before the first user message (most histories have none).
    words: Vec<String>,
    /// The runs of consecutive user messages, which `clean` joins into one each.
    runs: usize,
}

impl Opening {
    fn of(history: &[ChatMessage]) -> Self {
        let words = history
            .iter()
            .take_while(|m| !is_human(m))
            .filter_map(|m| match m {
                ChatMessage::Ai {
                    content,
                    tool_calls,
                } if tool_calls.is_empty() && !content.trim().is_empty() => Some(content.clone()),
                _ => None,
            })
            .collect();
        let runs = history
            .iter()
            .zip(history.iter().skip(1).map(Some).chain([None]))
            .filter(|(m, next)| is_human(m) && !next.is_some_and(is_human))
            .count();
        Self { words, runs }
    }

    fn apply(self, mut cleaned: Vec<ChatMessage>) -> Vec<ChatMessage> {
        let humans = cleaned.iter().filter(|m| is_human(m)).count();
        // Consecutive user messages are joined by `clean`: compare runs, not messages.
        if self.words.is_empty() || humans != self.runs {
            return cleaned;
        }
        if let Some(ChatMessage::Human { content }) = cleaned.first_mut() {
            *content = format!(
                "[Antes, la agencia escribió: «{}»]\n\n{content}",
                self.words.join("» «")
            );
        }
        cleaned
    }
}

fn is_human(message: &ChatMessage) -> bool {
    matches!(message, ChatMessage::Human { .. })
}

fn is_tool(message: &ChatMessage) -> bool {
    matches!(message, ChatMessage::Tool { .. })
}

fn tool_call_id(message: &ChatMessage) -> Option<&str> {
    match message {
        ChatMessage::Tool { tool_call_id, .. } => Some(tool_call_id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "search_properties".to_owned(),
            args: serde_json::json!({}).into(),
        }
    }

    fn ai_calling(content: &str, ids: &[&str]) -> ChatMessage {
        ChatMessage::Ai {
            content: content.to_owned(),
            tool_calls: ids.iter().map(|id| call(id)).collect(),
        }
    }

    fn human(content: &str) -> ChatMessage {
        ChatMessage::human(content)
    }

    fn tool(id: &str, content: &str) -> ChatMessage {
        ChatMessage::tool(id, content)
    }

    #[test]
    fn a_well_formed_history_is_kept_as_it_is() {
        let history = vec![
            human("hola"),
            ai_calling("", &["c1"]),
            tool("c1", "3 casas"),
            ChatMessage::ai("Tenemos 3 casas"),
            human("gracias"),
        ];
        assert_eq!(clean(&history, WINDOW), history);
    }

    #[test]
    fn the_words_that_opened_the_conversation_go_into_the_first_user_message() {
        // A reminder opened the conversation; the customer answers it.
        let history = vec![
            ChatMessage::ai("Recordatorio: mañana a las 10:00 tienes la visita a P-1001."),
            human("¿Me la pasas"),
            human("al viernes?"),
        ];
        let sent = for_model(history.clone(), WINDOW);
        assert_eq!(
            sent,
            [human(
                "[Antes, la agencia escribió: «Recordatorio: mañana a las 10:00 tienes la visita \
                 a P-1001.»]\n\n¿Me la pasas\nal viernes?"
            )]
        );
        // Once the window has moved past the first user message, nothing is added.
        let mut long = history.clone();
        for i in 0..30 {
            long.push(ChatMessage::ai(format!("respuesta {i}")));
            long.push(human(&format!("pregunta {i}")));
        }
        let cleaned = clean(&long, 10);
        assert_eq!(for_model(long, 10), cleaned);
        // A conversation the user opened is left as it is.
        let history = vec![human("hola"), ChatMessage::ai("Hola, ¿qué buscas?")];
        assert_eq!(for_model(history.clone(), WINDOW), history);
    }

    #[test]
    fn an_unanswered_tool_call_is_removed() {
        let history = vec![human("hola"), ai_calling("", &["c1"]), human("¿sigues?")];
        assert_eq!(clean(&history, WINDOW), vec![human("hola\n¿sigues?")]);
    }

    #[test]
    fn an_unanswered_call_of_a_message_with_text_leaves_the_text() {
        let history = vec![human("hola"), ai_calling("Busco…", &["c1"]), human("¿y?")];
        assert_eq!(
            clean(&history, WINDOW),
            vec![human("hola"), ChatMessage::ai("Busco…"), human("¿y?")]
        );
    }

    #[test]
    fn parallel_calls_keep_only_the_answered_ones() {
        let history = vec![
            human("hola"),
            ai_calling("", &["c1", "c2", "c3"]),
            tool("c3", "tres"),
            tool("c1", "uno"),
        ];
        assert_eq!(
            clean(&history, WINDOW),
            vec![
                human("hola"),
                ai_calling("", &["c1", "c3"]),
                tool("c3", "tres"),
                tool("c1", "uno"),
            ]
        );
    }

    #[test]
    fn an_orphan_tool_result_is_dropped() {
        let history = vec![
            tool("c0", "before anything"),
            human("hola"),
            tool("c1", "after a human"),
            ai_calling("", &["c2"]),
            tool("c2", "answer"),
            tool("c9", "answers another call"),
        ];
        assert_eq!(
            clean(&history, WINDOW),
            vec![human("hola"), ai_calling("", &["c2"]), tool("c2", "answer")]
        );
    }

    #[test]
    fn a_tool_result_answers_only_the_message_right_before_its_run() {
        let history = vec![
            human("hola"),
            ai_calling("", &["c1"]),
            ChatMessage::ai("Un momento"),
            tool("c1", "too late"),
        ];
        assert_eq!(
            clean(&history, WINDOW),
            vec![human("hola"), ChatMessage::ai("Un momento")]
        );
    }

    #[test]
    fn only_the_first_answer_to_a_call_is_kept() {
        let history = vec![
            human("hola"),
            ai_calling("", &["c1"]),
            tool("c1", "first"),
            tool("c1", "retry"),
        ];
        assert_eq!(
            clean(&history, WINDOW),
            vec![human("hola"), ai_calling("", &["c1"]), tool("c1", "first")]
        );
    }

    #[test]
    fn an_empty_assistant_message_is_dropped() {
        let history = vec![human("hola"), ChatMessage::ai("  "), human("¿hola?")];
        assert_eq!(clean(&history, WINDOW), vec![human("hola\n¿hola?")]);
    }

    #[test]
    fn consecutive_human_messages_are_joined() {
        let history = vec![
            human("hola"),
            human("busco casa"),
            human("en Mérida"),
            ChatMessage::ai("¿De cuántas recámaras?"),
        ];
        assert_eq!(
            clean(&history, WINDOW),
            vec![
                human("hola\nbusco casa\nen Mérida"),
                ChatMessage::ai("¿De cuántas recámaras?"),
            ]
        );
    }

    #[test]
    fn the_window_starts_at_a_human_message() {
        let history = vec![
            human("q1"),
            ai_calling("", &["c1"]),
            tool("c1", "r1"),
            ChatMessage::ai("a1"),
            human("q2"),
            ChatMessage::ai("a2"),
        ];
        // The last 4 would start at the tool answer: the window moves on to "q2".
        assert_eq!(clean(&history, 4), vec![human("q2"), ChatMessage::ai("a2")]);
    }

    #[test]
    fn the_last_question_is_kept_even_past_the_window() {
        let history = vec![
            human("q1"),
            ChatMessage::ai("a1"),
            human("q2"),
            ai_calling("", &["c1"]),
            tool("c1", "r1"),
            ChatMessage::ai("a2"),
        ];
        assert_eq!(clean(&history, 2), history[2..].to_vec());
    }

    #[test]
    fn a_history_without_human_messages_is_kept_whole() {
        let history = vec![
            tool("c0", "orphan"),
            ChatMessage::ai("a1"),
            ChatMessage::ai("a2"),
        ];
        assert_eq!(clean(&history, 1), history[1..].to_vec());
    }

    #[test]
    fn a_long_history_is_converted_only_as_far_as_the_window_reaches() {
        // 30 turns of a delegation: question, call, answer of the tool, reply.
        let history: Vec<ChatMessage> = (0..30)
            .flat_map(|t| {
                let id = format!("c{t}");
                [
                    human(&format!("pregunta {t}")),
                    ChatMessage::Ai {
                        content: String::new(),
                        tool_calls: vec![call(&id)],
                    },
                    tool(&id, &format!("datos {t}")),
                    ChatMessage::Ai {
                        content: format!("respuesta {t}"),
                        tool_calls: vec![],
                    },
                ]
            })
            .collect();
        let converted = std::cell::Cell::new(0);
        let sent = for_model_from(&history, WINDOW, is_human, |m| {
            converted.set(converted.get() + 1);
            m.clone()
        });
        assert_eq!(sent, for_model(history.clone(), WINDOW));
        assert_eq!(
            sent.len(),
            48,
            "12 whole turns: the window starts at a question"
        );
        assert!(
            converted.get() <= WINDOW + WINDOW / 4 + 4,
            "{} of {} converted",
            converted.get(),
            history.len()
        );
    }

    #[test]
    fn the_opening_words_are_quoted_when_the_window_reaches_the_first_question() {
        // A reminder the agency sent, 22 lookups of the assistant before anyone wrote, then
        // ten questions and answers: the window reaches back to the first question.
        let mut history = vec![ChatMessage::Ai {
            content: "Le recordamos su visita de mañana".to_owned(),
            tool_calls: vec![],
        }];
        for t in 0..22 {
            let id = format!("c{t}");
            history.push(ChatMessage::Ai {
                content: String::new(),
                tool_calls: vec![call(&id)],
            });
            history.push(tool(&id, "ok"));
        }
        for t in 0..10 {
            history.push(human(&format!("pregunta {t}")));
            history.push(ChatMessage::Ai {
                content: format!("respuesta {t}"),
                tool_calls: vec![],
            });
        }
        let sent = for_model_from(&history, WINDOW, is_human, Clone::clone);
        assert_eq!(sent, for_model(history.clone(), WINDOW));
        assert!(
            matches!(&sent[0], ChatMessage::Human { content } if content.contains("Le recordamos")),
            "{:?}",
            sent[0]
        );
    }

    #[test]
    fn an_empty_history_stays_empty() {
        assert_eq!(clean(&[], WINDOW), vec![]);
    }

    mod properties {
        use proptest::collection::vec;
        use proptest::prelude::*;

        use super::*;

        /// Few ids, so that some calls are answered and some answers match no call.
        const IDS: [&str; 4] = ["c0", "c1", "c2", "c3"];

        /// The shape of a generated message; contents are filled in from its position.
        #[derive(Debug, Clone)]
        enum Shape {
            Human,
            Ai { blank: bool, calls: Vec<usize> },
            Tool(usize),
        }

        fn shape() -> impl Strategy<Value = Shape> {
            prop_oneof![
                2 => Just(Shape::Human),
                2 => (any::<bool>(), vec(0..IDS.len(), 0..=3))
                    .prop_map(|(blank, calls)| Shape::Ai { blank, calls }),
                3 => (0..IDS.len()).prop_map(Shape::Tool),
            ]
        }

        /// Random histories whose contents are unique and never contain "\n", so that a joined
        /// human message can be split back into the messages it was made of.
        fn history() -> impl Strategy<Value = Vec<ChatMessage>> {
            vec(shape(), 0..=120).prop_map(|shapes| {
                shapes
                    .into_iter()
                    .enumerate()
                    .map(|(i, shape)| match shape {
                        Shape::Human => human(&format!("h{i}")),
                        Shape::Ai { blank, calls } => ChatMessage::Ai {
                            content: if blank {
                                " ".to_owned()
                            } else {
                                format!("a{i}")
                            },
                            tool_calls: calls.into_iter().map(|c| call(IDS[c])).collect(),
                        },
                        Shape::Tool(c) => tool(IDS[c], &format!("t{i}")),
                    })
                    .collect()
            })
        }

        /// The contents of the human messages, joined ones split back.
        fn human_lines(messages: &[ChatMessage]) -> Vec<&str> {
            messages
                .iter()
                .filter_map(|m| match m {
                    ChatMessage::Human { content } => Some(content.split('\n')),
                    _ => None,
                })
                .flatten()
                .collect()
        }

        /// `kept` is a subsequence of `original`, a joined human message standing for the messages
        /// it joins, an assistant message for one with the same text and its calls in order.
        fn is_in_order(kept: &[ChatMessage], original: &[ChatMessage]) -> bool {
            let mut unjoined = kept.iter().flat_map(|m| match m {
                ChatMessage::Human { content } => content.split('\n').map(human).collect(),
                other => vec![other.clone()],
            });
            let mut remaining = original.iter();
            unjoined.all(|k| {
                remaining.any(|o| match (&k, o) {
                    (
                        ChatMessage::Ai {
                            content,
                            tool_calls,
                        },
                        ChatMessage::Ai {
                            content: original_content,
                            tool_calls: original_calls,
                        },
                    ) => {
                        let mut original_calls = original_calls.iter();
                        content == original_content
                            && tool_calls.iter().all(|c| original_calls.any(|o| o == c))
                    }
                    _ => &k == o,
                })
            })
        }

        proptest! {
            #[test]
            fn every_call_is_answered_once_and_every_answer_has_its_call(
                history in history(), window in 1..=60usize,
            ) {
                let cleaned = clean(&history, window);
                let mut open: Option<Vec<&str>> = None;
                for message in &cleaned {
                    match message {
                        ChatMessage::Tool { tool_call_id, .. } => {
                            let calls = open.as_mut();
                            prop_assert!(calls.is_some(), "{tool_call_id} follows no assistant");
                            let calls = calls.unwrap();
                            let position = calls.iter().position(|id| id == tool_call_id);
                            prop_assert!(position.is_some(), "{tool_call_id} answers no open call");
                            calls.remove(position.unwrap());
                        }
                        other => {
                            prop_assert_eq!(open.take().unwrap_or_default(), Vec::<&str>::new());
                            if let ChatMessage::Ai { tool_calls, .. } = other {
                                open = Some(tool_calls.iter().map(|c| c.id.as_str()).collect());
                            }
                        }
                    }
                }
                prop_assert_eq!(open.unwrap_or_default(), Vec::<&str>::new());
            }

            #[test]
            fn converting_only_what_the_window_reaches_sends_the_model_the_same(
                history in history(), window in 1..=60usize,
            ) {
                let converted = std::cell::Cell::new(0);
                let partial = for_model_from(&history, window, is_human, |m| {
                    converted.set(converted.get() + 1);
                    m.clone()
                });
                prop_assert_eq!(partial, for_model(history.clone(), window));
                // At most the part, then the whole.
                prop_assert!(converted.get() <= 2 * history.len());
            }

            #[test]
            fn every_assistant_message_says_something_or_calls_a_tool(
                history in history(), window in 1..=60usize,
            ) {
                for message in clean(&history, window) {
                    if let ChatMessage::Ai { content, tool_calls } = message {
                        prop_assert!(!content.trim().is_empty() || !tool_calls.is_empty());
                    }
                }
            }

            #[test]
            fn no_two_human_messages_are_consecutive(
                history in history(), window in 1..=60usize,
            ) {
                let cleaned = clean(&history, window);
                prop_assert!(!cleaned.windows(2).any(|w| is_human(&w[0]) && is_human(&w[1])));
            }

            #[test]
            fn no_human_text_is_lost_inside_the_window(
                history in history(), window in 1..=60usize,
            ) {
                let cleaned = clean(&history, window);
                let kept = human_lines(&cleaned);
                let all = human_lines(&history);
                // Contents are unique: the first kept text says where the window starts. Nothing
                // kept means nothing to keep.
                let start = match kept.first() {
                    Some(first) => all.iter().position(|line| line == first),
                    None => Some(0),
                };
                prop_assert!(start.is_some(), "a human text from nowhere");
                prop_assert_eq!(kept, &all[start.unwrap()..]);
            }

            #[test]
            fn the_history_starts_with_a_human_message_when_there_is_one(
                history in history(), window in 1..=60usize,
            ) {
                let cleaned = clean(&history, window);
                if history.iter().any(is_human) {
                    prop_assert!(cleaned.first().is_some_and(is_human));
                }
            }

            #[test]
            fn the_window_is_exceeded_only_for_the_last_question(
                history in history(), window in 1..=60usize,
            ) {
                let cleaned = clean(&history, window);
                if cleaned.len() > window && history.iter().any(is_human) {
                    prop_assert_eq!(cleaned.iter().filter(|m| is_human(m)).count(), 1);
                }
            }

            #[test]
            fn the_order_is_kept(history in history(), window in 1..=60usize) {
                prop_assert!(is_in_order(&clean(&history, window), &history));
            }

            #[test]
            fn cleaning_twice_changes_nothing(history in history(), window in 1..=60usize) {
                let once = clean(&history, window);
                prop_assert_eq!(clean(&once, window), once);
            }

            #[test]
            fn the_model_is_sent_the_cleaned_history_at_most_quoting_the_opening_words(
                history in history(), window in 1..=60usize,
            ) {
                let sent = for_model(history.clone(), window);
                let cleaned = clean(&history, window);
                prop_assert_eq!(sent.len(), cleaned.len());
                prop_assert_eq!(sent.get(1..), cleaned.get(1..));
                if let (Some(first_sent), Some(first_cleaned)) = (sent.first(), cleaned.first())
                    && first_sent != first_cleaned
                {
                    let (ChatMessage::Human { content: sent }, ChatMessage::Human { content }) =
                        (first_sent, first_cleaned)
                    else {
                        return Err(TestCaseError::fail("only a user message gets the opening words"));
                    };
                    prop_assert!(sent.starts_with("[Antes, la agencia escribió: «"));
                    let answered = format!("»]\n\n{content}");
                    prop_assert!(sent.ends_with(&answered));
                }
            }
        }
    }
}
