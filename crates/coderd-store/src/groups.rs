//! `groups`, `group_members` and templates' access lists (`template_user_acl`,
//! `template_group_acl`). Every group write is one method here, so each is one place to
//! observe (the audit log hooks in here).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{NewAuditLog, Result, Store, audit, timed};
use coderd_authz::{Acl, AclRole};

/// A group with its organization's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRow {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub display_name: String,
    pub avatar_url: String,
    pub quota_allowance: i32,
    pub source: String,
    pub created_at: DateTime<Utc>,
    pub organization_name: String,
    pub organization_display_name: String,
}

/// A (not deleted) user in a group; the Everyone group's are its organization's members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMemberRow {
    pub group_id: Uuid,
    pub id: Uuid,
    pub username: String,
    pub name: String,
    pub email: String,
    pub avatar_url: String,
    pub status: String,
    pub login_type: String,
    pub rbac_roles: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct NewGroup {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub display_name: String,
    pub avatar_url: String,
    pub quota_allowance: i32,
}

/// A group's changes; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct GroupChanges {
    pub name: Option<String>,
    pub display_name: Option<String>,
    pub avatar_url: Option<String>,
    pub quota_allowance: Option<i32>,
    /// Added only when they are members of the group's organization.
    pub add_users: Vec<Uuid>,
    pub remove_users: Vec<Uuid>,
}

/// What OIDC group sync sets at a sign-in: the user's groups from the claim (already mapped
/// and filtered), in one organization.
#[derive(Debug, Clone)]
pub struct GroupSync {
    pub organization_id: Uuid,
    pub groups: Vec<String>,
    /// Create the claim's groups that do not exist yet (as `oidc` groups).
    pub auto_create: bool,
}

/// A change to a template's access list: `None` removes the entry.
pub type AclChange = (Uuid, Option<AclRole>);

impl Store {
    /// The groups of an organization, by name (Everyone first).
    pub async fn groups_in_org(&self, org: Uuid) -> Result<Vec<GroupRow>> {
        timed("groups_in_org", async {
            Ok(sqlx::query_as!(
                GroupRow,
                r#"SELECT g.id, g.organization_id, g.name, g.display_name, g.avatar_url,
                          g.quota_allowance, g.source, g.created_at,
                          o.name AS organization_name, o.display_name AS organization_display_name
                   FROM groups g JOIN organizations o ON o.id = g.organization_id
                   WHERE g.organization_id = $1
                   ORDER BY g.id <> g.organization_id, lower(g.name)"#,
                org
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// A group by id, or by organization and (case-insensitive) name.
    pub async fn group_by(
        &self,
        id: Option<Uuid>,
        org_and_name: Option<(Uuid, &str)>,
    ) -> Result<GroupRow> {
        let (org, name) = org_and_name.unzip();
        timed("group_by", async {
            Ok(sqlx::query_as!(
                GroupRow,
                r#"SELECT g.id, g.organization_id, g.name, g.display_name, g.avatar_url,
                          g.quota_allowance, g.source, g.created_at,
                          o.name AS organization_name, o.display_name AS organization_display_name
                   FROM groups g JOIN organizations o ON o.id = g.organization_id
                   WHERE ($1::uuid IS NULL OR g.id = $1)
                     AND ($2::uuid IS NULL OR (g.organization_id = $2 AND lower(g.name) = lower($3)))"#,
                id,
                org,
                name
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// The members of these groups, by username.
    pub async fn group_members(&self, groups: &[Uuid]) -> Result<Vec<GroupMemberRow>> {
        timed("group_members", async {
            Ok(sqlx::query_as!(
                GroupMemberRow,
                r#"SELECT m.group_id AS "group_id!", u.id, u.username, u.name, u.email,
                          u.avatar_url, u.status, u.login_type, u.rbac_roles, u.created_at,
                          u.updated_at, u.last_seen_at
                   FROM (SELECT group_id, user_id FROM group_members WHERE group_id = ANY($1)
                         UNION ALL
                         SELECT organization_id, user_id FROM organization_members
                          WHERE organization_id = ANY($1)) m
                   JOIN users u ON u.id = m.user_id
                   WHERE NOT u.deleted
                   ORDER BY lower(u.username)"#,
                groups
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn create_group(&self, g: &NewGroup, log: Option<&NewAuditLog>) -> Result<GroupRow> {
        timed("create_group", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"INSERT INTO groups (id, organization_id, name, display_name, avatar_url,
                                       quota_allowance, source)
                   VALUES ($1, $2, $3, $4, $5, $6, 'user')"#,
                g.id,
                g.organization_id,
                g.name,
                g.display_name,
                g.avatar_url,
                g.quota_allowance
            )
            .execute(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await?;
        self.group_by(Some(g.id), None).await
    }

    /// Changes a group and its members atomically. Users who are not members of the group's
    /// organization are not added.
    pub async fn update_group(
        &self,
        id: Uuid,
        c: &GroupChanges,
        log: Option<&NewAuditLog>,
    ) -> Result<GroupRow> {
        timed("update_group", async {
            let mut tx = self.pool.begin().await?;
            let updated = sqlx::query!(
                r#"UPDATE groups SET name = COALESCE($2, name),
                          display_name = COALESCE($3, display_name),
                          avatar_url = COALESCE($4, avatar_url),
                          quota_allowance = COALESCE($5, quota_allowance)
                   WHERE id = $1"#,
                id,
                c.name,
                c.display_name,
                c.avatar_url,
                c.quota_allowance
            )
            .execute(&mut *tx)
            .await?;
            if updated.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            sqlx::query!(
                "DELETE FROM group_members WHERE group_id = $1 AND user_id = ANY($2)",
                id,
                &c.remove_users
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!(
                r#"INSERT INTO group_members (group_id, user_id)
                   SELECT g.id, m.user_id FROM groups g
                   JOIN organization_members m ON m.organization_id = g.organization_id
                   WHERE g.id = $1 AND m.user_id = ANY($2)
                   ON CONFLICT DO NOTHING"#,
                id,
                &c.add_users
            )
            .execute(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await?;
        self.group_by(Some(id), None).await
    }

    pub async fn delete_group(&self, id: Uuid, log: Option<&NewAuditLog>) -> Result<()> {
        timed("delete_group", async {
            let mut tx = self.pool.begin().await?;
            let deleted = sqlx::query!("DELETE FROM groups WHERE id = $1", id)
                .execute(&mut *tx)
                .await?;
            if deleted.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// A template's access list (both halves in one statement: every template read asks).
    pub async fn template_acl(&self, template: Uuid) -> Result<Acl> {
        timed("template_acl", async {
            let mut conn = self.pool.acquire().await?;
            template_acl_in(&mut conn, template).await
        })
        .await
    }

    /// Sets and removes entries of a template's access list atomically.
    pub async fn update_template_acl(
        &self,
        template: Uuid,
        users: &[AclChange],
        groups: &[AclChange],
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("update_template_acl", async {
            let mut tx = self.pool.begin().await?;
            for (user, role) in users {
                match role {
                    Some(role) => {
                        sqlx::query!(
                            r#"INSERT INTO template_user_acl (template_id, user_id, role)
                               VALUES ($1, $2, $3)
                               ON CONFLICT (template_id, user_id) DO UPDATE SET role = EXCLUDED.role"#,
                            template,
                            user,
                            role.as_str()
                        )
                        .execute(&mut *tx)
                        .await?
                    }
                    None => {
                        sqlx::query!(
                            "DELETE FROM template_user_acl WHERE template_id = $1 AND user_id = $2",
                            template,
                            user
                        )
                        .execute(&mut *tx)
                        .await?
                    }
                };
            }
            for (group, role) in groups {
                match role {
                    Some(role) => {
                        sqlx::query!(
                            r#"INSERT INTO template_group_acl (template_id, group_id, role)
                               VALUES ($1, $2, $3)
                               ON CONFLICT (template_id, group_id) DO UPDATE SET role = EXCLUDED.role"#,
                            template,
                            group,
                            role.as_str()
                        )
                        .execute(&mut *tx)
                        .await?
                    }
                    None => {
                        sqlx::query!(
                            "DELETE FROM template_group_acl WHERE template_id = $1 AND group_id = $2",
                            template,
                            group
                        )
                        .execute(&mut *tx)
                        .await?
                    }
                };
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// Sets a user's memberships in `oidc` groups from a sign-in's claim, inside the sign-in's
/// transaction: added to every named group (created first when asked), removed from every
/// `oidc` group not named. The Everyone group is never touched.
pub(crate) async fn sync_groups(
    tx: &mut sqlx::PgConnection,
    user: Uuid,
    sync: &GroupSync,
) -> Result<()> {
    let lowered: Vec<String> = sync.groups.iter().map(|g| g.to_lowercase()).collect();
    if sync.auto_create {
        sqlx::query!(
            r#"INSERT INTO groups (id, organization_id, name, source)
               SELECT gen_random_uuid(), $1, name, 'oidc' FROM unnest($2::text[]) AS name
               ON CONFLICT DO NOTHING"#,
            sync.organization_id,
            &sync.groups
        )
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query!(
        r#"DELETE FROM group_members gm USING groups g
           WHERE g.id = gm.group_id AND gm.user_id = $1 AND g.organization_id = $2
             AND g.source = 'oidc' AND NOT lower(g.name) = ANY($3)"#,
        user,
        sync.organization_id,
        &lowered
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        r#"INSERT INTO group_members (group_id, user_id)
           SELECT g.id, $1 FROM groups g
           JOIN organization_members m ON m.organization_id = g.organization_id AND m.user_id = $1
           WHERE g.organization_id = $2 AND g.id <> g.organization_id AND lower(g.name) = ANY($3)
           ON CONFLICT DO NOTHING"#,
        user,
        sync.organization_id,
        &lowered
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A template's access list.
pub(super) async fn template_acl_in(conn: &mut sqlx::PgConnection, template: Uuid) -> Result<Acl> {
    let r = sqlx::query!(
        r#"SELECT COALESCE((SELECT array_agg(user_id ORDER BY user_id) FROM template_user_acl
                            WHERE template_id = $1), '{}') AS "user_ids!: Vec<Uuid>",
                  COALESCE((SELECT array_agg(role ORDER BY user_id) FROM template_user_acl
                            WHERE template_id = $1), '{}') AS "user_roles!: Vec<String>",
                  COALESCE((SELECT array_agg(group_id ORDER BY group_id) FROM template_group_acl
                            WHERE template_id = $1), '{}') AS "group_ids!: Vec<Uuid>",
                  COALESCE((SELECT array_agg(role ORDER BY group_id) FROM template_group_acl
                            WHERE template_id = $1), '{}') AS "group_roles!: Vec<String>""#,
        template
    )
    .fetch_one(&mut *conn)
    .await?;
    let parse = |ids: Vec<Uuid>, roles: Vec<String>| {
        ids.into_iter()
            .zip(roles)
            .filter_map(|(id, role)| Some((id, role.parse().ok()?)))
            .collect()
    };
    Ok(Acl {
        users: parse(r.user_ids, r.user_roles),
        groups: parse(r.group_ids, r.group_roles),
    })
}
