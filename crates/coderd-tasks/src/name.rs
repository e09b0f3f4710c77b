//! Names for tasks created without one. Coder may ask a language model; coderd derives them
//! from the prompt's first words, with a random suffix so two tasks with the same opening do
//! not collide on the workspace name.

use coderd_core::validate::NAME_MAX;

/// Display names longer than this are refused, and generated ones are cut to it.
pub const DISPLAY_NAME_MAX: usize = 64;

/// The suffix's length: `-` and four hex digits.
const SUFFIX: usize = 5;

/// A valid workspace name from the prompt: its words in lowercase ASCII letters and digits,
/// joined by hyphens, cut at a word, then a random suffix (`task-…` for a prompt without
/// any).
pub fn generate(prompt: &str) -> String {
    let words = prompt
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase);
    let mut stem = String::new();
    for word in words {
        let room = NAME_MAX - SUFFIX - stem.len() - usize::from(!stem.is_empty());
        if word.len() > room {
            if stem.is_empty() {
                stem = word[..room].to_owned();
            }
            break;
        }
        if !stem.is_empty() {
            stem.push('-');
        }
        stem.push_str(&word);
    }
    if stem.is_empty() {
        stem = "task".into();
    }
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{stem}-{}", &suffix[..SUFFIX - 1])
}

/// The prompt's first line, trimmed and cut to [`DISPLAY_NAME_MAX`] characters.
pub fn display_name(prompt: &str) -> String {
    let line = prompt.trim().lines().next().unwrap_or_default().trim();
    if line.chars().count() <= DISPLAY_NAME_MAX {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(DISPLAY_NAME_MAX - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_valid_workspace_names() {
        for prompt in [
            "Fix the flaky test in crates/cli, please!",
            "",
            "!!!",
            "Supercalifragilisticexpialidociousandmoreletters",
            "ünïcödé wörds only",
        ] {
            let name = generate(prompt);
            assert!(coderd_core::validate::name(&name).is_ok(), "{name:?}");
            assert!(name.len() <= NAME_MAX, "{name:?}");
        }
        assert!(generate("Fix the flaky test").starts_with("fix-the-flaky-test-"));
        assert!(generate("").starts_with("task-"));
        assert_ne!(generate("same"), generate("same"));
    }

    #[test]
    fn display_names_are_the_first_line_cut() {
        assert_eq!(display_name("  Fix it\nthen more"), "Fix it");
        let long = "x".repeat(100);
        assert_eq!(display_name(&long).chars().count(), DISPLAY_NAME_MAX);
    }
}
