//! Presets: a template version's named sets of parameter values. Listing them, and applying one
//! to a build — the preset's values are the build's, and a request naming another value for one
//! of them is refused rather than silently overridden (the preset is what was asked for, and a
//! prebuild claimed for it must match it).

use codersdk::ValidationError;
use codersdk::presets::{Preset, PresetParameter};
use codersdk::workspaces::WorkspaceBuildParameter;
use uuid::Uuid;

use super::{Error, Result};
use crate::state::AppState;
use coderd_store::{self as store, PresetRow, TemplateVersionRow};

pub fn render(row: PresetRow) -> Preset {
    Preset {
        id: row.id,
        name: row.name,
        parameters: row
            .parameters
            .into_iter()
            .map(|(name, value)| PresetParameter { name, value })
            .collect(),
        default: row.is_default,
        desired_prebuild_instances: row.desired_instances,
        description: row.description,
        icon: row.icon,
    }
}

/// The presets of a version the caller has already resolved (so may read).
pub async fn of_version(state: &AppState, version: &TemplateVersionRow) -> Result<Vec<Preset>> {
    Ok(state
        .store
        .presets_of_versions(&[version.id])
        .await?
        .into_iter()
        .map(render)
        .collect())
}

fn invalid(field: String, detail: String) -> ValidationError {
    ValidationError { field, detail }
}

/// The preset `id` of `version`, or a validation error on `template_version_preset_id`.
pub async fn of_build(state: &AppState, version: Uuid, id: Uuid) -> Result<PresetRow> {
    let refuse = |detail: String| {
        Error::Validation(vec![invalid("template_version_preset_id".into(), detail)])
    };
    match state.store.preset_by_id(id).await {
        Ok(row) if row.template_version_id == version => Ok(row),
        Ok(_) => Err(refuse(format!(
            "preset {id} belongs to another template version than {version}"
        ))),
        Err(store::Error::NotFound) => Err(refuse(format!("no preset {id}"))),
        Err(e) => Err(e.into()),
    }
}

/// The values a build asks for once the preset is applied: the request's own, plus the
/// preset's for the parameters the version declares. A request value that differs from the
/// preset's is refused.
pub fn apply(
    preset: &PresetRow,
    declared: &[codersdk::proto::RichParameter],
    requested: &[WorkspaceBuildParameter],
) -> Result<Vec<WorkspaceBuildParameter>> {
    let mut errors = Vec::new();
    let mut values = requested.to_vec();
    for (name, value) in &preset.parameters {
        // A preset may outlive a parameter (the converter warned at import): ignore it.
        if !declared.iter().any(|p| &p.name == name) {
            continue;
        }
        match requested.iter().rev().find(|r| &r.name == name) {
            Some(r) if &r.value != value => errors.push(invalid(
                format!("rich_parameter_values.{name}"),
                format!(
                    "preset {:?} sets this parameter to {value:?}; it cannot be changed",
                    preset.name
                ),
            )),
            Some(_) => {}
            None => values.push(WorkspaceBuildParameter {
                name: name.clone(),
                value: value.clone(),
            }),
        }
    }
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(Error::Validation(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset() -> PresetRow {
        PresetRow {
            id: Uuid::new_v4(),
            template_version_id: Uuid::new_v4(),
            name: "big".into(),
            is_default: false,
            description: String::new(),
            icon: String::new(),
            desired_instances: None,
            expiration_ttl: None,
            scheduling: None,
            created_at: chrono::Utc::now(),
            parameters: vec![("cpu".into(), "8".into()), ("gone".into(), "x".into())],
        }
    }

    fn declared(names: &[&str]) -> Vec<codersdk::proto::RichParameter> {
        names
            .iter()
            .map(|n| codersdk::proto::RichParameter {
                name: (*n).into(),
                ..Default::default()
            })
            .collect()
    }

    fn value(name: &str, value: &str) -> WorkspaceBuildParameter {
        WorkspaceBuildParameter {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn preset_values_fill_in_and_cannot_be_overridden() {
        let p = preset();
        let d = declared(&["cpu", "region"]);
        let applied = apply(&p, &d, &[value("region", "eu")]).expect("applies");
        assert_eq!(applied, vec![value("region", "eu"), value("cpu", "8")]);
        // Repeating the preset's own value is not an override.
        assert!(apply(&p, &d, &[value("cpu", "8")]).is_ok());
        match apply(&p, &d, &[value("cpu", "2")]) {
            Err(Error::Validation(v)) => assert_eq!(v[0].field, "rich_parameter_values.cpu"),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }
}
