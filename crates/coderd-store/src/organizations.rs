//! `organizations` and `organization_members`.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{NewAuditLog, Result, Store, audit, timed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationRow {
    pub id: Uuid,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub icon: String,
    pub is_default: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    pub organization_id: Uuid,
    pub user_id: Uuid,
    pub roles: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberWithUserRow {
    pub organization_id: Uuid,
    pub user_id: Uuid,
    pub roles: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub username: String,
    pub name: String,
    pub email: String,
    pub avatar_url: String,
    pub rbac_roles: Vec<String>,
    pub status: String,
    pub login_type: String,
    pub user_created_at: DateTime<Utc>,
    pub user_updated_at: DateTime<Utc>,
}

impl Store {
    pub async fn organization_by_id(&self, id: Uuid) -> Result<OrganizationRow> {
        timed("organization_by_id", async {
            Ok(sqlx::query_as!(
                OrganizationRow,
                "SELECT * FROM organizations WHERE id = $1",
                id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn organization_by_name(&self, name: &str) -> Result<OrganizationRow> {
        timed("organization_by_name", async {
            Ok(sqlx::query_as!(
                OrganizationRow,
                "SELECT * FROM organizations WHERE lower(name) = lower($1)",
                name
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn default_organization(&self) -> Result<OrganizationRow> {
        timed("default_organization", async {
            Ok(sqlx::query_as!(
                OrganizationRow,
                "SELECT * FROM organizations WHERE is_default"
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn list_organizations(&self) -> Result<Vec<OrganizationRow>> {
        timed("list_organizations", async {
            Ok(sqlx::query_as!(
                OrganizationRow,
                "SELECT * FROM organizations ORDER BY created_at, name"
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Organizations `user` belongs to.
    pub async fn organizations_of_user(&self, user: Uuid) -> Result<Vec<OrganizationRow>> {
        timed("organizations_of_user", async {
            Ok(sqlx::query_as!(
                OrganizationRow,
                r#"SELECT o.* FROM organizations o
                   JOIN organization_members m ON m.organization_id = o.id
                   WHERE m.user_id = $1 ORDER BY o.created_at, o.name"#,
                user
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Creates an organization with its creator as organization admin.
    pub async fn create_organization(
        &self,
        org: &OrganizationRow,
        creator: Uuid,
        log: Option<&NewAuditLog>,
    ) -> Result<OrganizationRow> {
        timed("create_organization", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                OrganizationRow,
                r#"INSERT INTO organizations (id, name, display_name, description, icon, is_default, created_at, updated_at)
                   VALUES ($1, $2, $3, $4, $5, false, $6, $6) RETURNING *"#,
                org.id,
                org.name,
                org.display_name,
                org.description,
                org.icon,
                org.created_at
            )
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query!(
                r#"INSERT INTO organization_members (organization_id, user_id, roles, created_at, updated_at)
                   VALUES ($1, $2, '{organization-admin}', $3, $3)"#,
                row.id,
                creator,
                row.created_at
            )
            .execute(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// Every membership of `user`, for building its authorization subject.
    pub async fn memberships_of_user(&self, user: Uuid) -> Result<Vec<MemberRow>> {
        timed("memberships_of_user", async {
            Ok(sqlx::query_as!(
                MemberRow,
                "SELECT organization_id, user_id, roles, created_at, updated_at FROM organization_members WHERE user_id = $1",
                user
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn organization_members(&self, org: Uuid) -> Result<Vec<MemberWithUserRow>> {
        timed("organization_members", async {
            Ok(sqlx::query_as!(
                MemberWithUserRow,
                r#"SELECT m.organization_id, m.user_id, m.roles, m.created_at, m.updated_at,
                          u.username, u.name, u.email, u.avatar_url, u.rbac_roles,
                          u.status, u.login_type, u.created_at AS user_created_at,
                          u.updated_at AS user_updated_at
                   FROM organization_members m JOIN users u ON u.id = m.user_id
                   WHERE m.organization_id = $1 AND NOT u.deleted
                   ORDER BY lower(u.username)"#,
                org
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn add_organization_member(
        &self,
        org: Uuid,
        user: Uuid,
        log: Option<&NewAuditLog>,
    ) -> Result<MemberRow> {
        timed("add_organization_member", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                MemberRow,
                r#"INSERT INTO organization_members (organization_id, user_id, roles, created_at, updated_at)
                   VALUES ($1, $2, '{}', now(), now())
                   RETURNING organization_id, user_id, roles, created_at, updated_at"#,
                org,
                user
            )
            .fetch_one(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    pub async fn remove_organization_member(
        &self,
        org: Uuid,
        user: Uuid,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("remove_organization_member", async {
            let mut tx = self.pool.begin().await?;
            let deleted = sqlx::query!(
                "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2",
                org,
                user
            )
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

    pub async fn update_member_roles(
        &self,
        org: Uuid,
        user: Uuid,
        roles: &[String],
        log: Option<&NewAuditLog>,
    ) -> Result<MemberRow> {
        timed("update_member_roles", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                MemberRow,
                r#"UPDATE organization_members SET roles = $3, updated_at = now()
                   WHERE organization_id = $1 AND user_id = $2
                   RETURNING organization_id, user_id, roles, created_at, updated_at"#,
                org,
                user,
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
}
