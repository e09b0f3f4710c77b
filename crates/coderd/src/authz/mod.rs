//! Role-based access control: the one place that decides whether a caller may act on an object.
//!
//! A caller (a [`Subject`]) holds site roles and, per organization it belongs to, organization
//! roles. Every role grants permissions at one of three levels:
//! * **site**: on every object of a resource type;
//! * **organization**: on objects inside an organization the caller belongs to;
//! * **user**: on objects the caller owns (inside organizations it belongs to).
//!
//! Handlers never compare roles themselves: they describe the object and call [`authorize`]
//! (or [`Subject::filter`] for lists). Objects a caller may not read answer 404, never 403, so
//! that their existence does not leak.

mod roles;

use std::collections::HashMap;

use uuid::Uuid;

pub use roles::{ORG_ROLES, RoleDef, SITE_ROLES, org_role, site_role};

/// Every kind of object the API guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    User,
    ApiKey,
    Organization,
    OrganizationMember,
    /// Granting or revoking site roles.
    AssignRole,
    /// Granting or revoking organization roles.
    AssignOrgRole,
    Template,
    File,
    Workspace,
    ProvisionerDaemon,
    ProvisionerJob,
    ProvisionerKey,
    DeploymentConfig,
    AuditLog,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Create,
    Read,
    Update,
    Delete,
    /// Change one's own profile and password (holders of `Update` may do it for others).
    UpdatePersonal,
    /// Create workspaces from a template.
    Use,
    /// Open SSH, port-forward and app connections into a workspace.
    Connect,
}

/// What is being acted on: its type, and where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
    pub resource: Resource,
    pub org: Option<Uuid>,
    pub owner: Option<Uuid>,
}

impl Object {
    /// An object that belongs to no organization and no user (site-wide settings, all users).
    pub const fn site(resource: Resource) -> Self {
        Self {
            resource,
            org: None,
            owner: None,
        }
    }

    pub const fn in_org(resource: Resource, org: Uuid) -> Self {
        Self {
            resource,
            org: Some(org),
            owner: None,
        }
    }

    pub const fn owned(resource: Resource, org: Option<Uuid>, owner: Uuid) -> Self {
        Self {
            resource,
            org,
            owner: Some(owner),
        }
    }

    /// A user account: owned by itself.
    pub const fn user(id: Uuid) -> Self {
        Self::owned(Resource::User, None, id)
    }
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub user_id: Uuid,
    /// Explicit site roles; everyone is implicitly a `member`.
    pub site_roles: Vec<String>,
    /// Organizations the caller belongs to, with its explicit roles there; membership itself
    /// implies `organization-member`.
    pub orgs: HashMap<Uuid, Vec<String>>,
}

/// Why [`authorize`] said no, which decides the status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The caller may not even see the object: answer as if it did not exist.
    #[error("resource not found or you do not have access to this resource")]
    NotFound,
    /// The caller sees the object but may not do this to it.
    #[error("forbidden")]
    Forbidden,
}

/// Which rows of a resource a caller may list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub all: bool,
    /// Rows in these organizations are visible.
    pub orgs: Vec<Uuid>,
    /// Rows owned by this user (inside `owner_orgs`, or anywhere for site objects) are visible.
    pub owner: Option<Uuid>,
    pub owner_orgs: Vec<Uuid>,
}

impl Filter {
    /// Whether a row with this organization and owner passes.
    pub fn admits(&self, org: Option<Uuid>, owner: Option<Uuid>) -> bool {
        if self.all {
            return true;
        }
        if let Some(org) = org
            && self.orgs.contains(&org)
        {
            return true;
        }
        match (self.owner, owner) {
            (Some(me), Some(owner)) if me == owner => {
                org.is_none_or(|org| self.owner_orgs.contains(&org))
            }
            _ => false,
        }
    }
}

impl Subject {
    /// coderd itself, for background work (the lifecycle executor): holds only the `system`
    /// role. Its id is the nil UUID, which no user has; builds it creates record the
    /// workspace's owner as their initiator.
    pub fn system() -> Self {
        Self {
            user_id: Uuid::nil(),
            site_roles: vec![roles::SYSTEM.name.to_owned()],
            orgs: HashMap::new(),
        }
    }

    /// Whether this is [`Subject::system`].
    pub fn is_system(&self) -> bool {
        self.user_id.is_nil() && self.has_site_role(roles::SYSTEM.name)
    }

    fn site_role_defs(&self) -> impl Iterator<Item = &'static RoleDef> + '_ {
        // The system actor holds nothing else, not even `member`.
        let system = self.is_system().then_some(roles::SYSTEM);
        let users = (!self.is_system()).then_some(roles::MEMBER);
        system
            .into_iter()
            .chain(users)
            .chain(self.site_roles.iter().filter_map(|r| site_role(r)))
    }

    fn org_role_defs(&self, org: Uuid) -> impl Iterator<Item = &'static RoleDef> + '_ {
        self.orgs.get(&org).into_iter().flat_map(|explicit| {
            std::iter::once(roles::ORGANIZATION_MEMBER)
                .chain(explicit.iter().filter_map(|r| org_role(r)))
        })
    }

    pub fn is_member_of(&self, org: Uuid) -> bool {
        self.orgs.contains_key(&org)
    }

    pub fn has_site_role(&self, role: &str) -> bool {
        self.site_roles.iter().any(|r| r == role)
    }

    /// Whether the caller may perform `action` on `object`.
    pub fn can(&self, action: Action, object: &Object) -> bool {
        let (resource, org) = (object.resource, object.org);
        if self
            .site_role_defs()
            .any(|r| r.site.grants(resource, action))
        {
            return true;
        }
        if let Some(org) = org
            && self
                .org_role_defs(org)
                .any(|r| r.org.grants(resource, action))
        {
            return true;
        }
        if object.owner == Some(self.user_id) && org.is_none_or(|org| self.is_member_of(org)) {
            let mut defs = self
                .site_role_defs()
                .chain(org.into_iter().flat_map(|org| self.org_role_defs(org)));
            return defs.any(|r| r.user.grants(resource, action));
        }
        false
    }

    /// Which rows of `resource` the caller may read.
    pub fn filter(&self, resource: Resource) -> Filter {
        let all = self
            .site_role_defs()
            .any(|r| r.site.grants(resource, Action::Read));
        let orgs = self
            .orgs
            .keys()
            .copied()
            .filter(|org| {
                self.org_role_defs(*org)
                    .any(|r| r.org.grants(resource, Action::Read))
            })
            .collect();
        let site_user_read = self
            .site_role_defs()
            .any(|r| r.user.grants(resource, Action::Read));
        let owner_orgs: Vec<Uuid> = self
            .orgs
            .keys()
            .copied()
            .filter(|org| {
                site_user_read
                    || self
                        .org_role_defs(*org)
                        .any(|r| r.user.grants(resource, Action::Read))
            })
            .collect();
        Filter {
            all,
            orgs,
            owner: (site_user_read || !owner_orgs.is_empty()).then_some(self.user_id),
            owner_orgs,
        }
    }

    /// Whether the caller may grant or revoke the site role `role`. Only owners hand out
    /// `owner`.
    pub fn can_assign_site_role(&self, role: &str) -> bool {
        site_role(role).is_some()
            && self.can(Action::Update, &Object::site(Resource::AssignRole))
            && (role != roles::OWNER.name || self.has_site_role(roles::OWNER.name))
    }

    /// Whether the caller may grant or revoke the organization role `role` in `org`. Only
    /// owners and organization admins hand out `organization-admin`.
    pub fn can_assign_org_role(&self, org: Uuid, role: &str) -> bool {
        let admin = roles::ORGANIZATION_ADMIN.name;
        org_role(role).is_some()
            && self.can(
                Action::Update,
                &Object::in_org(Resource::AssignOrgRole, org),
            )
            && (role != admin
                || self.has_site_role(roles::OWNER.name)
                || self
                    .orgs
                    .get(&org)
                    .is_some_and(|r| r.iter().any(|r| r == admin)))
    }
}

/// Decides, and picks the answer a refusal deserves: 404 when the caller may not read the object
/// at all, 403 when it may read it but not do this. A refused create is always 403: the object
/// does not exist yet, so refusing reveals nothing (its container was resolved, and hidden if
/// need be, before).
pub fn authorize(subject: &Subject, action: Action, object: &Object) -> Result<(), Denied> {
    if subject.can(action, object) {
        Ok(())
    } else if action == Action::Create
        || (action != Action::Read && subject.can(Action::Read, object))
    {
        Err(Denied::Forbidden)
    } else {
        Err(Denied::NotFound)
    }
}

#[cfg(test)]
mod tests;
