use super::{FENCE, MAX_CHARS, parts, split};
use proptest::prelude::*;

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn visible(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// `n` characters of Spanish prose, in words.
fn prose(n: usize) -> String {
    let words = "la vivienda dispone de salón comedor cocina equipada y terraza con vistas ";
    words.chars().cycle().take(n).collect()
}

#[test]
fn empty_and_blank() {
    assert!(split("", MAX_CHARS).is_empty());
    assert!(split(" \n\n\t ", MAX_CHARS).is_empty());
    assert_eq!(split("  Hola, María 👋 \n", MAX_CHARS), ["Hola, María 👋"]);
}

#[test]
fn exactly_the_limit_is_one_part() {
    let text = format!("a{}b", prose(MAX_CHARS - 2));
    assert_eq!(chars(&text), MAX_CHARS);
    assert_eq!(split(&text, MAX_CHARS), vec![text]);
}

#[test]
fn one_over_the_limit_is_two_parts() {
    let text = format!("a{}b", prose(MAX_CHARS - 1));
    assert_eq!(chars(&text), MAX_CHARS + 1);
    let parts = split(&text, MAX_CHARS);
    assert_eq!(parts.len(), 2);
    assert!(parts.iter().all(|p| chars(p) <= MAX_CHARS));
    // Cut at a word boundary, close to the limit.
    assert!(chars(&parts[0]) > MAX_CHARS - 20);
    assert!(!parts[0].ends_with(' ') && !parts[1].starts_with(' '));
    assert_eq!(visible(&parts.concat()), visible(&text));
}

#[test]
fn a_word_longer_than_the_limit_is_cut() {
    let word = "ñ".repeat(5000);
    let parts = split(&word, MAX_CHARS);
    assert_eq!(
        parts.iter().map(|p| chars(p)).collect::<Vec<_>>(),
        [4096, 904]
    );
    assert_eq!(parts.concat(), word);
}

#[test]
fn a_long_word_after_words_starts_its_own_part() {
    let text = format!("hola {}", "x".repeat(5000));
    let parts = split(&text, MAX_CHARS);
    assert_eq!(parts[0], "hola");
    assert_eq!(
        parts.iter().map(|p| chars(p)).collect::<Vec<_>>(),
        [4, 4096, 904]
    );
}

#[test]
fn an_emoji_at_the_boundary_stays_whole() {
    // A four-byte emoji as the 4096th character: counted as one.
    let text = format!("{}😀{}", "a".repeat(4095), "b".repeat(10));
    let parts = split(&text, MAX_CHARS);
    assert_eq!(parts, [format!("{}😀", "a".repeat(4095)), "b".repeat(10)]);

    // A ZWJ family (7 chars) straddling the limit moves to the next part whole.
    let family = "👨\u{200D}👩\u{200D}👧\u{200D}👦";
    let text = format!("{}{family}bbb", "a".repeat(4094));
    let parts = split(&text, MAX_CHARS);
    assert_eq!(parts, ["a".repeat(4094), format!("{family}bbb")]);

    // An emoji with its variation selector (❤️) is not separated from it.
    let text = format!("{}❤\u{FE0F}bbb", "a".repeat(4095));
    let parts = split(&text, MAX_CHARS);
    assert_eq!(parts, ["a".repeat(4095), "❤\u{FE0F}bbb".to_owned()]);

    // Nor is a letter from its combining accent.
    let text = format!("{}e\u{301}bbb", "a".repeat(4095));
    assert_eq!(split(&text, MAX_CHARS)[1], "e\u{301}bbb");
}

#[test]
fn a_bold_span_across_the_cut_moves_it_before_the_span() {
    let head = prose(4080);
    let text = format!("{head} *oferta exclusiva de hoy* y más");
    let natural = split(&text.replace('*', " "), MAX_CHARS);
    assert!(
        natural[0].ends_with("oferta"),
        "the cut would fall inside the span"
    );
    let parts = split(&text, MAX_CHARS);
    assert_eq!(parts[0], head.trim_end());
    assert!(parts[1].starts_with("*oferta exclusiva de hoy*"));

    // The same for inline code and for italics.
    let text = format!("{head} `precio_max = 450000` fin");
    assert!(split(&text, MAX_CHARS)[1].starts_with("`precio_max = 450000`"));
    let text = format!("{head} _Importante: la cuota varía_ fin");
    assert!(split(&text, MAX_CHARS)[1].starts_with("_Importante: la cuota varía_"));
}

#[test]
fn a_code_block_is_moved_whole_when_it_fits() {
    let code = "```\nlet cuota = capital * tipo;\nprintln!(\"{cuota}\");\n```";
    let text = format!("{}\n\n{code}\n\nFin.", prose(4070));
    let parts = split(&text, MAX_CHARS);
    assert_eq!(parts[1], format!("{code}\n\nFin."));
}

#[test]
fn a_code_block_longer_than_the_limit_is_closed_and_reopened() {
    let lines: Vec<String> = (0..400)
        .map(|i| format!("cuota[{i}] = capital * tipo / (1 - (1 + tipo)^-n)"))
        .collect();
    let code = lines.join("\n");
    let text = format!("Simulación:\n\n```\n{code}\n```\n\nFin.");
    let parts = split(&text, MAX_CHARS);
    assert!(parts.len() >= 5, "{} parts", parts.len());
    for (i, part) in parts.iter().enumerate() {
        assert!(chars(part) <= MAX_CHARS, "part {i}: {} chars", chars(part));
        let fences = part.matches(FENCE).count();
        assert_eq!(fences % 2, 0, "part {i} has unbalanced fences");
        if i > 0 {
            assert!(part.starts_with("```\n"), "part {i} reopens the block");
        }
    }
    // Cut at line breaks: every code line is whole in some part.
    for line in &lines {
        assert!(
            parts.iter().any(|p| p.contains(line.as_str())),
            "{line} was cut"
        );
    }
    assert!(parts.last().unwrap().ends_with("```\n\nFin."));
}

/// `n` characters of words, not ending in a space.
fn words(n: usize) -> String {
    let mut words = prose(n);
    if words.ends_with(' ') {
        words.pop();
        words.push('x');
    }
    words
}

#[test]
fn boundaries_paragraph_then_line_then_sentence_then_word() {
    // Parts of 100 chars; in the first window, from its start: a paragraph break at 60, a
    // sentence end at 72, a line break at 83, words up to the end.
    let (a, b, c, d) = (words(59), words(9), words(9), words(60));
    let text = format!("{a}.\n\n{b}. {c}\n{d}");
    assert_eq!(split(&text, 100)[0], format!("{a}."), "paragraph");

    let text = text.replace("\n\n", " ");
    assert_eq!(split(&text, 100)[0], format!("{a}. {b}. {c}"), "line");

    let text = text.replace('\n', " ");
    assert_eq!(split(&text, 100)[0], format!("{a}. {b}."), "sentence");

    let text = text.replace(". ", ", ");
    let first = &split(&text, 100)[0];
    assert!(chars(first) > 90 && chars(first) <= 100, "word: {first:?}");
    assert!(text.starts_with(first.as_str()));
    assert!(text[first.len()..].starts_with(' '), "word: {first:?}");
}

#[test]
fn a_boundary_in_the_first_half_loses_to_a_better_filled_part() {
    // A paragraph break at 20 % of the window, a sentence end at 90 %.
    let text = format!("{}\n\n{}. {}", words(19), words(69), words(60));
    let parts = split(&text, 100);
    assert_eq!(chars(&parts[0]), 91, "{parts:?}");
    assert!(parts[0].ends_with('.'));
}

#[test]
fn spanish_question_starts_are_sentence_boundaries() {
    let text = format!("{} ¿Quieres visitarlo el sábado por la mañana?", prose(70));
    let parts = split(&text, 100);
    assert!(parts[1].starts_with("¿Quieres"), "{parts:?}");
}

fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        " ",
        " ",
        "  ",
        "\n",
        "\n",
        "\n\n",
        "\t",
        "*",
        "_",
        "~",
        "*negrita*",
        "_cursiva_",
        "`código`",
        "😀",
        "👨\u{200D}👩\u{200D}👧\u{200D}👦",
        "❤\u{FE0F}",
        "🇪🇸",
        "é",
        "e\u{301}",
        "ñ",
        "¿",
        "¡",
        ".",
        ". ",
        "? ",
        "hola",
        "casa",
        "Chamberí",
        "a",
        "450.000 €",
        "habitaciones",
        "supercalifragilísticoespialidoso",
    ])
}

fn text_without_fences() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(token(), 0..300).prop_map(|t| t.concat()),
        prop::collection::vec(token(), 0..2500).prop_map(|t| t.concat()),
        "[^`]{0,600}",
    ]
}

fn text_with_fences() -> impl Strategy<Value = String> {
    let token = prop_oneof![9 => token(), 1 => Just("```"), 1 => Just("\n```\n")];
    prop_oneof![
        prop::collection::vec(token.clone(), 0..300).prop_map(|t| t.concat()),
        prop::collection::vec(token, 0..2500).prop_map(|t| t.concat()),
        "(?s).{0,600}",
    ]
}

fn max_chars() -> impl Strategy<Value = usize> {
    prop_oneof![20usize..=300, Just(MAX_CHARS)]
}

/// Characters that must not start a part (they belong to the character before).
fn attaches_back(c: char) -> bool {
    super::extends(c)
}

proptest! {
    #[test]
    fn parts_fit_and_nothing_is_lost(text in text_without_fences(), max in max_chars()) {
        let parts = split(&text, max);
        for part in &parts {
            prop_assert!(!part.is_empty());
            prop_assert_eq!(part.trim(), part.as_str());
            prop_assert!(chars(part) <= max, "{} > {max}: {part:?}", chars(part));
        }
        prop_assert_eq!(visible(&parts.concat()), visible(&text));
    }

    #[test]
    fn joined_characters_stay_together(
        tokens in prop::collection::vec(token(), 0..1500),
        max in max_chars(),
    ) {
        // In these texts every joining character follows the one it joins.
        for part in split(&tokens.concat(), max) {
            prop_assert!(!part.starts_with(attaches_back), "{part:?}");
            prop_assert!(!part.ends_with('\u{200D}'), "{part:?}");
        }
    }

    #[test]
    fn only_the_added_fences_are_extra(text in text_with_fences(), max in max_chars()) {
        let parts = parts(&text, max);
        let mut kept = String::new();
        for part in &parts {
            let mut body = part.text.as_str();
            prop_assert!(!body.is_empty());
            prop_assert!(chars(body) <= max, "{} > {max}: {body:?}", chars(body));
            if part.reopened {
                body = body.strip_prefix(FENCE).expect("starts with the added fence");
            }
            if part.closed {
                body = body.strip_suffix(FENCE).expect("ends with the added fence");
            }
            kept.push_str(body);
        }
        prop_assert_eq!(visible(&kept), visible(&text));
        // Each cut code block is closed by the part that cuts it and reopened by the next.
        for pair in parts.windows(2) {
            prop_assert_eq!(pair[0].closed, pair[1].reopened);
        }
        prop_assert!(parts.last().is_none_or(|p| !p.closed));
    }
}
