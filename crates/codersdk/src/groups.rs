//! Groups of users per organization, and templates' access lists for users and groups.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::users::{LoginType, User, UserStatus};

/// Who manages a group's members: people through the API, or OIDC group sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupSource {
    User,
    Oidc,
}

/// A user as groups list them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReducedUser {
    pub id: Uuid,
    pub username: String,
    pub name: String,
    pub email: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub status: UserStatus,
    pub login_type: LoginType,
    pub avatar_url: String,
    pub theme_preference: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Group {
    pub id: Uuid,
    pub name: String,
    pub display_name: String,
    pub organization_id: Uuid,
    pub members: Vec<ReducedUser>,
    pub total_member_count: i64,
    pub avatar_url: String,
    pub quota_allowance: i32,
    pub source: GroupSource,
    pub organization_name: String,
    pub organization_display_name: String,
}

impl Group {
    /// The organization's Everyone group (its id is the organization's).
    pub fn is_everyone(&self) -> bool {
        self.id == self.organization_id
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateGroupRequest {
    pub name: String,
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub avatar_url: String,
    #[serde(default)]
    pub quota_allowance: i32,
}

/// Changes to a group; absent fields stay as they are. Users are named by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PatchGroupRequest {
    #[serde(default)]
    pub add_users: Vec<String>,
    #[serde(default)]
    pub remove_users: Vec<String>,
    /// Empty keeps the name.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub avatar_url: Option<String>,
    #[serde(default)]
    pub quota_allowance: Option<i32>,
}

/// What a template's access-list entry allows; `""` removes the entry in an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum TemplateRole {
    #[serde(rename = "admin")]
    Admin,
    #[serde(rename = "use")]
    Use,
    #[serde(rename = "")]
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateUser {
    #[serde(flatten)]
    pub user: User,
    pub role: TemplateRole,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateGroup {
    #[serde(flatten)]
    pub group: Group,
    pub role: TemplateRole,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateACL {
    pub users: Vec<TemplateUser>,
    /// Coder names this field in the singular.
    #[serde(rename = "group")]
    pub groups: Vec<TemplateGroup>,
}

/// Entries to set (`admin`, `use`) or remove (`""`), keyed by user or group id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateTemplateACL {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_perms: BTreeMap<String, TemplateRole>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_perms: BTreeMap<String, TemplateRole>,
}

/// Who can be added to a template's access list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ACLAvailable {
    pub users: Vec<ReducedUser>,
    pub groups: Vec<Group>,
}

impl crate::Client {
    pub async fn create_group(
        &self,
        org: &str,
        req: &CreateGroupRequest,
    ) -> Result<Group, crate::ClientError> {
        self.post(&format!("/api/v2/organizations/{org}/groups"), req)
            .await
    }

    pub async fn groups_by_organization(
        &self,
        org: &str,
    ) -> Result<Vec<Group>, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/groups"))
            .await
    }

    pub async fn group_by_org_and_name(
        &self,
        org: &str,
        name: &str,
    ) -> Result<Group, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/groups/{name}"))
            .await
    }

    pub async fn group(&self, id: Uuid) -> Result<Group, crate::ClientError> {
        self.get(&format!("/api/v2/groups/{id}")).await
    }

    pub async fn patch_group(
        &self,
        id: Uuid,
        req: &PatchGroupRequest,
    ) -> Result<Group, crate::ClientError> {
        self.patch(&format!("/api/v2/groups/{id}"), req).await
    }

    pub async fn delete_group(&self, id: Uuid) -> Result<(), crate::ClientError> {
        self.delete(&format!("/api/v2/groups/{id}")).await
    }

    pub async fn template_acl(&self, template: Uuid) -> Result<TemplateACL, crate::ClientError> {
        self.get(&format!("/api/v2/templates/{template}/acl")).await
    }

    pub async fn update_template_acl(
        &self,
        template: Uuid,
        req: &UpdateTemplateACL,
    ) -> Result<crate::Response, crate::ClientError> {
        self.patch(&format!("/api/v2/templates/{template}/acl"), req)
            .await
    }

    pub async fn template_acl_available(
        &self,
        template: Uuid,
    ) -> Result<ACLAvailable, crate::ClientError> {
        self.get(&format!("/api/v2/templates/{template}/acl/available"))
            .await
    }
}
