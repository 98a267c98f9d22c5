//! One prompt file: TOML front matter between two `+++` lines, then the system prompt body, a
//! minijinja template. Parsing reports every problem it finds as `file:line: message`, so
//! `zaguan prompts check` can list them all at once; the folder-wide checks (duplicate names, one
//! primary agent per role) live in the registry.

use crate::domain::AgentName;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use minijinja::Environment;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::domain::Role;

/// The stem of the translator prompt's file, which is not an agent.
pub const TRANSLATOR_NAME: &str = "guard_translator";

/// What an agent's body may refer to.
pub const AGENT_PLACEHOLDERS: &[&str] = &[
    "user_name",
    "user_role",
    "user_info",
    "lang",
    "now",
    "business_name",
    "business_contact",
];

/// What the translator prompt's body may refer to.
pub const TRANSLATOR_PLACEHOLDERS: &[&str] = &["lang", "business_name"];

const KEYS: &[&str] = &[
    "name",
    "kind",
    "delegation",
    "roles",
    "tools",
    "keywords",
    "examples",
    "offline_reply",
    "fast_path_needs",
];

/// One thing wrong in the prompts folder. Displays as `file:line: message`, the format editors
/// and CI logs link to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptProblem {
    pub file: PathBuf,
    /// 1-based line of the file; 1 when no better line is known.
    pub line: usize,
    pub message: String,
}

impl PromptProblem {
    pub fn new(file: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for PromptProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// What a prompt file declares itself to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptKind {
    /// The assistant a role talks to when no subgraph is active.
    Primary,
    /// A domain assistant, entered through its `To<X>Assistant` tool.
    Subgraph,
    /// `guard_translator.md`: a plain prompt, not an agent.
    Translator,
}

/// A prompt file whose front matter could be read. It may still have problems (they went to the
/// problem list); the registry uses it for the folder-wide checks either way.
#[derive(Debug, Clone)]
pub struct PromptFile {
    pub path: PathBuf,
    pub name: AgentName,
    pub kind: PromptKind,
    pub delegation: Option<String>,
    /// Without duplicates, in the order written.
    pub roles: Vec<Role>,
    pub tools: Vec<String>,
    pub keywords: Vec<String>,
    /// Messages users write that this agent should answer; checked against the keywords.
    pub examples: Vec<String>,
    pub offline_reply: Option<String>,
    /// What the contact's situation must hold before the fast path enters this agent.
    pub fast_path_needs: Option<crate::domain::SituationNeed>,
    /// Everything after the closing `+++`, as written (line numbers stay exact).
    pub body: String,
    /// The file line the body's first line is on.
    pub body_line: usize,
    /// The file line of each front-matter key, for problems found later.
    key_lines: BTreeMap<String, usize>,
}

impl PromptFile {
    /// The line of a front-matter key, or 1 when the key is absent.
    pub fn key_line(&self, key: &str) -> usize {
        self.key_lines.get(key).copied().unwrap_or(1)
    }

    pub fn problem(&self, line: usize, message: impl Into<String>) -> PromptProblem {
        PromptProblem::new(&self.path, line, message)
    }

    /// Adds the body to `env` under the prompt's name and checks it: syntax, placeholders,
    /// emptiness. Returns whether it was added.
    pub fn compile(
        &self,
        env: &mut Environment<'static>,
        problems: &mut Vec<PromptProblem>,
    ) -> bool {
        if self.body.trim().is_empty() {
            problems.push(self.problem(
                self.body_line.saturating_sub(1).max(1),
                "empty body: write the system prompt after the closing `+++`",
            ));
            return false;
        }
        if let Err(error) = env.add_template_owned(self.name.to_string(), self.body.clone()) {
            let line = self.body_line + error.line().unwrap_or(1) - 1;
            let detail = error.detail().unwrap_or("invalid template");
            problems.push(self.problem(line, format!("template syntax error: {detail}")));
            return false;
        }
        let allowed = match self.kind {
            PromptKind::Translator => TRANSLATOR_PLACEHOLDERS,
            PromptKind::Primary | PromptKind::Subgraph => AGENT_PLACEHOLDERS,
        };
        let globals: BTreeSet<&str> = env.globals().map(|(name, _)| name).collect();
        let template = env
            .get_template(&self.name)
            .expect("the template was just added");
        let mut unknown: Vec<String> = template
            .undeclared_variables(false)
            .into_iter()
            .filter(|name| !allowed.contains(&name.as_str()) && !globals.contains(name.as_str()))
            .collect();
        unknown.sort();
        for name in &unknown {
            problems.push(self.problem(
                self.body_line + line_of_word(&self.body, name),
                format!(
                    "unknown placeholder `{name}` (available: {})",
                    allowed.join(", ")
                ),
            ));
        }
        unknown.is_empty()
    }
}

/// Reads one prompt file's text. Every problem goes to `problems`; `None` when the front matter
/// could not be read far enough to know the prompt's name and kind.
pub fn parse(
    path: &Path,
    text: &str,
    known_tools: &BTreeSet<String>,
    problems: &mut Vec<PromptProblem>,
) -> Option<PromptFile> {
    let problem = |line: usize, message: String| PromptProblem::new(path, line, message);
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.split('\n').collect();
    let is_fence = |line: &str| line.trim_end() == "+++";
    if !lines.first().is_some_and(|line| is_fence(line)) {
        problems.push(problem(
            1,
            "missing front matter: the file must start with a `+++` line".into(),
        ));
        return None;
    }
    let Some(close) = lines.iter().skip(1).position(|line| is_fence(line)) else {
        problems.push(problem(
            1,
            "front matter not closed: no second `+++` line".into(),
        ));
        return None;
    };
    let close = close + 1; // index in `lines`
    let front = lines[1..close].join("\n");
    // `front` starts on file line 2.
    let line_at = |offset: usize| 2 + front[..offset.min(front.len())].matches('\n').count();

    let table = match DeTable::parse(&front) {
        Ok(table) => table.into_inner(),
        Err(error) => {
            let line = error.span().map_or(1, |span| line_at(span.start));
            let message = error.message().trim().replace('\n', " ");
            problems.push(problem(
                line,
                format!("front matter is not valid TOML: {message}"),
            ));
            return None;
        }
    };

    let mut key_lines = BTreeMap::new();
    let mut values: BTreeMap<&str, (usize, &Spanned<DeValue>)> = BTreeMap::new();
    for (key, value) in table.iter() {
        let line = line_at(key.span().start);
        let key_name: &str = key.get_ref();
        key_lines.insert(key_name.to_owned(), line);
        match KEYS.iter().find(|known| **known == key_name) {
            Some(known) => {
                values.insert(known, (line, value));
            }
            None => problems.push(problem(
                line,
                format!(
                    "unknown key `{key_name}` (expected one of: {})",
                    KEYS.join(", ")
                ),
            )),
        }
    }

    let string = |key: &str, problems: &mut Vec<PromptProblem>| -> Option<String> {
        let (line, value) = values.get(key)?;
        match value.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                problems.push(problem(*line, format!("`{key}` must be a string")));
                None
            }
        }
    };
    // A list of strings, each with the line it is written on.
    let list = |key: &str, problems: &mut Vec<PromptProblem>| -> Vec<(usize, String)> {
        let Some((line, value)) = values.get(key) else {
            return Vec::new();
        };
        let items = match value.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .map(|item| match item.get_ref() {
                    DeValue::String(s) => Some((line_at(item.span().start), s.to_string())),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        items.unwrap_or_else(|| {
            problems.push(problem(*line, format!("`{key}` must be a list of strings")));
            Vec::new()
        })
    };

    let name = string("name", problems);
    let kind_text = string("kind", problems);
    let delegation = string("delegation", problems);
    let offline_reply = string("offline_reply", problems);
    let needs_text = string("fast_path_needs", problems);
    let role_items = list("roles", problems);
    let tool_items = list("tools", problems);
    let keywords: Vec<String> = list("keywords", problems)
        .into_iter()
        .map(|(_, keyword)| keyword)
        .collect();
    let examples: Vec<String> = list("examples", problems)
        .into_iter()
        .map(|(_, example)| example)
        .collect();
    let line_of = |key: &str| key_lines.get(key).copied().unwrap_or(1);

    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(name) = name else {
        if !values.contains_key("name") {
            problems.push(problem(1, "missing `name`".into()));
        }
        return None;
    };
    if name != stem {
        problems.push(problem(
            line_of("name"),
            format!("name `{name}` differs from the file name `{stem}`"),
        ));
    }
    let kind = match kind_text.as_deref() {
        Some("primary") => PromptKind::Primary,
        Some("subgraph") => PromptKind::Subgraph,
        Some("translator") => PromptKind::Translator,
        Some(other) => {
            problems.push(problem(
                line_of("kind"),
                format!("unknown kind `{other}` (expected `primary` or `subgraph`)"),
            ));
            return None;
        }
        None => {
            if !values.contains_key("kind") {
                problems.push(problem(
                    1,
                    "missing `kind` (`primary` or `subgraph`)".into(),
                ));
            }
            return None;
        }
    };

    match kind {
        PromptKind::Translator => {
            if name != TRANSLATOR_NAME {
                problems.push(problem(
                    line_of("kind"),
                    format!("only `{TRANSLATOR_NAME}` is of kind `translator`"),
                ));
            }
            for key in [
                "delegation",
                "roles",
                "tools",
                "keywords",
                "examples",
                "offline_reply",
                "fast_path_needs",
            ] {
                if values.contains_key(key) {
                    problems.push(problem(
                        line_of(key),
                        format!("`{key}` is not allowed on the translator prompt"),
                    ));
                }
            }
        }
        PromptKind::Primary | PromptKind::Subgraph => {
            if name == TRANSLATOR_NAME {
                problems.push(problem(
                    line_of("kind"),
                    format!("`{TRANSLATOR_NAME}` is the translator prompt: its kind must be `translator`"),
                ));
            } else if !is_agent_name(&name) {
                problems.push(problem(
                    line_of("name"),
                    format!("agent name `{name}` must be snake_case and end in `_assistant`"),
                ));
            }
        }
    }

    match (kind, &delegation) {
        (PromptKind::Subgraph, None) if !values.contains_key("delegation") => {
            problems.push(problem(
                1,
                "missing `delegation`: a subgraph agent needs the text that tells when to delegate to it".into(),
            ));
        }
        (PromptKind::Subgraph, Some(text)) if text.trim().is_empty() => {
            problems.push(problem(
                line_of("delegation"),
                "`delegation` is empty: say when to delegate to this agent".into(),
            ));
        }
        (PromptKind::Primary, _) if values.contains_key("delegation") => {
            problems.push(problem(
                line_of("delegation"),
                "a primary agent takes no `delegation`: only subgraph agents are delegated to"
                    .into(),
            ));
        }
        _ => {}
    }

    let mut roles = Vec::new();
    for (line, role) in &role_items {
        match parse_role(role) {
            Some(role) if !roles.contains(&role) => roles.push(role),
            Some(_) => {}
            None => problems.push(problem(
                *line,
                format!("unknown role `{role}` (expected prospect, owner or agent)"),
            )),
        }
    }
    let roles_invalid = role_items.len() != roles.len();
    if roles.is_empty() && !roles_invalid {
        match kind {
            PromptKind::Primary => problems.push(problem(
                line_of("roles"),
                "a primary agent must serve at least one role: list them in `roles`".into(),
            )),
            PromptKind::Subgraph => problems.push(problem(
                line_of("roles"),
                "no role can reach this agent: list them in `roles`".into(),
            )),
            PromptKind::Translator => {}
        }
    }

    let fast_path_needs = needs_text.as_deref().and_then(|text| {
        let need = crate::domain::SituationNeed::parse(text);
        if need.is_none() {
            problems.push(problem(
                line_of("fast_path_needs"),
                format!(
                    "unknown `fast_path_needs` `{text}` (expected `upcoming_appointment` or \
                     `past_visit`)"
                ),
            ));
        } else if kind != PromptKind::Subgraph {
            problems.push(problem(
                line_of("fast_path_needs"),
                "`fast_path_needs` is for subgraph agents: the fast path only enters those".into(),
            ));
        }
        need
    });

    for (line, tool) in &tool_items {
        if !known_tools.contains(tool) {
            problems.push(problem(*line, format!("unknown tool `{tool}`")));
        }
    }

    Some(PromptFile {
        path: path.to_owned(),
        name: name.into(),
        kind,
        delegation: delegation.map(|text| text.trim().to_owned()),
        roles,
        tools: tool_items.into_iter().map(|(_, tool)| tool).collect(),
        keywords,
        examples,
        offline_reply: offline_reply.map(|text| text.trim().to_owned()),
        fast_path_needs,
        body: lines[close + 1..].join("\n"),
        body_line: close + 2,
        key_lines,
    })
}

/// `prospect`, `owner` or `agent`; unlike [`Role::parse`], nothing else.
fn parse_role(text: &str) -> Option<Role> {
    [Role::Prospect, Role::Owner, Role::Agent]
        .into_iter()
        .find(|role| role.as_str() == text)
}

/// snake_case (lowercase ASCII letters and digits, single underscores), ending in `_assistant`.
fn is_agent_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix("_assistant") else {
        return false;
    };
    !stem.is_empty()
        && stem.starts_with(|c: char| c.is_ascii_lowercase())
        && stem.split('_').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// The 0-based line of `text` where `word` first appears as a whole word, else 0.
fn line_of_word(text: &str, word: &str) -> usize {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    text.lines()
        .position(|line| {
            line.match_indices(word).any(|(at, _)| {
                let Range { start, end } = at..at + word.len();
                !line[..start].ends_with(is_ident) && !line[end..].starts_with(is_ident)
            })
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
