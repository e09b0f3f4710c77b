//! coderd's policy, below everything that stores or serves: [`auth`] mints and checks credentials
//! (token secrets, password hashes), and the rest of this crate is role-based access control,
//! the one place that decides whether a caller may act on an object.
//!
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

pub mod auth;
mod names;
mod roles;

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

pub use roles::{Grants, ORG_ROLES, RoleDef, SITE_ROLES, org_role, site_role};

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
    /// Groups of an organization and their members.
    Group,
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

/// What is being acted on: its type, where it sits, and (templates) its access list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub resource: Resource,
    pub org: Option<Uuid>,
    pub owner: Option<Uuid>,
    /// Grants to users and groups on this one object, on top of roles (Coder's template ACLs):
    /// an organization member holding an entry, or in a group holding one, may do what the
    /// entry's role allows.
    pub acl: Option<Arc<Acl>>,
}

/// What an access-list entry allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AclRole {
    /// Read the object and use it (create workspaces from a template).
    Use,
    /// Everything.
    Admin,
}

impl AclRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Use => "use",
            Self::Admin => "admin",
        }
    }

    pub fn allows(self, action: Action) -> bool {
        match self {
            Self::Admin => true,
            Self::Use => matches!(action, Action::Read | Action::Use),
        }
    }
}

impl std::str::FromStr for AclRole {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "use" => Ok(Self::Use),
            "admin" => Ok(Self::Admin),
            other => Err(format!("unknown template role {other:?}")),
        }
    }
}

/// An object's access list: entries for users and for groups (an organization's Everyone group
/// has the organization's id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acl {
    pub users: Vec<(Uuid, AclRole)>,
    pub groups: Vec<(Uuid, AclRole)>,
}

impl Object {
    /// An object that belongs to no organization and no user (site-wide settings, all users).
    pub const fn site(resource: Resource) -> Self {
        Self {
            resource,
            org: None,
            owner: None,
            acl: None,
        }
    }

    pub const fn in_org(resource: Resource, org: Uuid) -> Self {
        Self {
            resource,
            org: Some(org),
            owner: None,
            acl: None,
        }
    }

    pub const fn owned(resource: Resource, org: Option<Uuid>, owner: Uuid) -> Self {
        Self {
            resource,
            org,
            owner: Some(owner),
            acl: None,
        }
    }

    /// A template: guarded by its organization's roles and its access list.
    pub fn template(org: Uuid, acl: Acl) -> Self {
        Self {
            acl: Some(Arc::new(acl)),
            ..Self::in_org(Resource::Template, org)
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
    /// Groups the caller was added to (each organization's Everyone group is implied by
    /// membership and not listed).
    pub groups: Vec<Uuid>,
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
    /// Rows with an access list (templates) in these organizations are visible when it holds
    /// an entry for `acl_user` or for one of `acl_groups` or the organization's Everyone group.
    pub acl_orgs: Vec<Uuid>,
    pub acl_user: Option<Uuid>,
    pub acl_groups: Vec<Uuid>,
}

impl Filter {
    /// Whether a row with this organization and owner passes on roles alone (access lists are
    /// matched in SQL, where they are).
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
            groups: Vec::new(),
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
            if defs.any(|r| r.user.grants(resource, action)) {
                return true;
            }
        }
        match (&object.acl, org) {
            (Some(acl), Some(org)) if self.is_member_of(org) => self.acl_grants(acl, org, action),
            _ => false,
        }
    }

    /// Whether an access-list entry for the caller, or for a group it is in, allows `action`.
    fn acl_grants(&self, acl: &Acl, org: Uuid, action: Action) -> bool {
        let user = acl
            .users
            .iter()
            .any(|(id, role)| *id == self.user_id && role.allows(action));
        user || acl.groups.iter().any(|(group, role)| {
            (*group == org || self.groups.contains(group)) && role.allows(action)
        })
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
        let acl = resource == Resource::Template && !self.is_system();
        Filter {
            all,
            orgs,
            owner: (site_user_read || !owner_orgs.is_empty()).then_some(self.user_id),
            owner_orgs,
            acl_orgs: if acl {
                self.orgs.keys().copied().collect()
            } else {
                Vec::new()
            },
            acl_user: acl.then_some(self.user_id),
            acl_groups: if acl { self.groups.clone() } else { Vec::new() },
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
