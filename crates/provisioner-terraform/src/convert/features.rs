//! What a template declares besides resources and parameters: workspace presets (with their
//! prebuild settings), AI tasks and external agents.
//!
//! Presets are `coder_workspace_preset` data sources. Their names are unique and at most one
//! is the default; a preset may set parameters the template does not declare (presets may
//! outlive parameters across versions), which is worth a warning rather than an error.
//! Whether the template has AI tasks or external agents is read from the graph, which holds
//! every declared resource, so a `count = 0` in this plan does not hide them.

use std::collections::HashSet;

use codersdk::proto::{
    AiTask, ExpirationPolicy, Prebuild, Preset, PresetParameter, RichParameter, Schedule,
    Scheduling, SecretRequirement, TemplateFeatures,
};

use super::attrs::Attrs;
use super::show::{Mode, TfResource};
use super::{ConvertError, join_quoted};

/// The features of a plan or state, and warnings for the template's author.
pub(crate) fn collect(
    resources: &[TfResource],
    graph_labels: &[&str],
    parameters: &[RichParameter],
) -> Result<(TemplateFeatures, Vec<String>), ConvertError> {
    let (presets, warnings) = presets(resources, parameters)?;
    let features = TemplateFeatures {
        presets,
        ai_tasks: ai_tasks(resources)?,
        has_ai_tasks: declares(graph_labels, "coder_ai_task"),
        has_external_agents: declares(graph_labels, "coder_external_agent"),
        secrets: secrets(resources)?,
    };
    Ok((features, warnings))
}

/// Whether a managed resource of `kind` is declared anywhere, in any module.
fn declares(labels: &[&str], kind: &str) -> bool {
    labels.iter().any(|label| {
        let mut segments = label.rsplit('.');
        let (_name, found, before) = (segments.next(), segments.next(), segments.next());
        found == Some(kind) && before != Some("data")
    })
}

fn presets(
    resources: &[TfResource],
    parameters: &[RichParameter],
) -> Result<(Vec<Preset>, Vec<String>), ConvertError> {
    let declared: HashSet<&str> = parameters.iter().map(|p| p.name.as_str()).collect();
    let mut presets = Vec::new();
    let mut warnings = Vec::new();
    for resource in resources
        .iter()
        .filter(|r| r.mode == Mode::Data && r.kind == "coder_workspace_preset")
    {
        let preset = decode_preset(resource)?;
        let unknown: Vec<String> = preset
            .parameters
            .iter()
            .filter(|p| !declared.contains(p.name.as_str()))
            .map(|p| p.name.clone())
            .collect();
        if !unknown.is_empty() {
            warnings.push(format!(
                "coder_workspace_preset {:?} defines preset values for at least one parameter \
                 that is not defined by the template: {}",
                preset.name,
                join_quoted(&unknown)
            ));
        }
        presets.push(preset);
    }

    let mut seen = HashSet::new();
    let mut duplicated: Vec<String> = Vec::new();
    for preset in &presets {
        if !seen.insert(preset.name.as_str()) && !duplicated.contains(&preset.name) {
            duplicated.push(preset.name.clone());
        }
    }
    if !duplicated.is_empty() {
        return Err(ConvertError::DuplicatePresetNames { names: duplicated });
    }
    let defaults = presets.iter().filter(|p| p.default).count();
    if defaults > 1 {
        return Err(ConvertError::MultipleDefaultPresets { count: defaults });
    }
    Ok((presets, warnings))
}

fn decode_preset(resource: &TfResource) -> Result<Preset, ConvertError> {
    let attrs = Attrs::new(&resource.address, &resource.values);
    // A map: sorted by name, so the output does not depend on the document's order.
    let parameters = attrs
        .string_map("parameters")?
        .into_iter()
        .map(|(name, value)| PresetParameter { name, value })
        .collect();
    let prebuild = match attrs.blocks("prebuilds")?.first() {
        None => None,
        Some(block) => Some(decode_prebuild(block)?),
    };
    Ok(Preset {
        name: attrs.string("name")?,
        parameters,
        prebuild,
        default: attrs.bool("default")?,
        description: attrs.string("description")?,
        icon: attrs.string("icon")?,
    })
}

fn decode_prebuild(block: &Attrs<'_>) -> Result<Prebuild, ConvertError> {
    let expiration_policy = match block.blocks("expiration_policy")?.first() {
        None => None,
        Some(policy) => Some(ExpirationPolicy {
            ttl: saturating(policy.int("ttl")?),
        }),
    };
    let scheduling = match block.blocks("scheduling")?.first() {
        None => None,
        Some(scheduling) => Some(Scheduling {
            timezone: scheduling.string("timezone")?,
            schedule: scheduling.map_blocks("schedule", |schedule| {
                Ok(Schedule {
                    cron: schedule.string("cron")?,
                    instances: saturating(schedule.int("instances")?),
                })
            })?,
        }),
    };
    Ok(Prebuild {
        instances: saturating(block.int("instances")?),
        expiration_policy,
        scheduling,
    })
}

/// The provider allows any number; the wire has 32 bits, and more would mean the same.
fn saturating(value: i64) -> i32 {
    i32::try_from(value).unwrap_or(if value < 0 { i32::MIN } else { i32::MAX })
}

/// The `coder_secret` data sources, once per variable or file however often declared.
fn secrets(resources: &[TfResource]) -> Result<Vec<SecretRequirement>, ConvertError> {
    let mut found: Vec<SecretRequirement> = Vec::new();
    for resource in resources
        .iter()
        .filter(|r| r.mode == Mode::Data && r.kind == "coder_secret")
    {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let secret = SecretRequirement {
            env: attrs.string("env")?,
            file: attrs.string("file")?,
            help_message: attrs.string("help_message")?,
        };
        if !found
            .iter()
            .any(|f| f.env == secret.env && f.file == secret.file)
        {
            found.push(secret);
        }
    }
    Ok(found)
}

/// The `coder_ai_task` resources that exist (or will) with the app each names.
fn ai_tasks(resources: &[TfResource]) -> Result<Vec<AiTask>, ConvertError> {
    resources
        .iter()
        .filter(|r| r.mode == Mode::Managed && r.kind == "coder_ai_task")
        .map(|resource| {
            let attrs = Attrs::new(&resource.address, &resource.values);
            let mut app_id = attrs.string("app_id")?;
            if app_id.is_empty()
                && let Some(sidebar) = attrs.blocks("sidebar_app")?.first()
            {
                app_id = sidebar.string("id")?;
            }
            Ok(AiTask {
                id: attrs.string("id")?,
                app_id,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_are_found_in_any_module() {
        let labels = [
            "coder_agent.main",
            "module.claude.coder_ai_task.task",
            "data.coder_external_agent.x",
        ];
        assert!(declares(&labels, "coder_ai_task"));
        assert!(!declares(&labels, "coder_external_agent"));
        assert!(!declares(&labels, "coder_agent_instance"));
    }

    #[test]
    fn counts_saturate() {
        assert_eq!(saturating(5), 5);
        assert_eq!(saturating(1 << 40), i32::MAX);
        assert_eq!(saturating(-(1 << 40)), i32::MIN);
    }
}
