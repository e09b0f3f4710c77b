//! Coder's names for resources and actions, as its API shows them in roles' permissions and
//! its dashboard asks about them (`POST /authcheck`).

use super::roles::Grants;
use super::{Action, Resource};

impl Resource {
    /// Coder's resource type for objects of this kind.
    pub fn coder_name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::ApiKey => "api_key",
            Self::Organization => "organization",
            Self::OrganizationMember => "organization_member",
            Self::AssignRole => "assign_role",
            Self::AssignOrgRole => "assign_org_role",
            Self::Template => "template",
            Self::File => "file",
            Self::Workspace => "workspace",
            // Coder guards provisioner keys as provisioner daemons.
            Self::ProvisionerDaemon | Self::ProvisionerKey => "provisioner_daemon",
            Self::ProvisionerJob => "provisioner_jobs",
            Self::DeploymentConfig => "deployment_config",
            Self::AuditLog => "audit_log",
            Self::Group => "group",
        }
    }
}

impl Action {
    /// Coder's actions this one covers (connecting is both SSH and opening apps).
    pub fn coder_names(self) -> &'static [&'static str] {
        match self {
            Self::Create => &["create"],
            Self::Read => &["read"],
            Self::Update => &["update"],
            Self::Delete => &["delete"],
            Self::UpdatePersonal => &["update_personal"],
            Self::Use => &["use"],
            Self::Connect => &["ssh", "application_connect"],
        }
    }
}

impl Grants {
    /// What this grants as Coder's `(resource_type, action)` pairs; `("*", "*")` for all.
    pub fn coder_permissions(&self) -> Vec<(&'static str, &'static str)> {
        match self {
            Grants::All => vec![("*", "*")],
            Grants::Some(list) => list
                .iter()
                .flat_map(|(resource, actions)| {
                    actions.iter().flat_map(move |action| {
                        action
                            .coder_names()
                            .iter()
                            .map(move |name| (resource.coder_name(), *name))
                    })
                })
                .collect(),
        }
    }
}
