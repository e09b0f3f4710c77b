//! Users, roles and password login.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserStatus {
    Active,
    Dormant,
    Suspended,
}

impl UserStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Dormant => "dormant",
            Self::Suspended => "suspended",
        }
    }
}

impl std::str::FromStr for UserStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "active" => Ok(Self::Active),
            "dormant" => Ok(Self::Dormant),
            "suspended" => Ok(Self::Suspended),
            other => Err(format!("unknown user status {other:?}")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LoginType {
    Password,
    Github,
    Oidc,
    Token,
    None,
}

impl LoginType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Password => "password",
            Self::Github => "github",
            Self::Oidc => "oidc",
            Self::Token => "token",
            Self::None => "none",
        }
    }
}

impl std::str::FromStr for LoginType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "password" => Ok(Self::Password),
            "github" => Ok(Self::Github),
            "oidc" => Ok(Self::Oidc),
            "token" => Ok(Self::Token),
            "none" => Ok(Self::None),
            other => Err(format!("unknown login type {other:?}")),
        }
    }
}

/// A role as it appears inside a user or member: `organization_id` is empty for site roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SlimRole {
    pub name: String,
    pub display_name: String,
    #[serde(default)]
    pub organization_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct User {
    pub id: Uuid,
    pub username: String,
    pub name: String,
    pub email: String,
    pub avatar_url: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub status: UserStatus,
    pub login_type: LoginType,
    pub organization_ids: Vec<Uuid>,
    pub roles: Vec<SlimRole>,
    pub theme_preference: String,
    /// Whether the user holds one of Coder's AI seats (a licence count; nobody does here).
    #[serde(default)]
    pub has_ai_seat: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GetUsersResponse {
    pub users: Vec<User>,
    pub count: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateFirstUserRequest {
    pub email: String,
    pub username: String,
    #[serde(default)]
    pub name: String,
    pub password: String,
    #[serde(default)]
    pub trial: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateFirstUserResponse {
    pub user_id: Uuid,
    pub organization_id: Uuid,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateUserRequest {
    pub email: String,
    pub username: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub password: String,
    /// Empty means password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_type: Option<LoginType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_status: Option<UserStatus>,
    /// Organizations to join; empty means the default organization.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organization_ids: Vec<Uuid>,
    /// Older clients send a single organization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<Uuid>,
    /// Site roles to grant besides `member`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LoginWithPasswordRequest {
    pub email: String,
    pub password: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LoginWithPasswordResponse {
    pub session_token: String,
}

/// `GET /users/authmethods`: how people may sign in to this deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthMethods {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub terms_of_service_url: String,
    pub password: AuthMethod,
    pub github: GithubAuthMethod,
    pub oidc: OidcAuthMethod,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthMethod {
    pub enabled: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GithubAuthMethod {
    pub enabled: bool,
    #[serde(default)]
    pub default_provider_configured: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OidcAuthMethod {
    pub enabled: bool,
    #[serde(default, rename = "signInText")]
    pub sign_in_text: String,
    #[serde(default, rename = "iconUrl")]
    pub icon_url: String,
}

/// Body of `PUT /users/{user}/roles` and `PUT /organizations/{org}/members/{user}/roles`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateRoles {
    pub roles: Vec<String>,
}

/// `GET /users/{user}/roles`: site roles and roles per organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserRoles {
    pub roles: Vec<String>,
    pub organization_roles: std::collections::BTreeMap<Uuid, Vec<String>>,
}

/// One role a caller may see and perhaps assign (`GET /users/roles`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AssignableRole {
    pub name: String,
    pub display_name: String,
    #[serde(default)]
    pub organization_id: String,
    /// On every object of a resource.
    #[serde(default)]
    pub site_permissions: Vec<Permission>,
    /// On objects in the organization where the role is held.
    #[serde(default)]
    pub organization_permissions: Vec<Permission>,
    /// On objects the holder owns.
    #[serde(default)]
    pub user_permissions: Vec<Permission>,
    /// On objects the holder owns inside the organization.
    #[serde(default)]
    pub organization_member_permissions: Vec<Permission>,
    pub assignable: bool,
    pub built_in: bool,
}

/// One thing a role allows: `action` on objects of `resource_type` (`*` for any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Permission {
    pub negate: bool,
    pub resource_type: String,
    pub action: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateUserPasswordRequest {
    #[serde(default)]
    pub old_password: String,
    pub password: String,
}

impl crate::Client {
    /// Whether the deployment has its first user (`GET /users/first` answers 200 once it does).
    pub async fn has_first_user(&self) -> Result<bool, crate::ClientError> {
        match self.get::<crate::Response>("/api/v2/users/first").await {
            Ok(_) => Ok(true),
            Err(crate::ClientError::Api { status: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn create_first_user(
        &self,
        req: &CreateFirstUserRequest,
    ) -> Result<CreateFirstUserResponse, crate::ClientError> {
        self.post("/api/v2/users/first", req).await
    }

    pub async fn login_with_password(
        &self,
        req: &LoginWithPasswordRequest,
    ) -> Result<LoginWithPasswordResponse, crate::ClientError> {
        self.post("/api/v2/users/login", req).await
    }

    /// How people may sign in to the deployment (no authentication needed).
    pub async fn auth_methods(&self) -> Result<AuthMethods, crate::ClientError> {
        self.get("/api/v2/users/authmethods").await
    }

    pub async fn logout(&self) -> Result<(), crate::ClientError> {
        self.send_empty(self.request(reqwest::Method::POST, "/api/v2/users/logout")?)
            .await
    }

    /// `user` is `me`, a username or an id.
    pub async fn user(&self, user: &str) -> Result<User, crate::ClientError> {
        self.get(&format!("/api/v2/users/{user}")).await
    }

    pub async fn users(&self, q: &str) -> Result<GetUsersResponse, crate::ClientError> {
        self.get_query("/api/v2/users", &[("q", q)]).await
    }

    pub async fn create_user(&self, req: &CreateUserRequest) -> Result<User, crate::ClientError> {
        self.post("/api/v2/users", req).await
    }

    pub async fn delete_user(&self, user: &str) -> Result<(), crate::ClientError> {
        self.delete(&format!("/api/v2/users/{user}")).await
    }

    pub async fn update_user_status(
        &self,
        user: &str,
        status: UserStatus,
    ) -> Result<User, crate::ClientError> {
        let verb = match status {
            UserStatus::Suspended => "suspend",
            UserStatus::Active | UserStatus::Dormant => "activate",
        };
        self.send(self.request(
            reqwest::Method::PUT,
            &format!("/api/v2/users/{user}/status/{verb}"),
        )?)
        .await
    }

    pub async fn update_user_roles(
        &self,
        user: &str,
        roles: &[String],
    ) -> Result<User, crate::ClientError> {
        let body = UpdateRoles {
            roles: roles.to_vec(),
        };
        self.put(&format!("/api/v2/users/{user}/roles"), &body)
            .await
    }

    pub async fn user_roles(&self, user: &str) -> Result<UserRoles, crate::ClientError> {
        self.get(&format!("/api/v2/users/{user}/roles")).await
    }

    pub async fn update_user_password(
        &self,
        user: &str,
        req: &UpdateUserPasswordRequest,
    ) -> Result<(), crate::ClientError> {
        self.send_empty(
            self.request(
                reqwest::Method::PUT,
                &format!("/api/v2/users/{user}/password"),
            )?
            .json(req),
        )
        .await
    }
}
