//! Usage rollups (`usage_hourly`, `usage_daily`): written as the relay records use, read by
//! the insights. A report's range is summed from whole UTC days in the daily table and its
//! partial edges from the hourly one, so a 90-day report reads about 90 rows per user, not
//! thousands.

use chrono::{DateTime, Duration, DurationRound, NaiveDate, Timelike, Utc};
use uuid::Uuid;

use super::{Result, Store, timed};

/// The most a bucket can hold: an hour of an hour.
const HOUR_SECS: i32 = 3600;

/// How a workspace was used during one flush interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageKinds {
    pub ssh: bool,
    pub reconnecting_pty: bool,
    pub vscode: bool,
    pub jetbrains: bool,
    pub app: bool,
}

/// Seconds of use by kind, summed over a range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageSecs {
    pub usage: i64,
    pub ssh: i64,
    pub reconnecting_pty: i64,
    pub vscode: i64,
    pub jetbrains: i64,
    pub app: i64,
}

/// One user's use over a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserActivityRow {
    pub user_id: Uuid,
    pub username: String,
    pub avatar_url: String,
    pub template_ids: Vec<Uuid>,
    pub seconds: i64,
}

/// How a template parameter's values were used over a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterUsageRow {
    pub template_ids: Vec<Uuid>,
    pub name: String,
    pub display_name: String,
    pub kind: String,
    pub description: String,
    /// Each value and how many builds gave it.
    pub values: Vec<(String, i64)>,
}

/// A range split into whole UTC days (from the daily table) and edge hours (from the hourly).
#[derive(Debug, Clone, Copy)]
struct Split {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    /// Whole days `[first_day, end_day)`; empty when none fits.
    first_day: NaiveDate,
    end_day: NaiveDate,
}

fn split(start: DateTime<Utc>, end: DateTime<Utc>) -> Split {
    let day = Duration::days(1);
    let first = start.duration_trunc(day).unwrap_or(start);
    let first = if first < start { first + day } else { first };
    let last = end.duration_trunc(day).unwrap_or(end);
    if first >= last {
        // No whole day inside: everything comes from the hourly table.
        let never = start.date_naive();
        return Split {
            start,
            end,
            first_day: never,
            end_day: never,
        };
    }
    Split {
        start,
        end,
        first_day: first.date_naive(),
        end_day: last.date_naive(),
    }
}

impl Split {
    /// The hours outside the whole days: `[start, a)` and `[b, end)`.
    fn edges(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        if self.first_day == self.end_day {
            return (self.end, self.end);
        }
        (
            self.first_day
                .and_hms_opt(0, 0, 0)
                .unwrap_or_default()
                .and_utc(),
            self.end_day
                .and_hms_opt(0, 0, 0)
                .unwrap_or_default()
                .and_utc(),
        )
    }
}

impl Store {
    /// Credits `secs` of use at `now` to the owners and templates of `used` workspaces (a
    /// user with several workspaces of one template is credited once), capped per hour.
    pub async fn record_usage(
        &self,
        now: DateTime<Utc>,
        secs: i32,
        used: &[(Uuid, UsageKinds)],
    ) -> Result<()> {
        if used.is_empty() {
            return Ok(());
        }
        timed("record_usage", async {
            let hour = now.duration_trunc(Duration::hours(1)).unwrap_or(now);
            let bit = 1i32 << now.hour();
            let ids: Vec<Uuid> = used.iter().map(|(w, _)| *w).collect();
            let column = |pick: fn(&UsageKinds) -> bool| -> Vec<bool> {
                used.iter().map(|(_, k)| pick(k)).collect()
            };
            sqlx::query!(
                r#"WITH used AS (
                       SELECT w.owner_id AS user_id, w.template_id,
                              bool_or(u.ssh) AS ssh, bool_or(u.pty) AS pty,
                              bool_or(u.vscode) AS vscode, bool_or(u.jetbrains) AS jetbrains,
                              bool_or(u.app) AS app
                       FROM unnest($4::uuid[], $5::bool[], $6::bool[], $7::bool[], $8::bool[], $9::bool[])
                            AS u(workspace_id, ssh, pty, vscode, jetbrains, app)
                       JOIN workspaces w ON w.id = u.workspace_id
                       GROUP BY w.owner_id, w.template_id
                   ),
                   delta AS (
                       SELECT u.user_id, u.template_id,
                              greatest(least($2, $10 - coalesce(h.usage_secs, 0)), 0) AS usage,
                              CASE WHEN u.ssh THEN greatest(least($2, $10 - coalesce(h.ssh_secs, 0)), 0) ELSE 0 END AS ssh,
                              CASE WHEN u.pty THEN greatest(least($2, $10 - coalesce(h.reconnecting_pty_secs, 0)), 0) ELSE 0 END AS pty,
                              CASE WHEN u.vscode THEN greatest(least($2, $10 - coalesce(h.vscode_secs, 0)), 0) ELSE 0 END AS vscode,
                              CASE WHEN u.jetbrains THEN greatest(least($2, $10 - coalesce(h.jetbrains_secs, 0)), 0) ELSE 0 END AS jetbrains,
                              CASE WHEN u.app THEN greatest(least($2, $10 - coalesce(h.app_secs, 0)), 0) ELSE 0 END AS app
                       FROM used u
                       LEFT JOIN usage_hourly h
                         ON h.hour = $1 AND h.template_id = u.template_id AND h.user_id = u.user_id
                   ),
                   hourly AS (
                       INSERT INTO usage_hourly AS h (hour, template_id, user_id, usage_secs, ssh_secs,
                              reconnecting_pty_secs, vscode_secs, jetbrains_secs, app_secs)
                       SELECT $1, template_id, user_id, usage, ssh, pty, vscode, jetbrains, app FROM delta
                       ON CONFLICT (hour, template_id, user_id) DO UPDATE SET
                           usage_secs = least(h.usage_secs + EXCLUDED.usage_secs, $10),
                           ssh_secs = least(h.ssh_secs + EXCLUDED.ssh_secs, $10),
                           reconnecting_pty_secs = least(h.reconnecting_pty_secs + EXCLUDED.reconnecting_pty_secs, $10),
                           vscode_secs = least(h.vscode_secs + EXCLUDED.vscode_secs, $10),
                           jetbrains_secs = least(h.jetbrains_secs + EXCLUDED.jetbrains_secs, $10),
                           app_secs = least(h.app_secs + EXCLUDED.app_secs, $10)
                   )
                   INSERT INTO usage_daily AS d (day, template_id, user_id, active_hours, usage_secs,
                          ssh_secs, reconnecting_pty_secs, vscode_secs, jetbrains_secs, app_secs)
                   SELECT ($1 AT TIME ZONE 'UTC')::date, template_id, user_id, $3, usage, ssh, pty,
                          vscode, jetbrains, app
                   FROM delta
                   ON CONFLICT (day, template_id, user_id) DO UPDATE SET
                       active_hours = d.active_hours | EXCLUDED.active_hours,
                       usage_secs = d.usage_secs + EXCLUDED.usage_secs,
                       ssh_secs = d.ssh_secs + EXCLUDED.ssh_secs,
                       reconnecting_pty_secs = d.reconnecting_pty_secs + EXCLUDED.reconnecting_pty_secs,
                       vscode_secs = d.vscode_secs + EXCLUDED.vscode_secs,
                       jetbrains_secs = d.jetbrains_secs + EXCLUDED.jetbrains_secs,
                       app_secs = d.app_secs + EXCLUDED.app_secs"#,
                hour,
                secs,
                bit,
                &ids,
                &column(|k| k.ssh),
                &column(|k| k.reconnecting_pty),
                &column(|k| k.vscode),
                &column(|k| k.jetbrains),
                &column(|k| k.app),
                HOUR_SECS
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// Distinct active users per bucket of `days` local days from `from` to `to` (inclusive),
    /// for a zone `offset_hours` from UTC; each bucket named by its first day. The daily
    /// rows' hour masks tell which local days each UTC day touched.
    pub async fn active_users_by_bucket(
        &self,
        from: NaiveDate,
        to: NaiveDate,
        offset_hours: i32,
        days: i64,
        templates: &[Uuid],
    ) -> Result<Vec<(NaiveDate, i64)>> {
        let (previous, same, next) = local_day_masks(offset_hours);
        let days = i32::try_from(days.max(1)).unwrap_or(1);
        timed("active_users_by_bucket", async {
            let rows = sqlx::query!(
                r#"SELECT ($1::date + ((d.day + s.shift - $1::date) / $7) * $7) AS "day!",
                          count(DISTINCT d.user_id) AS "users!"
                   FROM usage_daily d
                   CROSS JOIN (VALUES (-1, $4::integer), (0, $5::integer), (1, $6::integer)) AS s(shift, mask)
                   WHERE d.day BETWEEN $1::date - 1 AND $2::date + 1
                     AND d.active_hours & s.mask <> 0
                     AND (cardinality($3::uuid[]) = 0 OR d.template_id = ANY($3))
                     AND d.day + s.shift BETWEEN $1 AND $2
                   GROUP BY 1 ORDER BY 1"#,
                from,
                to,
                templates,
                previous,
                same,
                next,
                days
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows.into_iter().map(|r| (r.day, r.users)).collect())
        })
        .await
    }

    /// Each user's seconds of use in `[start, end)` (hour-aligned), with the templates used.
    pub async fn user_activity(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        templates: &[Uuid],
    ) -> Result<Vec<UserActivityRow>> {
        let s = split(start, end);
        let (a, b) = s.edges();
        timed("user_activity", async {
            let rows = sqlx::query!(
                // Each edge is its own range scan (an OR of two ranges would scan every hour),
                // and users' templates are grouped before they are listed.
                r#"SELECT x.user_id AS "user_id!", u.username, u.avatar_url,
                          sum(x.secs)::bigint AS "seconds!",
                          array_agg(x.template_id ORDER BY x.template_id) AS "template_ids!"
                   FROM (
                       SELECT user_id, template_id, sum(secs) AS secs
                       FROM (
                           SELECT user_id, template_id, usage_secs AS secs FROM usage_daily
                           WHERE day >= $3 AND day < $4
                             AND (cardinality($7::uuid[]) = 0 OR template_id = ANY($7))
                           UNION ALL
                           SELECT user_id, template_id, usage_secs FROM usage_hourly
                           WHERE hour >= $1 AND hour < $5
                             AND (cardinality($7::uuid[]) = 0 OR template_id = ANY($7))
                           UNION ALL
                           SELECT user_id, template_id, usage_secs FROM usage_hourly
                           WHERE hour >= $6 AND hour < $2
                             AND (cardinality($7::uuid[]) = 0 OR template_id = ANY($7))
                       ) y
                       GROUP BY user_id, template_id
                       HAVING sum(secs) > 0
                   ) x
                   JOIN users u ON u.id = x.user_id
                   GROUP BY x.user_id, u.username, u.avatar_url
                   ORDER BY u.username"#,
                s.start,
                s.end,
                s.first_day,
                s.end_day,
                a,
                b,
                templates
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|r| UserActivityRow {
                    user_id: r.user_id,
                    username: r.username,
                    avatar_url: r.avatar_url,
                    template_ids: r.template_ids,
                    seconds: r.seconds,
                })
                .collect())
        })
        .await
    }

    /// Distinct users and seconds by kind in `[start, end)` (hour-aligned).
    pub async fn template_usage(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        templates: &[Uuid],
    ) -> Result<(i64, UsageSecs)> {
        let s = split(start, end);
        let (a, b) = s.edges();
        timed("template_usage", async {
            let r = sqlx::query!(
                // Per user first (a hash aggregate), then the totals: count(DISTINCT) would
                // sort every row.
                r#"SELECT count(*) AS "users!",
                          coalesce(sum(usage), 0)::bigint AS "usage!",
                          coalesce(sum(ssh), 0)::bigint AS "ssh!",
                          coalesce(sum(pty), 0)::bigint AS "pty!",
                          coalesce(sum(vscode), 0)::bigint AS "vscode!",
                          coalesce(sum(jetbrains), 0)::bigint AS "jetbrains!",
                          coalesce(sum(app), 0)::bigint AS "app!"
                   FROM (
                       SELECT user_id, sum(usage) AS usage, sum(ssh) AS ssh, sum(pty) AS pty,
                              sum(vscode) AS vscode, sum(jetbrains) AS jetbrains, sum(app) AS app
                       FROM (
                           SELECT user_id, usage_secs AS usage, ssh_secs AS ssh,
                                  reconnecting_pty_secs AS pty, vscode_secs AS vscode,
                                  jetbrains_secs AS jetbrains, app_secs AS app
                           FROM usage_daily
                           WHERE day >= $3 AND day < $4
                             AND (cardinality($7::uuid[]) = 0 OR template_id = ANY($7))
                           UNION ALL
                           SELECT user_id, usage_secs, ssh_secs, reconnecting_pty_secs,
                                  vscode_secs, jetbrains_secs, app_secs
                           FROM usage_hourly
                           WHERE hour >= $1 AND hour < $5
                             AND (cardinality($7::uuid[]) = 0 OR template_id = ANY($7))
                           UNION ALL
                           SELECT user_id, usage_secs, ssh_secs, reconnecting_pty_secs,
                                  vscode_secs, jetbrains_secs, app_secs
                           FROM usage_hourly
                           WHERE hour >= $6 AND hour < $2
                             AND (cardinality($7::uuid[]) = 0 OR template_id = ANY($7))
                       ) y
                       GROUP BY user_id
                   ) x
                   WHERE usage > 0"#,
                s.start,
                s.end,
                s.first_day,
                s.end_day,
                a,
                b,
                templates
            )
            .fetch_one(&self.pool)
            .await?;
            Ok((
                r.users,
                UsageSecs {
                    usage: r.usage,
                    ssh: r.ssh,
                    reconnecting_pty: r.pty,
                    vscode: r.vscode,
                    jetbrains: r.jetbrains,
                    app: r.app,
                },
            ))
        })
        .await
    }

    /// The values given to the parameters of `templates`' versions by builds started in
    /// `[start, end)`, counted per value, with each parameter as its template's newest version
    /// describes it.
    pub async fn parameter_usage(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        templates: &[Uuid],
    ) -> Result<Vec<ParameterUsageRow>> {
        timed("parameter_usage", async {
            let rows = sqlx::query!(
                r#"WITH used AS (
                       SELECT v.template_id, p.name, p.value, count(*) AS uses
                       FROM workspace_builds b
                       JOIN workspace_build_parameters p ON p.workspace_build_id = b.id
                       JOIN template_versions v ON v.id = b.template_version_id
                       WHERE b.created_at >= $1 AND b.created_at < $2 AND b.transition = 'start'
                         AND (cardinality($3::uuid[]) = 0 OR v.template_id = ANY($3))
                       GROUP BY v.template_id, p.name, p.value
                   ),
                   described AS (
                       SELECT DISTINCT ON (t.id, d->>'name') t.id AS template_id, d->>'name' AS name,
                              coalesce(d->>'display_name', '') AS display_name,
                              coalesce(d->>'type', '') AS kind,
                              coalesce(d->>'description', '') AS description
                       FROM templates t
                       JOIN template_versions v ON v.id = t.active_version_id
                       CROSS JOIN LATERAL jsonb_array_elements(v.rich_parameters) d
                       WHERE (cardinality($3::uuid[]) = 0 OR t.id = ANY($3))
                   )
                   SELECT u.name AS "name!", coalesce(d.display_name, '') AS "display_name!",
                          coalesce(d.kind, '') AS "kind!", coalesce(d.description, '') AS "description!",
                          array_agg(DISTINCT u.template_id) AS "template_ids!",
                          array_agg(u.value ORDER BY u.value) AS "values!",
                          array_agg(u.uses ORDER BY u.value) AS "counts!"
                   FROM used u
                   LEFT JOIN described d ON d.template_id = u.template_id AND d.name = u.name
                   GROUP BY u.name, d.display_name, d.kind, d.description
                   ORDER BY u.name"#,
                start,
                end,
                templates
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|r| {
                    // Several templates may give one value: their counts add up.
                    let mut values: Vec<(String, i64)> = Vec::new();
                    for (value, count) in r.values.into_iter().zip(r.counts) {
                        match values.last_mut() {
                            Some((last, total)) if *last == value => *total += count,
                            _ => values.push((value, count)),
                        }
                    }
                    ParameterUsageRow {
                        template_ids: r.template_ids,
                        name: r.name,
                        display_name: r.display_name,
                        kind: r.kind,
                        description: r.description,
                        values,
                    }
                })
                .collect())
        })
        .await
    }

    /// How many users were in each status at the end of each local day `[from, to]`, from
    /// the recorded status changes (a user counts from their first change on).
    pub async fn user_status_counts(
        &self,
        from: NaiveDate,
        to: NaiveDate,
        offset_hours: i32,
    ) -> Result<Vec<(NaiveDate, String, i64)>> {
        timed("user_status_counts", async {
            let rows = sqlx::query!(
                r#"SELECT d.day::date AS "day!", c.new_status AS "status!", count(*) AS "count!"
                   FROM generate_series($1::date, $2::date, interval '1 day') AS d(day)
                   CROSS JOIN LATERAL (
                       SELECT DISTINCT ON (user_id) user_id, new_status
                       FROM user_status_changes
                       WHERE changed_at < (d.day + interval '1 day') - make_interval(hours => $3)
                       ORDER BY user_id, changed_at DESC
                   ) c
                   WHERE c.new_status <> 'deleted'
                   GROUP BY 1, 2 ORDER BY 1, 2"#,
                from,
                to,
                offset_hours
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|r| (r.day, r.status, r.count))
                .collect())
        })
        .await
    }
}

/// For a zone `offset` hours from UTC, the masks of a UTC day's hours that fall on the local
/// day before, the same local day, and the local day after.
fn local_day_masks(offset: i32) -> (i32, i32, i32) {
    let (mut previous, mut same, mut next) = (0, 0, 0);
    for hour in 0..24 {
        let local = hour + offset;
        let bit = 1 << hour;
        if local < 0 {
            previous |= bit;
        } else if local < 24 {
            same |= bit;
        } else {
            next |= bit;
        }
    }
    (previous, same, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_utc_day_splits_across_local_days_by_offset() {
        assert_eq!(local_day_masks(0), (0, 0x00FF_FFFF, 0));
        // UTC-5: hours 0..4 UTC are the evening before.
        assert_eq!(local_day_masks(-5), (0b11111, 0x00FF_FFE0, 0));
        // UTC+2: hours 22 and 23 UTC are already the next day.
        assert_eq!(local_day_masks(2), (0, 0x003F_FFFF, 0x00C0_0000));
    }

    #[test]
    fn ranges_split_into_whole_days_and_edge_hours() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().expect("time");
        let s = split(at("2026-01-01T05:00:00Z"), at("2026-01-04T03:00:00Z"));
        assert_eq!(s.first_day.to_string(), "2026-01-02");
        assert_eq!(s.end_day.to_string(), "2026-01-04");
        assert_eq!(
            s.edges(),
            (at("2026-01-02T00:00:00Z"), at("2026-01-04T00:00:00Z"))
        );
        let short = split(at("2026-01-01T05:00:00Z"), at("2026-01-01T09:00:00Z"));
        assert_eq!(short.first_day, short.end_day, "no whole day");
        assert_eq!(short.edges().0, at("2026-01-01T09:00:00Z"));
    }
}
