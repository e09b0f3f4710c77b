//! The echo template format: `echo.json` at the root of a template archive says what each stage
//! of a job does and returns. Documented with examples in the crate README.

use codersdk::proto::{
    ExternalAuthProviderResource, Preset, Resource, RichParameter, TemplateFeatures,
};
use codersdk::provisionerd::{LogLevel, TemplateVariable, Transition};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The file the echo engine reads, at the archive's root.
pub const FILE_NAME: &str = "echo.json";

/// A whole `echo.json`. A missing stage behaves as an empty one: it succeeds, returns nothing
/// but the default state, and logs only what it received.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EchoTemplate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportStage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<BuildStage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<BuildStage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete: Option<BuildStage>,
}

impl EchoTemplate {
    pub fn build_stage(&self, transition: Transition) -> Option<&BuildStage> {
        match transition {
            Transition::Start => self.start.as_ref(),
            Transition::Stop => self.stop.as_ref(),
            Transition::Delete => self.delete.as_ref(),
        }
    }
}

// The two stage types repeat their common fields (`logs`, `flood`, `delay_ms`, `hang`, `error`)
// rather than flattening a shared struct: serde cannot combine `flatten` with
// `deny_unknown_fields`, and a misspelt field must be an error, not a silent no-op.

/// What a template import does and returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportStage {
    pub logs: Vec<EchoLog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood: Option<Flood>,
    pub delay_ms: u64,
    pub hang: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<EchoError>,
    /// Defaults to the archive's `README.md`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readme: Option<String>,
    pub variables: Vec<TemplateVariable>,
    pub rich_parameters: Vec<RichParameter>,
    pub external_auth_providers: Vec<ExternalAuthProviderResource>,
    /// Returned as the template's presets (as terraform's `coder_workspace_preset`s would be).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub presets: Vec<Preset>,
    /// Defaults to the `start` stage's resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_resources: Option<Vec<Resource>>,
    /// Defaults to the `stop` stage's resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_resources: Option<Vec<Resource>>,
}

/// What a workspace build of one transition does and returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BuildStage {
    pub logs: Vec<EchoLog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood: Option<Flood>,
    pub delay_ms: u64,
    pub hang: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<EchoError>,
    pub resources: Vec<Resource>,
    /// What the build reports besides resources (AI tasks, external agents); none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<TemplateFeatures>,
    /// The state to return, verbatim; defaults to an [`EchoState`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// One line of output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EchoLog {
    pub level: LogLevel,
    /// Defaults to the stage's name (`Import`, `Start`, `Stop`, `Delete`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    pub output: String,
}

impl EchoLog {
    pub fn info(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            ..Self::default()
        }
    }
}

/// Many generated lines, to exercise log limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Flood {
    pub lines: u32,
    /// Each line is padded with `x` to this many bytes (never cut below its counter).
    pub line_bytes: u32,
    pub level: LogLevel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

/// Makes the stage fail.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EchoError {
    pub message: String,
    pub code: String,
    /// State to return with the failure (as a failed apply that created resources would).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl EchoError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            ..Self::default()
        }
    }
}

/// The state a build returns unless its stage sets `state`: what ran, and a summary of the
/// state it received, so tests can check that each build got its predecessor's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EchoState {
    pub transition: Transition,
    pub workspace_build_id: Uuid,
    /// 1 for a build without a previous echo state, else the previous generation plus one.
    pub generation: u64,
    /// The previous state, when it was an echo state.
    pub previous: Option<PreviousBuild>,
    /// The previous state's length in bytes (0 for the first build).
    pub previous_bytes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousBuild {
    pub transition: Transition,
    pub workspace_build_id: Uuid,
    pub generation: u64,
}

impl EchoState {
    /// The state following `previous` for this build.
    pub fn next(transition: Transition, workspace_build_id: Uuid, previous: &[u8]) -> Self {
        let before = Self::parse(previous);
        Self {
            transition,
            workspace_build_id,
            generation: before.as_ref().map_or(1, |b| b.generation + 1),
            previous: before.map(|b| PreviousBuild {
                transition: b.transition,
                workspace_build_id: b.workspace_build_id,
                generation: b.generation,
            }),
            previous_bytes: previous.len(),
        }
    }

    /// Reads an echo state; `None` for anything else (an empty or custom state).
    pub fn parse(state: &[u8]) -> Option<Self> {
        serde_json::from_slice(state).ok()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain fields only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_chain_one_level_deep() {
        let first_id = Uuid::new_v4();
        let first = EchoState::next(Transition::Start, first_id, b"");
        assert_eq!(first.generation, 1);
        assert_eq!(first.previous, None);
        let second_id = Uuid::new_v4();
        let bytes = first.to_bytes();
        let second = EchoState::next(Transition::Stop, second_id, &bytes);
        assert_eq!(second.generation, 2);
        assert_eq!(second.previous_bytes, bytes.len());
        assert_eq!(
            second.previous,
            Some(PreviousBuild {
                transition: Transition::Start,
                workspace_build_id: first_id,
                generation: 1
            })
        );
        let third = EchoState::next(Transition::Delete, Uuid::nil(), &second.to_bytes());
        assert_eq!(third.generation, 3);
        assert!(
            third.to_bytes().len() < bytes.len() * 3,
            "state stays bounded"
        );
        assert_eq!(EchoState::parse(&third.to_bytes()), Some(third));
        assert_eq!(EchoState::parse(b"custom"), None);
    }

    #[test]
    fn the_readme_example_is_valid() {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("```json\n{\n  \"import\"")
            .expect("the example")
            + 8;
        let len = readme[start..].find("```").expect("its end");
        let template: EchoTemplate =
            serde_json::from_str(&readme[start..start + len]).expect("the example parses");
        assert!(template.import.is_some() && template.delete.is_some());
    }

    #[test]
    fn unknown_fields_are_errors() {
        let err = serde_json::from_str::<EchoTemplate>(r#"{"start": {"resorces": []}}"#)
            .expect_err("typo refused");
        assert!(err.to_string().contains("resorces"), "{err}");
        let parsed: EchoTemplate = serde_json::from_str(r#"{"stop": {}}"#).expect("minimal");
        assert_eq!(parsed.stop, Some(BuildStage::default()));
    }
}
