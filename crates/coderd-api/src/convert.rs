//! Store rows → API shapes.

use codersdk::organizations::{Organization, OrganizationMember, OrganizationMemberWithUserData};
use codersdk::users::SlimRole;
use uuid::Uuid;

use coderd_authz::org_role;
pub use coderd_core::domain::render::{site_roles, user};
use coderd_store::{MemberRow, MemberWithUserRow, OrganizationRow};

pub fn org_roles(org: Uuid, names: &[String]) -> Vec<SlimRole> {
    names
        .iter()
        .map(|name| SlimRole {
            display_name: org_role(name).map_or_else(|| name.clone(), |r| r.display_name.into()),
            name: name.clone(),
            organization_id: org.to_string(),
        })
        .collect()
}

pub fn organization(row: OrganizationRow) -> Organization {
    Organization {
        id: row.id,
        name: row.name,
        display_name: row.display_name,
        description: row.description,
        icon: row.icon,
        is_default: row.is_default,
        created_at: row.created_at,
        updated_at: row.updated_at,
        default_org_member_roles: Vec::new(),
    }
}

pub fn member(row: MemberRow) -> OrganizationMember {
    OrganizationMember {
        roles: org_roles(row.organization_id, &row.roles),
        user_id: row.user_id,
        organization_id: row.organization_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

pub fn member_with_user(row: MemberWithUserRow) -> OrganizationMemberWithUserData {
    OrganizationMemberWithUserData {
        roles: org_roles(row.organization_id, &row.roles),
        global_roles: site_roles(&row.rbac_roles),
        user_id: row.user_id,
        organization_id: row.organization_id,
        username: row.username,
        name: row.name,
        email: row.email,
        avatar_url: row.avatar_url,
        created_at: row.created_at,
        updated_at: row.updated_at,
        status: row
            .status
            .parse()
            .unwrap_or(codersdk::users::UserStatus::Active),
        login_type: row
            .login_type
            .parse()
            .unwrap_or(codersdk::users::LoginType::Password),
        user_created_at: row.user_created_at,
        user_updated_at: row.user_updated_at,
        has_ai_seat: false,
    }
}

/// What a role grants at one level, as Coder lists a role's permissions.
pub fn permissions(grants: &coderd_authz::Grants) -> Vec<codersdk::users::Permission> {
    grants
        .coder_permissions()
        .into_iter()
        .map(|(resource, action)| codersdk::users::Permission {
            negate: false,
            resource_type: resource.into(),
            action: action.into(),
        })
        .collect()
}
