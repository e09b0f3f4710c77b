//! The built-in roles and what each grants. Data, not code: reading this file is reading the
//! policy.

use super::{Action, Resource};

use Action::{Connect, Create, Delete, Read, Update, UpdatePersonal, Use};
use Resource::*;

const CRUD: &[Action] = &[Create, Read, Update, Delete];
const READ: &[Action] = &[Read];

/// Permissions at one level: a list of (resource, actions), or everything.
#[derive(Debug)]
pub enum Grants {
    All,
    Some(&'static [(Resource, &'static [Action])]),
}

impl Grants {
    pub fn grants(&self, resource: Resource, action: Action) -> bool {
        match self {
            Grants::All => true,
            Grants::Some(list) => list
                .iter()
                .any(|(r, actions)| *r == resource && actions.contains(&action)),
        }
    }
}

#[derive(Debug)]
pub struct RoleDef {
    pub name: &'static str,
    pub display_name: &'static str,
    /// On every object of a resource.
    pub site: Grants,
    /// On objects inside an organization where the role is held (organization roles only).
    pub org: Grants,
    /// On objects the caller owns.
    pub user: Grants,
}

const NONE: Grants = Grants::Some(&[]);

pub const OWNER: &RoleDef = &RoleDef {
    name: "owner",
    display_name: "Owner",
    site: Grants::All,
    org: NONE,
    user: NONE,
};

pub const USER_ADMIN: &RoleDef = &RoleDef {
    name: "user-admin",
    display_name: "User Admin",
    site: Grants::Some(&[
        (User, &[Create, Read, Update, Delete, UpdatePersonal]),
        (OrganizationMember, CRUD),
        (AssignRole, CRUD),
        (AssignOrgRole, CRUD),
        (Organization, READ),
        (Group, CRUD),
    ]),
    org: NONE,
    user: NONE,
};

pub const TEMPLATE_ADMIN: &RoleDef = &RoleDef {
    name: "template-admin",
    display_name: "Template Admin",
    site: Grants::Some(&[
        (Template, &[Create, Read, Update, Delete, Use]),
        (File, CRUD),
        (ProvisionerDaemon, CRUD),
        (ProvisionerJob, &[Read, Update]),
        (Workspace, READ),
        (Organization, READ),
        (OrganizationMember, READ),
        (User, READ),
        (Group, READ),
    ]),
    org: NONE,
    user: NONE,
};

pub const AUDITOR: &RoleDef = &RoleDef {
    name: "auditor",
    display_name: "Auditor",
    site: Grants::Some(&[
        (AuditLog, READ),
        (User, READ),
        (Organization, READ),
        (OrganizationMember, READ),
        (Template, READ),
    ]),
    org: NONE,
    user: NONE,
};

/// Everyone holds it: their own account, tokens, workspaces and uploads.
pub const MEMBER: &RoleDef = &RoleDef {
    name: "member",
    display_name: "Member",
    site: Grants::Some(&[(AssignRole, READ)]),
    org: NONE,
    user: Grants::Some(&[
        (User, &[Read, UpdatePersonal]),
        (ApiKey, CRUD),
        (Workspace, &[Create, Read, Update, Delete, Connect]),
        (File, &[Create, Read]),
    ]),
};

pub const ORGANIZATION_ADMIN: &RoleDef = &RoleDef {
    name: "organization-admin",
    display_name: "Organization Admin",
    site: NONE,
    org: Grants::All,
    user: NONE,
};

/// Everyone in an organization holds it there.
pub const ORGANIZATION_MEMBER: &RoleDef = &RoleDef {
    name: "organization-member",
    display_name: "Organization Member",
    site: NONE,
    org: Grants::Some(&[
        (Organization, READ),
        (OrganizationMember, READ),
        // Templates only through their access lists (see `Object::template`).
        (ProvisionerDaemon, READ),
        (Group, READ),
        (AssignOrgRole, READ),
    ]),
    user: NONE,
};

pub const ORGANIZATION_TEMPLATE_ADMIN: &RoleDef = &RoleDef {
    name: "organization-template-admin",
    display_name: "Organization Template Admin",
    site: NONE,
    org: Grants::Some(&[
        (Template, &[Create, Read, Update, Delete, Use]),
        (File, CRUD),
        (ProvisionerDaemon, CRUD),
        (ProvisionerJob, &[Read, Update]),
        (Workspace, READ),
        (OrganizationMember, READ),
        (Group, READ),
    ]),
    user: NONE,
};

pub const ORGANIZATION_USER_ADMIN: &RoleDef = &RoleDef {
    name: "organization-user-admin",
    display_name: "Organization User Admin",
    site: NONE,
    org: Grants::Some(&[
        (OrganizationMember, CRUD),
        (AssignOrgRole, CRUD),
        (Group, CRUD),
    ]),
    user: NONE,
};

pub const ORGANIZATION_AUDITOR: &RoleDef = &RoleDef {
    name: "organization-auditor",
    display_name: "Organization Auditor",
    site: NONE,
    org: Grants::Some(&[
        (AuditLog, READ),
        (Template, READ),
        (OrganizationMember, READ),
    ]),
    user: NONE,
};

/// coderd's own background work (the lifecycle executor's builds): what it needs and no more.
/// Never assignable and never a user's: only [`super::Subject::system`] holds it.
pub const SYSTEM: &RoleDef = &RoleDef {
    name: "system",
    display_name: "System",
    site: Grants::Some(&[
        (Workspace, &[Read, Update, Delete]),
        (Template, READ),
        (Organization, READ),
        (User, READ),
        (ProvisionerJob, READ),
    ]),
    org: NONE,
    user: NONE,
};

/// Site roles that can be assigned (`member` is implicit and not listed).
pub const SITE_ROLES: &[&RoleDef] = &[OWNER, USER_ADMIN, TEMPLATE_ADMIN, AUDITOR];

/// Organization roles that can be assigned (`organization-member` is implicit).
pub const ORG_ROLES: &[&RoleDef] = &[
    ORGANIZATION_ADMIN,
    ORGANIZATION_TEMPLATE_ADMIN,
    ORGANIZATION_USER_ADMIN,
    ORGANIZATION_AUDITOR,
];

pub fn site_role(name: &str) -> Option<&'static RoleDef> {
    SITE_ROLES.iter().copied().find(|r| r.name == name)
}

pub fn org_role(name: &str) -> Option<&'static RoleDef> {
    ORG_ROLES.iter().copied().find(|r| r.name == name)
}
