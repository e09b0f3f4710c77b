//! Organizations and their members.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::users::SlimRole;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Organization {
    pub id: Uuid,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub icon: String,
    pub is_default: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Organization roles every new member gets.
    #[serde(default)]
    pub default_org_member_roles: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateOrganizationRequest {
    pub name: String,
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub icon: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OrganizationMember {
    pub user_id: Uuid,
    pub organization_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub roles: Vec<SlimRole>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OrganizationMemberWithUserData {
    pub user_id: Uuid,
    pub organization_id: Uuid,
    pub username: String,
    pub name: String,
    pub email: String,
    pub avatar_url: String,
    pub global_roles: Vec<SlimRole>,
    pub roles: Vec<SlimRole>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub status: crate::users::UserStatus,
    pub login_type: crate::users::LoginType,
    pub user_created_at: DateTime<Utc>,
    pub user_updated_at: DateTime<Utc>,
    #[serde(default)]
    pub has_ai_seat: bool,
}

impl crate::Client {
    pub async fn organizations(&self) -> Result<Vec<Organization>, crate::ClientError> {
        self.get("/api/v2/organizations").await
    }

    /// `org` is a name or an id.
    pub async fn organization(&self, org: &str) -> Result<Organization, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}")).await
    }

    pub async fn create_organization(
        &self,
        req: &CreateOrganizationRequest,
    ) -> Result<Organization, crate::ClientError> {
        self.post("/api/v2/organizations", req).await
    }

    pub async fn user_organizations(
        &self,
        user: &str,
    ) -> Result<Vec<Organization>, crate::ClientError> {
        self.get(&format!("/api/v2/users/{user}/organizations"))
            .await
    }

    pub async fn organization_members(
        &self,
        org: &str,
    ) -> Result<Vec<OrganizationMemberWithUserData>, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/members"))
            .await
    }

    pub async fn add_organization_member(
        &self,
        org: &str,
        user: &str,
    ) -> Result<OrganizationMember, crate::ClientError> {
        self.send(self.request(
            reqwest::Method::POST,
            &format!("/api/v2/organizations/{org}/members/{user}"),
        )?)
        .await
    }

    pub async fn remove_organization_member(
        &self,
        org: &str,
        user: &str,
    ) -> Result<(), crate::ClientError> {
        self.delete(&format!("/api/v2/organizations/{org}/members/{user}"))
            .await
    }

    pub async fn update_organization_member_roles(
        &self,
        org: &str,
        user: &str,
        roles: &[String],
    ) -> Result<OrganizationMember, crate::ClientError> {
        let body = crate::users::UpdateRoles {
            roles: roles.to_vec(),
        };
        self.put(
            &format!("/api/v2/organizations/{org}/members/{user}/roles"),
            &body,
        )
        .await
    }
}
