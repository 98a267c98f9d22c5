//! What a prompt set is checked for before it is used: the files to read, tools promised but not given, and examples that contradict each other.

use super::super::fast_route::FastRouter;
use super::super::prompt::{PromptFile, PromptKind};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::agents::PromptProblem;
use crate::business::{BUSINESS_FILE, Business};
use crate::templates::{TEMPLATES_FILE, Templates};
use crate::{business, templates};
use sha2::{Digest, Sha256};

/// The prompt files of `dir`, sorted: `*.md`, not `README.md`, not hidden.
pub(super) fn prompt_paths(dir: &Path) -> Result<Vec<PathBuf>, PromptProblem> {
    let entries = std::fs::read_dir(dir).map_err(|error| {
        PromptProblem::new(dir, 1, format!("cannot read the prompts folder: {error}"))
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            let Some(file_name) = path.file_name().and_then(|name| name.to_str()) else {
                return false;
            };
            path.is_file()
                && file_name.ends_with(".md")
                && !file_name.starts_with('.')
                && !file_name.eq_ignore_ascii_case("README.md")
        })
        .collect();
    paths.sort();
    Ok(paths)
}

/// The business file of `dir`, when there is one: its bytes go into the set's version, its
/// problems into `problems` as `business.toml:line: message`.
pub(super) fn read_business(
    dir: &Path,
    version: &mut Sha256,
    problems: &mut Vec<PromptProblem>,
) -> Business {
    let path = dir.join(BUSINESS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Business::default(),
        Err(error) => {
            problems.push(PromptProblem::new(
                &path,
                1,
                format!("cannot read: {error}"),
            ));
            return Business::default();
        }
    };
    for part in [BUSINESS_FILE.as_bytes(), text.as_bytes()] {
        version.update((part.len() as u64).to_le_bytes());
        version.update(part);
    }
    business::parse(&text).unwrap_or_else(|found| {
        problems.extend(
            found
                .into_iter()
                .map(|p| PromptProblem::new(&path, p.line, p.message)),
        );
        Business::default()
    })
}

/// Without opening hours (no business file, or one without `[hours]`) the office counts as
/// always open: staff are told of handoffs at 3 a.m. Said, never silent.
pub(super) fn always_open(dir: &Path, business: &Business) -> Option<PromptProblem> {
    if business.hours.is_some() {
        return None;
    }
    let path = dir.join(BUSINESS_FILE);
    let what = if path.exists() {
        "has no [hours]"
    } else {
        "is missing"
    };
    Some(PromptProblem::new(
        &path,
        1,
        format!(
            "{what}: the office counts as always open, so staff are told of handoffs at any \
             hour, nights and holidays included; give the agency's opening hours in [hours]"
        ),
    ))
}

/// The templates file of `dir`, when there is one, like [`read_business`].
pub(super) fn read_templates(
    dir: &Path,
    version: &mut Sha256,
    problems: &mut Vec<PromptProblem>,
) -> Templates {
    let path = dir.join(TEMPLATES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Templates::default(),
        Err(error) => {
            problems.push(PromptProblem::new(
                &path,
                1,
                format!("cannot read: {error}"),
            ));
            return Templates::default();
        }
    };
    for part in [TEMPLATES_FILE.as_bytes(), text.as_bytes()] {
        version.update((part.len() as u64).to_le_bytes());
        version.update(part);
    }
    templates::parse(&text).unwrap_or_else(|found| {
        problems.extend(
            found
                .into_iter()
                .map(|p| PromptProblem::new(&path, p.line, p.message)),
        );
        Templates::default()
    })
}

/// Each place a body names a known tool that is not in its agent's `tools`: the assistant would
/// promise what it cannot do (or the tool is missing from the front matter).
pub(super) fn tools_promised(
    files: &[&PromptFile],
    known_tools: &BTreeSet<String>,
) -> Vec<PromptProblem> {
    let mut warnings = Vec::new();
    for file in files {
        for (offset, line) in file.body.lines().enumerate() {
            for tool in known_tools {
                if file.tools.contains(tool) {
                    continue;
                }
                let named = line.match_indices(tool.as_str()).any(|(at, _)| {
                    let before = line[..at].chars().next_back();
                    let after = line[at + tool.len()..].chars().next();
                    let part_of_word =
                        |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !part_of_word(before) && !part_of_word(after)
                });
                if named {
                    warnings.push(file.problem(
                        file.body_line + offset,
                        format!(
                            "the body names `{tool}`, which is not in `tools`: add it there, or \
                             do not promise what it does"
                        ),
                    ));
                }
            }
        }
    }
    warnings
}

/// An example the router sends to another agent contradicts the others (or the keywords): a
/// mistake a staff member should hear about before users do. (An example it does not route is
/// fine: the LLM routes it.)
pub(super) fn check_examples(
    files: &[&PromptFile],
    router: &FastRouter,
    problems: &mut Vec<PromptProblem>,
) {
    // The same message taught as two agents' (primary agents are one class: no subgraph).
    let mut seen: BTreeMap<String, &PromptFile> = BTreeMap::new();
    for file in files {
        for example in &file.examples {
            let key = crate::agents::keywords::tokens(example).join(" ");
            match seen.get(&key) {
                Some(first)
                    if first.name != file.name
                        && (first.kind == PromptKind::Subgraph
                            || file.kind == PromptKind::Subgraph) =>
                {
                    problems.push(file.problem(
                        file.key_line("examples"),
                        format!(
                            "example «{example}» is also an example of `{}`: keep it in one",
                            first.name
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    seen.insert(key, file);
                }
            }
        }
    }
    for file in files {
        let own = file.kind == PromptKind::Subgraph;
        for example in &file.examples {
            // From the primary agent, a user of `role` may reach the subgraphs serving `role`.
            let misroute = file.roles.iter().find_map(|role| {
                let open = |name: &str| {
                    (own && name == file.name)
                        || files.iter().any(|other| {
                            other.name == name
                                && other.kind == PromptKind::Subgraph
                                && other.roles.contains(role)
                        })
                };
                router
                    .decide(example, open, None)
                    .agent()
                    .filter(|routed| *routed != file.name)
                    .map(|routed| (routed.to_owned(), *role))
            });
            if let Some((routed, role)) = misroute {
                problems.push(file.problem(
                    file.key_line("examples"),
                    format!(
                        "example «{example}» would be sent straight to `{routed}` (role `{}`): \
                         it reads like that agent's examples and keywords; reword it, or adjust \
                         the examples of one of them",
                        role.as_str()
                    ),
                ));
            }
        }
    }
}
