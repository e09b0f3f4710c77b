//! `GET/PUT /api/v2/appearance`: the deployment's name, logo and banners, which Coder's
//! dashboard and IDE plugins show (the JetBrains plugin fails its sign-in without
//! `application_name`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BannerConfig {
    pub enabled: bool,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub background_color: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LinkConfig {
    pub name: String,
    pub target: String,
    pub icon: String,
    #[serde(default)]
    pub location: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppearanceConfig {
    pub application_name: String,
    pub logo_url: String,
    pub docs_url: String,
    pub hide_codernauts: bool,
    /// Deprecated by Coder in favour of `announcement_banners`; still read by older clients.
    pub service_banner: BannerConfig,
    pub announcement_banners: Vec<BannerConfig>,
    pub support_links: Vec<LinkConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateAppearanceConfig {
    #[serde(default)]
    pub application_name: String,
    #[serde(default)]
    pub logo_url: String,
    #[serde(default)]
    pub hide_codernauts: bool,
    #[serde(default)]
    pub service_banner: BannerConfig,
    #[serde(default)]
    pub announcement_banners: Vec<BannerConfig>,
}

impl crate::Client {
    pub async fn appearance(&self) -> Result<AppearanceConfig, crate::ClientError> {
        self.get("/api/v2/appearance").await
    }

    pub async fn update_appearance(
        &self,
        update: &UpdateAppearanceConfig,
    ) -> Result<AppearanceConfig, crate::ClientError> {
        self.put("/api/v2/appearance", update).await
    }
}
