//! Insights, as Coder's `/insights/*` report them: daily active users, each user's time in
//! workspaces, templates' use by app and parameter, and users by status over time. All read
//! the usage rollups the relay writes (`coderd_store::usage_rollups`), never raw events.
//!
//! Who may see them: the deployment's DAUs and status counts, those who may read the
//! deployment's configuration (or every user); a template's, those who may change it (Coder's
//! "view insights"); a report over all templates, those who may change every template.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, FixedOffset, NaiveDate, Offset, Timelike, Utc};
use codersdk::ValidationError;
use codersdk::insights::{
    DAUEntry, DAUsResponse, GetUserStatusCountsResponse, TemplateAppUsage,
    TemplateInsightsIntervalReport, TemplateInsightsReport, TemplateInsightsResponse,
    TemplateParameterUsage, UserActivity, UserActivityInsightsReport, UserActivityInsightsResponse,
    UserLatencyInsightsReport, UserLatencyInsightsResponse, UserStatusChangeCount,
};
use uuid::Uuid;

use super::{Error, Result, resolve};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};

/// How far back the DAU charts reach, as Coder's do.
const DAU_DAYS: i64 = 60;

/// A report's range, in the zone its bounds were given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub start: DateTime<FixedOffset>,
    pub end: DateTime<FixedOffset>,
}

/// The interval of a template report's interval reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Day,
    Week,
}

impl Interval {
    fn days(self) -> i64 {
        match self {
            Self::Day => 1,
            Self::Week => 7,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
        }
    }
}

fn invalid(field: &str, detail: impl Into<String>) -> Error {
    Error::Validation(vec![ValidationError {
        field: field.into(),
        detail: detail.into(),
    }])
}

/// Checks a report's range by Coder's rules: both bounds RFC 3339 and not in the future, the
/// start at midnight, the end at midnight (or on the hour, today), the end after the start.
pub fn parse_range(start: &str, end: &str, now: DateTime<Utc>) -> Result<Range> {
    let latest = now.duration_trunc(Duration::hours(1)).unwrap_or(now) + Duration::hours(1);
    let parse = |field: &str, raw: &str| -> Result<DateTime<FixedOffset>> {
        if raw.is_empty() {
            return Err(invalid(field, "is required"));
        }
        let at = DateTime::parse_from_rfc3339(raw)
            .map_err(|e| invalid(field, format!("must be an RFC 3339 time: {e}")))?;
        if at.with_timezone(&Utc) > latest {
            return Err(invalid(field, "must not be in the future"));
        }
        Ok(at)
    };
    let start = parse("start_time", start)?;
    let end = parse("end_time", end)?;
    let midnight = |t: &DateTime<FixedOffset>| {
        t.hour() == 0 && t.minute() == 0 && t.second() == 0 && t.nanosecond() == 0
    };
    if !midnight(&start) {
        return Err(invalid("start_time", "must have the clock set to 00:00:00"));
    }
    let today = now.with_timezone(end.offset()).date_naive();
    let on_the_hour = end.minute() == 0 && end.second() == 0 && end.nanosecond() == 0;
    if !(midnight(&end) || (end.date_naive() == today && on_the_hour)) {
        return Err(invalid(
            "end_time",
            "must have the clock set to 00:00:00, or to a whole hour today",
        ));
    }
    if end <= start {
        return Err(invalid("end_time", "must be after start_time"));
    }
    Ok(Range { start, end })
}

pub fn parse_interval(raw: &str, range: &Range) -> Result<Option<Interval>> {
    let interval = match raw {
        "" => return Ok(None),
        "day" => Interval::Day,
        "week" => Interval::Week,
        other => {
            return Err(invalid(
                "interval",
                format!("must be one of \"day\", \"week\", not {other:?}"),
            ));
        }
    };
    if interval == Interval::Week {
        let days = (range.end - range.start).num_days();
        if days % 7 != 0 && days % 7 < 6 {
            return Err(invalid(
                "end_time",
                "the last weekly interval must have at least 6 days",
            ));
        }
    }
    Ok(Some(interval))
}

/// Whole hours of a zone's offset (Coder's `tz_offset`); half-hour zones round toward UTC.
fn offset_hours(offset: &FixedOffset) -> i32 {
    offset.local_minus_utc() / 3600
}

/// Refuses unless the subject may view the insights of each of `templates` (or, when none
/// are named, of every template).
async fn authorize_templates(
    state: &AppState,
    subject: &Subject,
    templates: &[Uuid],
) -> Result<()> {
    if templates.is_empty() {
        authz::authorize(subject, Action::Update, &Object::site(Resource::Template))?;
        return Ok(());
    }
    for id in templates {
        let row = resolve::template(state, subject, *id).await?;
        let guard = resolve::template_guard(state, row.id, row.organization_id).await?;
        authz::authorize(subject, Action::Update, &guard)?;
    }
    Ok(())
}

fn dau_entries(rows: Vec<(NaiveDate, i64)>) -> Vec<DAUEntry> {
    rows.into_iter()
        .map(|(day, amount)| DAUEntry {
            date: day.format("%Y-%m-%d").to_string(),
            amount,
        })
        .collect()
}

/// Daily active users of the last 60 days in a zone `tz_offset` hours from UTC, over every
/// template or one.
pub async fn daus(
    state: &AppState,
    subject: &Subject,
    tz_offset: i32,
    template: Option<Uuid>,
) -> Result<DAUsResponse> {
    if !(-12..=14).contains(&tz_offset) {
        return Err(invalid("tz_offset", "must be between -12 and 14"));
    }
    let templates: Vec<Uuid> = template.into_iter().collect();
    match template {
        Some(_) => authorize_templates(state, subject, &templates).await?,
        None => authz::authorize(
            subject,
            Action::Read,
            &Object::site(Resource::DeploymentConfig),
        )?,
    }
    let today = (Utc::now() + Duration::hours(i64::from(tz_offset))).date_naive();
    let from = today - Duration::days(DAU_DAYS - 1);
    let rows = state
        .store
        .active_users_by_bucket(from, today, tz_offset, 1, &templates)
        .await?;
    Ok(DAUsResponse {
        entries: dau_entries(rows),
        tz_hour_offset: tz_offset,
    })
}

pub async fn user_activity(
    state: &AppState,
    subject: &Subject,
    range: Range,
    templates: Vec<Uuid>,
) -> Result<UserActivityInsightsResponse> {
    authorize_templates(state, subject, &templates).await?;
    let rows = state
        .store
        .user_activity(range.start.to_utc(), range.end.to_utc(), &templates)
        .await?;
    Ok(UserActivityInsightsResponse {
        report: UserActivityInsightsReport {
            start_time: range.start,
            end_time: range.end,
            template_ids: templates,
            users: rows
                .into_iter()
                .map(|r| UserActivity {
                    template_ids: r.template_ids,
                    user_id: r.user_id,
                    username: r.username,
                    avatar_url: r.avatar_url,
                    seconds: r.seconds,
                })
                .collect(),
        },
    })
}

/// Users' connection latency. Nothing samples round trips through the relay yet, so no user
/// has a latency to report and the list is empty rather than made up.
pub async fn user_latency(
    state: &AppState,
    subject: &Subject,
    range: Range,
    templates: Vec<Uuid>,
) -> Result<UserLatencyInsightsResponse> {
    authorize_templates(state, subject, &templates).await?;
    Ok(UserLatencyInsightsResponse {
        report: UserLatencyInsightsReport {
            start_time: range.start,
            end_time: range.end,
            template_ids: templates,
            users: Vec::new(),
        },
    })
}

/// The built-in apps Coder's template report lists, with their seconds.
fn builtin_apps(templates: &[Uuid], secs: &coderd_store::UsageSecs) -> Vec<TemplateAppUsage> {
    [
        (
            "Visual Studio Code",
            "vscode",
            "/icon/code.svg",
            secs.vscode,
        ),
        (
            "JetBrains",
            "jetbrains",
            "/icon/intellij.svg",
            secs.jetbrains,
        ),
        (
            "Web Terminal",
            "reconnecting-pty",
            "/icon/terminal.svg",
            secs.reconnecting_pty,
        ),
        ("SSH", "ssh", "/icon/terminal.svg", secs.ssh),
    ]
    .into_iter()
    .map(|(name, slug, icon, seconds)| TemplateAppUsage {
        template_ids: templates.to_vec(),
        kind: "builtin".into(),
        display_name: name.into(),
        slug: slug.into(),
        icon: icon.into(),
        seconds,
        times_used: 0,
    })
    .collect()
}

/// Which parts of a template report to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sections {
    pub report: bool,
    pub interval_reports: bool,
}

pub async fn templates(
    state: &AppState,
    subject: &Subject,
    range: Range,
    templates: Vec<Uuid>,
    interval: Option<Interval>,
    sections: Sections,
) -> Result<TemplateInsightsResponse> {
    authorize_templates(state, subject, &templates).await?;
    let (start, end) = (range.start.to_utc(), range.end.to_utc());
    // The report's queries and the interval reports' are independent: they run at once, on
    // separate connections, so the answer waits for the slowest rather than their sum.
    let report = async {
        if !sections.report {
            return Ok(None);
        }
        let (usage, parameters) = tokio::try_join!(
            state.store.template_usage(start, end, &templates),
            state.store.parameter_usage(start, end, &templates)
        )?;
        Ok::<_, Error>(Some((usage, parameters)))
    };
    let intervals = async {
        match interval {
            Some(interval) if sections.interval_reports => {
                interval_reports(state, range, &templates, interval)
                    .await
                    .map(Some)
            }
            _ => Ok(None),
        }
    };
    let (report, intervals) = tokio::try_join!(report, intervals)?;
    let mut response = TemplateInsightsResponse {
        interval_reports: intervals,
        ..Default::default()
    };
    if let Some(((active_users, secs), parameters)) = report {
        response.report = Some(TemplateInsightsReport {
            start_time: range.start,
            end_time: range.end,
            apps_usage: builtin_apps(&templates, &secs),
            parameters_usage: parameters
                .into_iter()
                .map(|p| TemplateParameterUsage {
                    template_ids: p.template_ids,
                    display_name: p.display_name,
                    name: p.name,
                    kind: p.kind,
                    description: p.description,
                    values: p
                        .values
                        .into_iter()
                        .map(
                            |(value, count)| codersdk::insights::TemplateParameterValue {
                                value,
                                count,
                            },
                        )
                        .collect(),
                })
                .collect(),
            template_ids: templates.clone(),
            active_users,
        });
    }
    Ok(response)
}

async fn interval_reports(
    state: &AppState,
    range: Range,
    templates: &[Uuid],
    interval: Interval,
) -> Result<Vec<TemplateInsightsIntervalReport>> {
    let offset = offset_hours(range.start.offset());
    let first = range.start.date_naive();
    // The range's last local day: the end is exclusive.
    let last = (range.end - Duration::nanoseconds(1)).date_naive();
    let users: BTreeMap<NaiveDate, i64> = state
        .store
        .active_users_by_bucket(first, last, offset, interval.days(), templates)
        .await?
        .into_iter()
        .collect();
    let step = Duration::days(interval.days());
    let mut reports = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let next = (at + step).min(range.end);
        reports.push(TemplateInsightsIntervalReport {
            start_time: at,
            end_time: next,
            template_ids: templates.to_vec(),
            interval: interval.as_str().into(),
            active_users: users.get(&at.date_naive()).copied().unwrap_or(0),
        });
        at = next;
    }
    Ok(reports)
}

/// How many users were active, dormant and suspended at the end of each of the last 60 days.
pub async fn user_status_counts(
    state: &AppState,
    subject: &Subject,
    tz_offset: i32,
) -> Result<GetUserStatusCountsResponse> {
    if !(-12..=14).contains(&tz_offset) {
        return Err(invalid("tz_offset", "must be between -12 and 14"));
    }
    if !subject.filter(Resource::User).all {
        return Err(Error::forbidden(
            "Reading every user's status needs a user administrator.",
        ));
    }
    let zone = FixedOffset::east_opt(tz_offset * 3600).unwrap_or(Utc.fix());
    let today = Utc::now().with_timezone(&zone).date_naive();
    let from = today - Duration::days(DAU_DAYS - 1);
    let rows = state
        .store
        .user_status_counts(from, today, tz_offset)
        .await?;
    let mut status_counts: BTreeMap<String, Vec<UserStatusChangeCount>> =
        ["active", "dormant", "suspended"]
            .into_iter()
            .map(|s| (s.to_string(), Vec::new()))
            .collect();
    for (day, status, count) in rows {
        let date = day
            .and_hms_opt(0, 0, 0)
            .and_then(|t| t.and_local_timezone(zone).single());
        if let (Some(date), Some(series)) = (date, status_counts.get_mut(&status)) {
            series.push(UserStatusChangeCount { date, count });
        }
    }
    Ok(GetUserStatusCountsResponse { status_counts })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-03-10T15:20:00Z".parse().expect("time")
    }

    #[test]
    fn ranges_follow_coders_rules() {
        let ok = parse_range(
            "2026-03-01T00:00:00+02:00",
            "2026-03-08T00:00:00+02:00",
            now(),
        );
        assert!(ok.is_ok(), "{ok:?}");
        // Today may end on the hour.
        assert!(parse_range("2026-03-01T00:00:00Z", "2026-03-10T15:00:00Z", now()).is_ok());
        for (start, end, field) in [
            ("2026-03-01T01:00:00Z", "2026-03-08T00:00:00Z", "start_time"),
            ("2026-03-01T00:00:00Z", "2026-03-08T05:00:00Z", "end_time"),
            ("2026-03-08T00:00:00Z", "2026-03-01T00:00:00Z", "end_time"),
            ("2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "end_time"),
            ("yesterday", "2026-03-08T00:00:00Z", "start_time"),
            ("", "2026-03-08T00:00:00Z", "start_time"),
        ] {
            match parse_range(start, end, now()) {
                Err(Error::Validation(v)) => assert_eq!(v[0].field, field, "{start} {end}"),
                other => panic!("{start} {end}: {other:?}"),
            }
        }
    }

    #[test]
    fn weekly_intervals_need_a_nearly_full_last_week() {
        let range =
            parse_range("2026-02-01T00:00:00Z", "2026-02-15T00:00:00Z", now()).expect("range");
        assert_eq!(
            parse_interval("week", &range).ok().flatten(),
            Some(Interval::Week)
        );
        let short =
            parse_range("2026-02-01T00:00:00Z", "2026-02-10T00:00:00Z", now()).expect("range");
        assert!(parse_interval("week", &short).is_err());
        assert!(parse_interval("month", &range).is_err());
        assert_eq!(parse_interval("", &range).ok().flatten(), None);
    }
}
