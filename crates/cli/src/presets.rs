//! Choosing a template version's preset for `coder create`, as Coder's CLI does: `--preset NAME`
//! picks one, `--preset none` none; without the flag the version's default preset applies, and
//! on a terminal, when there is no default, the user is asked.

use anyhow::bail;
use codersdk::presets::Preset;

use crate::prompt;

/// The name that asks for no preset.
pub const NONE: &str = "none";

/// The preset to create with, if any; `asked` is the `--preset` value.
pub fn choose(
    presets: Vec<Preset>,
    asked: Option<&str>,
    interactive: bool,
) -> anyhow::Result<Option<Preset>> {
    if presets.is_empty() {
        return match asked {
            Some(name) if name != NONE => {
                bail!("preset {name:?} not found: the template version has no presets")
            }
            _ => Ok(None),
        };
    }
    let names = || {
        presets
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let find = |name: &str| -> anyhow::Result<Option<Preset>> {
        if name == NONE {
            return Ok(None);
        }
        match presets.iter().find(|p| p.name == name) {
            Some(p) => Ok(Some(p.clone())),
            None => bail!("preset {name:?} not found (the version has: {})", names()),
        }
    };
    if let Some(name) = asked {
        return find(name);
    }
    if let Some(default) = presets.iter().find(|p| p.default) {
        return Ok(Some(default.clone()));
    }
    if !interactive {
        return Ok(None);
    }
    let answer = prompt::text(&format!("Preset ({}, or {NONE})", names()), Some(NONE))?;
    find(answer.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str, default: bool) -> Preset {
        Preset {
            id: uuid::Uuid::new_v4(),
            name: name.into(),
            parameters: Vec::new(),
            default,
            desired_prebuild_instances: None,
            description: String::new(),
            icon: String::new(),
        }
    }

    #[test]
    fn the_flag_then_the_default_decide() -> anyhow::Result<()> {
        let both = || vec![preset("a", false), preset("b", true)];
        let name = |p: Option<Preset>| p.map(|p| p.name);
        assert_eq!(name(choose(both(), Some("a"), false)?), Some("a".into()));
        assert_eq!(name(choose(both(), None, false)?), Some("b".into()));
        assert_eq!(name(choose(both(), Some(NONE), false)?), None);
        assert!(choose(both(), Some("c"), false).is_err());
        assert_eq!(name(choose(vec![preset("a", false)], None, false)?), None);
        assert!(choose(Vec::new(), Some("a"), false).is_err());
        assert_eq!(name(choose(Vec::new(), Some(NONE), false)?), None);
        Ok(())
    }
}
