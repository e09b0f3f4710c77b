//! A template version's presets (`GET /templateversions/{id}/presets`). Coder's `Preset` has no
//! JSON tags, so its keys are the Go field names, capitalised.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "PascalCase")]
pub struct Preset {
    #[serde(rename = "ID")]
    pub id: Uuid,
    pub name: String,
    pub parameters: Vec<PresetParameter>,
    /// Selected when a workspace is created without naming a preset.
    pub default: bool,
    /// How many prebuilt workspaces are kept for it; null without a `prebuilds` block.
    pub desired_prebuild_instances: Option<i32>,
    pub description: String,
    pub icon: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "PascalCase")]
pub struct PresetParameter {
    pub name: String,
    pub value: String,
}

impl crate::Client {
    pub async fn template_version_presets(
        &self,
        version: Uuid,
    ) -> Result<Vec<Preset>, crate::ClientError> {
        self.get(&format!("/api/v2/templateversions/{version}/presets"))
            .await
    }
}
