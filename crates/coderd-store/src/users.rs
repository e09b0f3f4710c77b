//! `users`: accounts, their site roles and status.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{NewAuditLog, OrganizationRow, Result, Store, audit, timed};
use coderd_authz::Filter;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub id: Uuid,
    pub email: String,
    pub username: String,
    pub name: String,
    pub hashed_password: String,
    pub status: String,
    pub rbac_roles: Vec<String>,
    pub login_type: String,
    pub avatar_url: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub deleted: bool,
}

#[derive(Debug, Clone)]
pub struct NewUser {
    pub id: Uuid,
    pub email: String,
    pub username: String,
    pub name: String,
    pub hashed_password: String,
    pub status: String,
    pub rbac_roles: Vec<String>,
    pub login_type: String,
    /// Organizations joined at creation, without organization roles.
    pub organization_ids: Vec<Uuid>,
}

/// A search over users (`GET /users?q=...`), already parsed.
#[derive(Debug, Clone, Default)]
pub struct UserQuery {
    /// Matched as a substring of username or email, case-insensitively.
    pub search: String,
    pub statuses: Vec<String>,
    pub roles: Vec<String>,
    pub after_id: Option<Uuid>,
    pub limit: i64,
    pub offset: i64,
}

/// Escapes LIKE wildcards so a search for `a_b` means exactly that.
fn like_pattern(s: &str) -> String {
    let escaped = s
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

impl Store {
    pub async fn user_by_id(&self, id: Uuid) -> Result<UserRow> {
        timed("user_by_id", async {
            Ok(sqlx::query_as!(
                UserRow,
                "SELECT * FROM users WHERE id = $1 AND NOT deleted",
                id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn user_by_username(&self, username: &str) -> Result<UserRow> {
        timed("user_by_username", async {
            Ok(sqlx::query_as!(
                UserRow,
                "SELECT * FROM users WHERE lower(username) = lower($1) AND NOT deleted",
                username
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn user_by_email(&self, email: &str) -> Result<UserRow> {
        timed("user_by_email", async {
            Ok(sqlx::query_as!(
                UserRow,
                "SELECT * FROM users WHERE lower(email) = lower($1) AND NOT deleted",
                email
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn has_any_user(&self) -> Result<bool> {
        timed("has_any_user", async {
            let exists = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM users) AS "exists!""#)
                .fetch_one(&self.pool)
                .await?;
            Ok(exists)
        })
        .await
    }

    /// Creates the deployment's first user as Owner together with the default organization,
    /// atomically. Returns `None` when a user already exists: concurrent callers are serialised
    /// by an advisory lock, so exactly one of them wins.
    pub async fn create_first_user(
        &self,
        user: NewUser,
        org_name: &str,
    ) -> Result<Option<(UserRow, OrganizationRow)>> {
        timed("create_first_user", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('coderd.first_user'))")
                .execute(&mut *tx)
                .await?;
            let exists = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM users) AS "e!""#)
                .fetch_one(&mut *tx)
                .await?;
            if exists {
                return Ok(None);
            }
            let now = Utc::now();
            let org = sqlx::query_as!(
                OrganizationRow,
                r#"INSERT INTO organizations (id, name, display_name, is_default, created_at, updated_at)
                   VALUES ($1, $2, $3, true, $4, $4)
                   RETURNING *"#,
                Uuid::new_v4(),
                org_name,
                org_name,
                now
            )
            .fetch_one(&mut *tx)
            .await?;
            let user = NewUser {
                organization_ids: vec![org.id],
                ..user
            };
            let row = insert_user(&mut tx, &user, now).await?;
            tx.commit().await?;
            Ok(Some((row, org)))
        })
        .await
    }

    /// Creates a user and its memberships in one transaction.
    pub async fn create_user(&self, user: NewUser, log: Option<&NewAuditLog>) -> Result<UserRow> {
        timed("create_user", async {
            let mut tx = self.pool.begin().await?;
            let row = insert_user(&mut tx, &user, Utc::now()).await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// One page of the users `filter` lets the caller see, plus how many match in all.
    pub async fn list_users(&self, q: &UserQuery, filter: &Filter) -> Result<(Vec<UserRow>, i64)> {
        timed("list_users", async {
            let pattern = like_pattern(&q.search);
            let rows = sqlx::query!(
                r#"SELECT u.*, COUNT(*) OVER () AS "total!"
                   FROM users u
                   WHERE NOT u.deleted
                     AND ($1::bool OR u.id = $2)
                     AND ($3 = '%%' OR u.username ILIKE $3 OR u.email ILIKE $3)
                     AND (cardinality($4::text[]) = 0 OR u.status = ANY($4))
                     AND (cardinality($5::text[]) = 0 OR u.rbac_roles && $5)
                     AND ($6::uuid IS NULL OR lower(u.username) > (SELECT lower(username) FROM users WHERE id = $6))
                   ORDER BY lower(u.username)
                   LIMIT $7 OFFSET $8"#,
                filter.all,
                filter.owner,
                pattern,
                &q.statuses,
                &q.roles,
                q.after_id,
                q.limit,
                q.offset,
            )
            .fetch_all(&self.pool)
            .await?;
            let total = rows.first().map_or(0, |r| r.total);
            let users = rows
                .into_iter()
                .map(|r| UserRow {
                    id: r.id,
                    email: r.email,
                    username: r.username,
                    name: r.name,
                    hashed_password: r.hashed_password,
                    status: r.status,
                    rbac_roles: r.rbac_roles,
                    login_type: r.login_type,
                    avatar_url: r.avatar_url,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                    last_seen_at: r.last_seen_at,
                    deleted: r.deleted,
                })
                .collect();
            Ok((users, total))
        })
        .await
    }

    /// Organizations each of `users` belongs to.
    pub async fn organization_ids_of(
        &self,
        users: &[Uuid],
    ) -> Result<std::collections::HashMap<Uuid, Vec<Uuid>>> {
        timed("organization_ids_of", async {
            let rows = sqlx::query!(
                r#"SELECT user_id, array_agg(organization_id ORDER BY created_at) AS "orgs!"
                   FROM organization_members WHERE user_id = ANY($1) GROUP BY user_id"#,
                users
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows.into_iter().map(|r| (r.user_id, r.orgs)).collect())
        })
        .await
    }

    /// Changes a user's status. Suspension takes effect on the user's very next request: every
    /// request re-reads the status with the API key.
    pub async fn update_user_status(
        &self,
        id: Uuid,
        status: &str,
        log: Option<&NewAuditLog>,
    ) -> Result<UserRow> {
        timed("update_user_status", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                UserRow,
                "UPDATE users SET status = $2, updated_at = now() WHERE id = $1 AND NOT deleted RETURNING *",
                id,
                status
            )
            .fetch_one(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    pub async fn update_user_roles(
        &self,
        id: Uuid,
        roles: &[String],
        log: Option<&NewAuditLog>,
    ) -> Result<UserRow> {
        timed("update_user_roles", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                UserRow,
                "UPDATE users SET rbac_roles = $2, updated_at = now() WHERE id = $1 AND NOT deleted RETURNING *",
                id,
                roles
            )
            .fetch_one(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// Replaces the password and ends the user's other sessions (all but `keep_key`).
    pub async fn update_user_password(
        &self,
        id: Uuid,
        hashed_password: &str,
        keep_key: &str,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("update_user_password", async {
            let mut tx = self.pool.begin().await?;
            let updated = sqlx::query!(
                "UPDATE users SET hashed_password = $2, updated_at = now() WHERE id = $1 AND NOT deleted",
                id,
                hashed_password
            )
            .execute(&mut *tx)
            .await?;
            if updated.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            sqlx::query!(
                "DELETE FROM api_keys WHERE user_id = $1 AND login_type = 'password' AND id <> $2",
                id,
                keep_key
            )
            .execute(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Marks the user deleted (its rows stay for history) and revokes all its keys.
    /// Soft-deletes a user with their keys and memberships, unless they still own a workspace.
    /// The user's row is locked first (a conflicting lock with the key-share lock a concurrent
    /// workspace insert holds on it), so a workspace created meanwhile is seen.
    pub async fn delete_user(&self, id: Uuid, log: Option<&NewAuditLog>) -> Result<UserDeletion> {
        timed("delete_user", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query_scalar!(
                "SELECT id FROM users WHERE id = $1 AND NOT deleted FOR UPDATE",
                id
            )
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(super::Error::NotFound)?;
            let owns_workspaces = sqlx::query_scalar!(
                r#"SELECT EXISTS (SELECT 1 FROM workspaces WHERE owner_id = $1 AND NOT deleted)
                   AS "exists!""#,
                id
            )
            .fetch_one(&mut *tx)
            .await?;
            if owns_workspaces {
                return Ok(UserDeletion::OwnsWorkspaces);
            }
            sqlx::query!(
                "UPDATE users SET deleted = true, updated_at = now() WHERE id = $1",
                id
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!("DELETE FROM api_keys WHERE user_id = $1", id)
                .execute(&mut *tx)
                .await?;
            sqlx::query!("DELETE FROM organization_members WHERE user_id = $1", id)
                .execute(&mut *tx)
                .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(UserDeletion::Deleted)
        })
        .await
    }
}

/// What [`Store::delete_user`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserDeletion {
    Deleted,
    /// Nothing: the user still owns workspaces, which must be deleted first.
    OwnsWorkspaces,
}

pub(super) async fn insert_user(
    tx: &mut sqlx::PgConnection,
    user: &NewUser,
    now: DateTime<Utc>,
) -> Result<UserRow> {
    let row = sqlx::query_as!(
        UserRow,
        r#"INSERT INTO users (id, email, username, name, hashed_password, status, rbac_roles,
                              login_type, created_at, updated_at, last_seen_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $9)
           RETURNING *"#,
        user.id,
        user.email,
        user.username,
        user.name,
        user.hashed_password,
        user.status,
        &user.rbac_roles,
        user.login_type,
        now
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query!(
        r#"INSERT INTO organization_members (organization_id, user_id, roles, created_at, updated_at)
           SELECT org, $1, '{}', $2, $2 FROM unnest($3::uuid[]) AS org"#,
        user.id,
        now,
        &user.organization_ids
    )
    .execute(&mut *tx)
    .await?;
    Ok(row)
}
