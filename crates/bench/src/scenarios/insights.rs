//! P12: the insights over 90 days of usage. Seeds `users` people, each active eight hours a
//! day on the template for 90 days (the rollups the relay writes: hourly and daily rows), then
//! times each insights route sequentially as the owner: the dashboard's 90-day reports.

use std::time::{Duration, Instant};

use anyhow::ensure;
use chrono::{DurationRound, Utc};
use reqwest::Method;
use uuid::Uuid;

use crate::deploy::Deployment;

pub const DAYS: i64 = 90;
/// UTC hours of each seeded day with use.
const ACTIVE_HOURS: std::ops::Range<i32> = 9..17;

/// Seeds the users and their usage; returns how many hourly rows were written.
pub async fn seed(pool: &sqlx::PgPool, template: Uuid, users: usize) -> anyhow::Result<i64> {
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO users (id, email, username, hashed_password, login_type, created_at,
                            updated_at, last_seen_at)
         SELECT gen_random_uuid(), 'insights-' || i || '@bench.invalid', 'insights-' || i, '',
                'none', now() - interval '100 days', now(), now()
         FROM generate_series(1, $1) AS i
         RETURNING id",
    )
    .bind(i64::try_from(users)?)
    .fetch_all(pool)
    .await?;
    let mask: i32 = ACTIVE_HOURS.map(|h| 1 << h).sum();
    let hours = ACTIVE_HOURS.len() as i32;
    let hourly = sqlx::query(
        "INSERT INTO usage_hourly (hour, template_id, user_id, usage_secs, ssh_secs, vscode_secs)
         SELECT (current_date - d)::timestamp AT TIME ZONE 'UTC' + make_interval(hours => h),
                $2, u, 3000, 1200, 1800
         FROM unnest($1::uuid[]) AS u, generate_series(1, $3) AS d, generate_series($4, $5 - 1) AS h",
    )
    .bind(&ids)
    .bind(template)
    .bind(i32::try_from(DAYS)?)
    .bind(ACTIVE_HOURS.start)
    .bind(ACTIVE_HOURS.end)
    .execute(pool)
    .await?
    .rows_affected();
    sqlx::query(
        "INSERT INTO usage_daily (day, template_id, user_id, active_hours, usage_secs, ssh_secs,
                                  vscode_secs)
         SELECT current_date - d, $2, u, $4, 3000 * $5, 1200 * $5, 1800 * $5
         FROM unnest($1::uuid[]) AS u, generate_series(1, $3) AS d",
    )
    .bind(&ids)
    .bind(template)
    .bind(i32::try_from(DAYS)?)
    .bind(mask)
    .bind(hours)
    .execute(pool)
    .await?;
    sqlx::query("ANALYZE usage_hourly, usage_daily, user_status_changes")
        .execute(pool)
        .await?;
    Ok(i64::try_from(hourly)?)
}

/// The routes timed, with their labels.
pub fn routes(template: Uuid) -> Vec<(&'static str, String)> {
    let today = Utc::now()
        .duration_trunc(chrono::Duration::days(1))
        .unwrap_or_else(|_| Utc::now());
    let range = format!(
        "start_time={}&end_time={}",
        (today - chrono::Duration::days(DAYS)).format("%Y-%m-%dT%H:%M:%SZ"),
        today.format("%Y-%m-%dT%H:%M:%SZ")
    );
    vec![
        ("DAUs", "/api/v2/insights/daus?tz_offset=-5".to_string()),
        (
            "template DAUs",
            format!("/api/v2/templates/{template}/daus"),
        ),
        (
            "user activity",
            format!("/api/v2/insights/user-activity?{range}"),
        ),
        (
            "template report",
            format!("/api/v2/insights/templates?{range}&interval=day"),
        ),
        (
            "user status counts",
            "/api/v2/insights/user-status-counts".to_string(),
        ),
    ]
}

/// Times `path` `count` times in a row after `warmup` untimed requests.
pub async fn time(
    deploy: &Deployment,
    path: &str,
    warmup: usize,
    count: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(count);
    for i in 0..warmup + count {
        let request = deploy
            .owner
            .request(Method::GET, path)?
            .timeout(deploy.timeout);
        let started = Instant::now();
        let response = request.send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        let elapsed = started.elapsed();
        ensure!(
            status.is_success(),
            "{path}: {status} {}",
            String::from_utf8_lossy(&body)
        );
        if i >= warmup {
            samples.push(elapsed);
        }
    }
    Ok(samples)
}
