//! A template's schedule settings: applying a create or edit request's (validated by
//! `validate::requests`), rendering the requirements, and what a change means for the
//! template's workspaces' next autostarts.

use codersdk::templates::{TemplateAutostartRequirement, TemplateAutostopRequirement};

use super::Result;
use crate::state::AppState;
use coderd_schedule::{Schedule, bitmap_to_days, days_to_bitmap};
use coderd_store::{TemplateRow, TemplateScheduleRow, day_bits};

/// The schedule fields of a create or edit request; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct ScheduleChanges {
    pub default_ttl_ms: Option<i64>,
    pub activity_bump_ms: Option<i64>,
    pub autostop_requirement: Option<TemplateAutostopRequirement>,
    pub autostart_requirement: Option<TemplateAutostartRequirement>,
    pub allow_user_autostart: Option<bool>,
    pub allow_user_autostop: Option<bool>,
    pub failure_ttl_ms: Option<i64>,
    pub time_til_dormant_ms: Option<i64>,
    pub time_til_dormant_autodelete_ms: Option<i64>,
}

impl ScheduleChanges {
    pub fn is_empty(&self) -> bool {
        self.default_ttl_ms.is_none()
            && self.activity_bump_ms.is_none()
            && self.autostop_requirement.is_none()
            && self.autostart_requirement.is_none()
            && self.allow_user_autostart.is_none()
            && self.allow_user_autostop.is_none()
            && self.failure_ttl_ms.is_none()
            && self.time_til_dormant_ms.is_none()
            && self.time_til_dormant_autodelete_ms.is_none()
    }
}

/// `current` with `changes` applied. The values were validated with the request
/// (`validate::requests`); a day name that is not one leaves the days as they were.
pub fn apply(current: TemplateScheduleRow, changes: &ScheduleChanges) -> TemplateScheduleRow {
    let mut next = current;
    let bits = |days: &[String], current: i16| days_to_bitmap(days).map_or(current, i16::from);
    if let Some(ms) = changes.default_ttl_ms {
        next.default_ttl_ms = ms;
    }
    if let Some(ms) = changes.activity_bump_ms {
        next.activity_bump_ms = ms;
    }
    if let Some(req) = &changes.autostop_requirement {
        next.autostop_requirement_days_of_week =
            bits(&req.days_of_week, current.autostop_requirement_days_of_week);
        next.autostop_requirement_weeks = req.weeks.max(1);
    }
    if let Some(req) = &changes.autostart_requirement {
        next.autostart_allowed_days = bits(&req.days_of_week, current.autostart_allowed_days);
    }
    if let Some(allow) = changes.allow_user_autostart {
        next.allow_user_autostart = allow;
    }
    if let Some(allow) = changes.allow_user_autostop {
        next.allow_user_autostop = allow;
    }
    if let Some(ms) = changes.failure_ttl_ms {
        next.failure_ttl_ms = ms;
    }
    if let Some(ms) = changes.time_til_dormant_ms {
        next.time_til_dormant_ms = ms;
    }
    if let Some(ms) = changes.time_til_dormant_autodelete_ms {
        next.time_til_dormant_autodelete_ms = ms;
    }
    next
}

pub fn autostop_requirement(row: &TemplateRow) -> TemplateAutostopRequirement {
    TemplateAutostopRequirement {
        days_of_week: bitmap_to_days(day_bits(row.autostop_requirement_days_of_week)),
        weeks: row.autostop_requirement_weeks.max(1),
    }
}

pub fn autostart_requirement(row: &TemplateRow) -> TemplateAutostartRequirement {
    TemplateAutostartRequirement {
        days_of_week: bitmap_to_days(day_bits(row.autostart_allowed_days)),
    }
}

/// After a template's schedule changed: when the days autostart may happen on (or whether it
/// may happen at all) changed, its workspaces' next autostarts are recomputed, so the executor
/// neither misses a newly allowed day nor starts on a day no longer allowed.
pub async fn after_change(
    state: &AppState,
    before: &TemplateRow,
    after: &TemplateRow,
) -> Result<()> {
    if before.autostart_allowed_days == after.autostart_allowed_days
        && before.allow_user_autostart == after.allow_user_autostart
    {
        return Ok(());
    }
    let now = state.options.clock.now();
    let next: Vec<_> = state
        .store
        .template_autostart_schedules(after.id)
        .await?
        .into_iter()
        .map(|(workspace, raw)| {
            let at = Schedule::weekly(&raw)
                .ok()
                .filter(|_| after.allow_user_autostart)
                .and_then(|s| s.next_allowed_after(now, day_bits(after.autostart_allowed_days)));
            (workspace, at)
        })
        .collect();
    state.store.set_next_starts(&next).await?;
    tracing::info!(template = %after.id, workspaces = next.len(), "next autostarts recomputed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_apply_field_by_field_and_zero_weeks_mean_weekly() {
        let changes = ScheduleChanges {
            activity_bump_ms: Some(0),
            autostop_requirement: Some(TemplateAutostopRequirement {
                days_of_week: vec!["saturday".into(), "Sunday".into()],
                weeks: 0,
            }),
            autostart_requirement: Some(TemplateAutostartRequirement {
                days_of_week: Vec::new(),
            }),
            allow_user_autostop: Some(false),
            time_til_dormant_ms: Some(60_000),
            ..Default::default()
        };
        assert!(!changes.is_empty());
        assert_eq!(
            apply(TemplateScheduleRow::default(), &changes),
            TemplateScheduleRow {
                activity_bump_ms: 0,
                autostop_requirement_days_of_week: 0b0110_0000,
                autostop_requirement_weeks: 1,
                autostart_allowed_days: 0,
                allow_user_autostop: false,
                time_til_dormant_ms: 60_000,
                ..TemplateScheduleRow::default()
            }
        );
        assert!(ScheduleChanges::default().is_empty());
    }
}
