//! The file format of conversation tests: YAML, one test or a list of them per file. A test is a
//! customer (a role, or a demo contact's number), a start time, and steps: what the customer
//! does, and what the bot is expected to have done after it. Unknown keys are errors, so a typo
//! in an expectation never passes silently.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, FixedOffset};
use serde::Deserialize;
use serde_json::Value;

/// The start of every test that does not give `now`: a Tuesday morning, office open.
pub const DEFAULT_NOW: &str = "2026-03-03T10:00:00+01:00";

/// One conversation test.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    pub name: String,
    /// `prospect` (a new number), `owner` or `agent` (a demo owner's or staff member's
    /// number); ignored when `wa_id` is given.
    #[serde(default)]
    pub role: Option<String>,
    /// The customer's number: a demo contact's, or any.
    #[serde(default)]
    pub wa_id: Option<String>,
    /// The customer's WhatsApp profile name.
    #[serde(default)]
    pub profile_name: Option<String>,
    /// When the conversation starts (RFC 3339); [`DEFAULT_NOW`] if not given. The demo data
    /// is laid out around that day.
    #[serde(default)]
    pub now: Option<DateTime<FixedOffset>>,
    /// Always run with no model at all (offline mode), even with `--record` or `--live`: a
    /// failure is a failure, never «needs recording».
    #[serde(default)]
    pub without_model: bool,
    /// The contact's language, as if they had written in it before (`en`).
    #[serde(default)]
    pub lang: Option<String>,
    /// Visits booked before the test starts, shown by the test's agent (role `agent`): what
    /// the follow-ups ask them about once a `wait` passes their end.
    #[serde(default)]
    pub booked: Vec<Booked>,
    /// Offers made before the test starts, waiting for an answer from the listing's owner
    /// (role `owner`, whose listing it must be) or agent.
    #[serde(default)]
    pub offers: Vec<OfferMade>,
    pub steps: Vec<Step>,
}

/// A visit booked before the test: of `property`, by `customer` (the test's own contact when
/// not given), started `ago` (`2h`) before the test's start, 30 minutes long; `done`: its
/// agent has just recorded it done, so the customer is asked how it went.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Booked {
    pub property: String,
    #[serde(default)]
    pub customer: Option<String>,
    pub ago: String,
    #[serde(default)]
    pub done: bool,
}

/// An offer made before the test: `amount` euros for `property` by `customer`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferMade {
    pub property: String,
    pub customer: String,
    pub amount: u64,
}

/// What the customer does, and what is expected after it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// A text message.
    #[serde(default)]
    pub user: Option<String>,
    /// Presses a reply button: its id starts so (`confirm`, `cancel`) or its title is this.
    #[serde(default)]
    pub tap: Option<Tap>,
    /// Picks a row of the last list: its id starts so (`P-1001`) or its title is this.
    #[serde(default)]
    pub pick: Option<String>,
    /// Shares a location.
    #[serde(default)]
    pub location: Option<Location>,
    /// A voice note whose transcript is this.
    #[serde(default)]
    pub voice: Option<String>,
    /// Reacts with this emoji to the bot's last message ("" removes the reaction).
    #[serde(default)]
    pub react: Option<String>,
    /// Time passes (`25h`, `40m`): nothing is said.
    #[serde(default)]
    pub wait: Option<String>,
    #[serde(default)]
    pub expect: Option<Expect>,
}

/// A button to press: by id prefix or title, optionally from an earlier step's message (a
/// stale button).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Tap {
    Latest(String),
    From {
        button: String,
        /// The step (1-based) whose reply showed the button.
        step: usize,
    },
}

impl Tap {
    pub fn button(&self) -> &str {
        match self {
            Tap::Latest(button) | Tap::From { button, .. } => button,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Location {
    pub latitude: f64,
    pub longitude: f64,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub address: Option<String>,
}

/// One or several of something.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(one) => vec![one.clone()],
            OneOrMany::Many(many) => many.clone(),
        }
    }
}

/// A tool expected to be called: by name, or by name and some of its arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ToolExpect {
    Name(String),
    WithArgs {
        name: String,
        #[serde(default)]
        args: BTreeMap<String, Value>,
    },
}

impl ToolExpect {
    pub fn name(&self) -> &str {
        match self {
            ToolExpect::Name(name) | ToolExpect::WithArgs { name, .. } => name,
        }
    }
}

/// What the bot is expected to have done after a step. Every key given is checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The assistant holding the conversation after the step: an agent's name, or `primary`.
    pub dialog_state: Option<String>,
    /// Each text appears in the reply (case and accents aside).
    pub reply_contains: Option<OneOrMany<String>>,
    /// None of these appears in the reply.
    pub reply_lacks: Option<OneOrMany<String>>,
    /// The reply matches this regular expression.
    pub reply_matches: Option<String>,
    /// The conversation's language after the step (ISO 639-1).
    pub lang: Option<String>,
    /// `true`: nothing is sent; `false`: something is.
    pub no_reply: Option<bool>,
    /// Tools called in this step (by the model or the fast path).
    pub tool: Option<OneOrMany<ToolExpect>>,
    /// Tools not called in this step.
    pub no_tool: Option<OneOrMany<String>>,
    /// Business events written in this step (`appointment.booked`…).
    pub event: Option<OneOrMany<String>>,
    /// No business event written in this step.
    pub no_event: Option<bool>,
    /// Reply buttons shown (titles).
    pub buttons: Option<Vec<String>>,
    /// List rows shown (ids or titles).
    pub list_rows: Option<Vec<String>>,
    /// The action waiting for the customer's yes (a tool name), or `none`.
    pub pending_action: Option<String>,
    /// Whether the conversation is flagged for a person.
    pub handoff_requested: Option<bool>,
    /// The WhatsApp messages sent, exactly as the Graph API receives them (without `to`).
    pub payload: Option<Vec<Value>>,
    /// A criterion in plain language, scored by the fallback model in `--live` runs.
    pub judge: Option<String>,
}

/// The tests of one file.
#[derive(Debug, Clone)]
pub struct TestFile {
    pub path: std::path::PathBuf,
    pub tests: Vec<TestCase>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FileShape {
    Many(Vec<TestCase>),
    One(Box<TestCase>),
}

/// Reads `path`: one test, or a list of them. Errors name the file and the line.
pub fn read(path: &Path) -> Result<TestFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(path, &text)
}

pub fn parse(path: &Path, text: &str) -> Result<TestFile, String> {
    // Parsed twice when untagged shapes hide the real error: first as the shape it looks like.
    let looks_like_list = text
        .lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with('-'));
    let shape = if looks_like_list {
        serde_norway::from_str::<Vec<TestCase>>(text).map(FileShape::Many)
    } else {
        serde_norway::from_str::<TestCase>(text).map(|t| FileShape::One(Box::new(t)))
    };
    let tests = match shape {
        Ok(FileShape::Many(tests)) => tests,
        Ok(FileShape::One(test)) => vec![*test],
        Err(error) => {
            let line = error
                .location()
                .map(|l| format!(":{}", l.line()))
                .unwrap_or_default();
            return Err(format!("{}{line}: {error}", path.display()));
        }
    };
    for test in &tests {
        check(path, test)?;
    }
    Ok(TestFile {
        path: path.to_owned(),
        tests,
    })
}

/// What serde cannot say: a step does exactly one thing; `wait` is a duration.
fn check(path: &Path, test: &TestCase) -> Result<(), String> {
    if test.steps.is_empty() {
        return Err(format!(
            "{}: test «{}» has no steps",
            path.display(),
            test.name
        ));
    }
    for (i, step) in test.steps.iter().enumerate() {
        let kinds = [
            step.user.is_some(),
            step.tap.is_some(),
            step.pick.is_some(),
            step.location.is_some(),
            step.voice.is_some(),
            step.react.is_some(),
            step.wait.is_some(),
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if kinds != 1 {
            return Err(format!(
                "{}: test «{}», step {}: a step is one of user, tap, pick, location, voice, react \
                 or wait ({kinds} given)",
                path.display(),
                test.name,
                i + 1
            ));
        }
        if let Some(wait) = &step.wait {
            humantime::parse_duration(wait).map_err(|e| {
                format!(
                    "{}: test «{}», step {}: wait `{wait}`: {e}",
                    path.display(),
                    test.name,
                    i + 1
                )
            })?;
        }
        if let Some(Expect {
            reply_matches: Some(pattern),
            ..
        }) = &step.expect
        {
            regex::Regex::new(pattern).map_err(|e| {
                format!(
                    "{}: test «{}», step {}: reply_matches: {e}",
                    path.display(),
                    test.name,
                    i + 1
                )
            })?;
        }
    }
    Ok(())
}

/// The test files under `paths` (files as given, folders searched for `*.yaml`, cassettes
/// left out), in name order.
pub fn discover(paths: &[std::path::PathBuf]) -> Result<Vec<std::path::PathBuf>, String> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut stack = vec![path.clone()];
            while let Some(dir) = stack.pop() {
                let entries =
                    std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                for entry in entries {
                    let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
                    let path = entry.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if is_test_file(&path) {
                        found.push(path);
                    }
                }
            }
        } else if path.exists() {
            found.push(path.clone());
        } else {
            return Err(format!("{}: no such file or folder", path.display()));
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    (name.ends_with(".yaml") || name.ends_with(".yml")) && !name.contains(".cassette.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_test_or_a_list_of_them() {
        let one = parse(
            Path::new("one.yaml"),
            "name: hola\nsteps:\n  - user: Hola\n    expect:\n      dialog_state: primary\n",
        )
        .unwrap();
        assert_eq!(one.tests.len(), 1);
        assert_eq!(
            one.tests[0].steps[0]
                .expect
                .as_ref()
                .unwrap()
                .dialog_state
                .as_deref(),
            Some("primary")
        );
        let many = parse(
            Path::new("many.yaml"),
            "- name: a\n  steps: [{user: Hola}]\n- name: b\n  steps: [{wait: 25h}, {tap: confirm}]\n",
        )
        .unwrap();
        assert_eq!(many.tests.len(), 2);
    }

    #[test]
    fn a_typo_in_an_expectation_is_an_error_with_its_line() {
        let error = parse(
            Path::new("typo.yaml"),
            "name: hola\nsteps:\n  - user: Hola\n    expect:\n      dialog_sate: primary\n",
        )
        .unwrap_err();
        assert!(error.contains("typo.yaml:"), "{error}");
        assert!(error.contains("dialog_sate"), "{error}");
    }

    #[test]
    fn a_step_does_one_thing() {
        let error = parse(
            Path::new("two.yaml"),
            "name: hola\nsteps:\n  - user: Hola\n    wait: 2h\n",
        )
        .unwrap_err();
        assert!(error.contains("step 1"), "{error}");
        let error = parse(
            Path::new("wait.yaml"),
            "name: hola\nsteps:\n  - wait: mañana\n",
        )
        .unwrap_err();
        assert!(error.contains("wait `mañana`"), "{error}");
    }
}
