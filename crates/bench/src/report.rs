//! Result rows, judged against the goals; the stdout table, the JSON file, and the rows written
//! into `docs/benchmarks.md` between markers (the rest of that file is left as written).

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::conditions::Conditions;
use crate::stats::Summary;

pub const BEGIN_MARKER: &str = "<!-- coder-bench:begin (written by coder-bench --write-docs) -->";
pub const END_MARKER: &str = "<!-- coder-bench:end -->";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// Reported for context; no goal applies.
    Info,
    /// Could not be judged (a baseline the goal needs was skipped); the note says why.
    Skipped,
}

/// Bounds a row must meet: on our median, and on our median over the baseline's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub max: Option<f64>,
    pub min: Option<f64>,
    pub ratio_max: Option<f64>,
    pub ratio_min: Option<f64>,
}

impl Check {
    pub fn max(v: f64) -> Self {
        Self {
            max: Some(v),
            ..Self::default()
        }
    }
    pub fn min(v: f64) -> Self {
        Self {
            min: Some(v),
            ..Self::default()
        }
    }
    pub fn ratio_max(v: f64) -> Self {
        Self {
            ratio_max: Some(v),
            ..Self::default()
        }
    }
    pub fn ratio_min(v: f64) -> Self {
        Self {
            ratio_min: Some(v),
            ..Self::default()
        }
    }
    pub fn and_ratio_max(mut self, v: f64) -> Self {
        self.ratio_max = Some(v);
        self
    }
    fn needs_ratio(&self) -> bool {
        self.ratio_max.is_some() || self.ratio_min.is_some()
    }
    fn has_absolute(&self) -> bool {
        self.max.is_some() || self.min.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub name: String,
    /// `None` when the baseline was skipped; `skipped` says why.
    pub value: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The goal it belongs to (`P1`…), or `-` for context rows.
    pub id: String,
    pub metric: String,
    pub unit: String,
    pub ours: Option<Summary>,
    pub baseline: Option<Baseline>,
    /// Our median over the baseline's median.
    pub ratio: Option<f64>,
    pub goal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Row {
    /// A row of our figure per run (an empty slice means the scenario measured nothing).
    pub fn new(id: &str, metric: &str, unit: &str, runs: &[f64]) -> Self {
        let mut row = Self {
            id: id.into(),
            metric: metric.into(),
            unit: unit.into(),
            ours: Summary::of(runs),
            baseline: None,
            ratio: None,
            goal: String::new(),
            check: None,
            verdict: Verdict::Info,
            note: String::new(),
        };
        row.judge();
        row
    }

    /// A goal this suite does not measure yet, and why.
    pub fn not_measured(id: &str, metric: &str, why: &str) -> Self {
        let mut row = Self::new(id, metric, "", &[]);
        row.verdict = Verdict::Skipped;
        row.note = format!("not measured yet: {why}");
        row
    }

    pub fn baseline(mut self, name: &str, runs: Result<&[f64], &str>) -> Self {
        self.baseline = Some(match runs {
            Ok(values) => Baseline {
                name: name.into(),
                value: Summary::of(values),
                skipped: Summary::of(values)
                    .is_none()
                    .then(|| "the baseline produced no figure".to_string()),
            },
            Err(reason) => Baseline {
                name: name.into(),
                value: None,
                skipped: Some(reason.into()),
            },
        });
        self.judge();
        self
    }

    pub fn goal(mut self, text: &str, check: Check) -> Self {
        self.goal = text.into();
        self.check = Some(check);
        self.judge();
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    fn judge(&mut self) {
        let base = self.baseline.as_ref().and_then(|b| b.value);
        self.ratio = match (self.ours, base) {
            (Some(o), Some(b)) if b.median != 0.0 => Some(o.median / b.median),
            _ => None,
        };
        let Some(check) = self.check else {
            self.verdict = Verdict::Info;
            return;
        };
        let Some(ours) = self.ours else {
            self.verdict = Verdict::Fail;
            return;
        };
        let v = ours.median;
        let mut ok = check.max.is_none_or(|m| v <= m) && check.min.is_none_or(|m| v >= m);
        if check.needs_ratio() {
            match self.ratio {
                Some(r) => {
                    ok &= check.ratio_max.is_none_or(|m| r <= m)
                        && check.ratio_min.is_none_or(|m| r >= m);
                }
                // Without the baseline only the absolute part can be judged; with no absolute
                // part nothing can.
                None if !check.has_absolute() => {
                    self.verdict = Verdict::Skipped;
                    return;
                }
                None => {}
            }
        }
        self.verdict = if ok { Verdict::Pass } else { Verdict::Fail };
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub conditions: Conditions,
    pub rows: Vec<Row>,
    /// What happened along the way that a reader of the figures should know.
    pub notes: Vec<String>,
    /// How many things each scenario measured (jobs, builds, requests), so a reader — and the
    /// honesty test — can check the figures rest on what was asked for.
    pub counts: std::collections::BTreeMap<String, usize>,
}

fn number(v: f64, unit: &str) -> String {
    match unit {
        "ms" if v < 10.0 => format!("{v:.2}"),
        "ms" | "MiB" => format!("{v:.1}"),
        "s" => format!("{v:.3}"),
        "×" | "vCPU" => format!("{v:.2}"),
        _ if v >= 100.0 => format!("{v:.0}"),
        _ => format!("{v:.1}"),
    }
}

fn summary(s: Option<Summary>, unit: &str) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.runs == 1 => format!("{} {unit}", number(s.median, unit)),
        Some(s) => format!(
            "{} {unit} ({}–{})",
            number(s.median, unit),
            number(s.min, unit),
            number(s.max, unit)
        ),
    }
}

impl Row {
    fn cells(&self) -> [String; 7] {
        let baseline = match &self.baseline {
            None => String::new(),
            Some(b) => match (&b.value, &b.skipped) {
                (Some(v), _) => format!("{}: {}", b.name, summary(Some(*v), &self.unit)),
                (None, reason) => format!(
                    "{}: skipped ({})",
                    b.name,
                    reason.as_deref().unwrap_or("no figure")
                ),
            },
        };
        let verdict = match self.verdict {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Info => "info",
            Verdict::Skipped => "skipped",
        };
        let mut metric = self.metric.clone();
        if !self.note.is_empty() {
            metric = format!("{metric} [{}]", self.note);
        }
        [
            self.id.clone(),
            metric,
            summary(self.ours, &self.unit),
            baseline,
            self.ratio.map(|r| format!("{r:.2}×")).unwrap_or_default(),
            self.goal.clone(),
            verdict.into(),
        ]
    }
}

const HEADER: [&str; 7] = [
    "#",
    "metric",
    "ours: median (min–max)",
    "baseline (same run)",
    "ratio",
    "goal",
    "result",
];

impl Report {
    /// The table for a terminal.
    pub fn table(&self) -> String {
        let mut table = comfy_table::Table::new();
        table
            .load_style(comfy_table::presets::UTF8_FULL_CONDENSED)
            .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
            .set_header(HEADER);
        for row in &self.rows {
            table.add_row(row.cells());
        }
        format!(
            "{}\n\n{table}\n{}",
            self.conditions.summary(),
            self.notes_text()
        )
    }

    fn notes_text(&self) -> String {
        self.notes.iter().map(|n| format!("- {n}\n")).collect()
    }

    /// The generated part of `docs/benchmarks.md`.
    pub fn markdown(&self) -> String {
        let escape = |s: &str| s.replace('|', "\\|");
        let mut out = format!("{}\n\n", self.conditions.markdown());
        out += &format!("| {} |\n", HEADER.join(" | "));
        out += &format!("|{}\n", "---|".repeat(HEADER.len()));
        for row in &self.rows {
            let cells: Vec<String> = row.cells().iter().map(|c| escape(c)).collect();
            out += &format!("| {} |\n", cells.join(" | "));
        }
        if !self.notes.is_empty() {
            out += &format!("\nNotes from this run:\n\n{}", self.notes_text());
        }
        out
    }

    /// A report written by `write_json`, to render again.
    pub fn read_json(path: &Path) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        std::fs::write(path, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Replaces the generated block of `path` (creating the file, or appending the block, when
    /// there is none yet).
    pub fn write_docs(&self, path: &Path) -> anyhow::Result<()> {
        let existing = std::fs::read_to_string(path).unwrap_or_default();
        let block = format!("{BEGIN_MARKER}\n{}{END_MARKER}", self.markdown());
        std::fs::write(path, splice(&existing, &block))
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// `existing` with the text between the markers replaced by `block`.
fn splice(existing: &str, block: &str) -> String {
    match (existing.find(BEGIN_MARKER), existing.find(END_MARKER)) {
        (Some(begin), Some(end)) if begin < end => format!(
            "{}{block}{}",
            &existing[..begin],
            &existing[end + END_MARKER.len()..]
        ),
        _ if existing.is_empty() => format!("# Benchmarks\n\n{block}\n"),
        _ => format!("{}\n\n{block}\n", existing.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_are_judged_on_the_median_and_the_ratio() {
        let row = Row::new("P1", "p50", "ms", &[2.0, 4.0, 2.5]).goal("≤ 3 ms", Check::max(3.0));
        assert_eq!(row.verdict, Verdict::Pass);
        let row = Row::new("P2", "rate", "/s", &[400.0]).goal("≥ 500/s", Check::min(500.0));
        assert_eq!(row.verdict, Verdict::Fail);
        let row = Row::new("P2b", "rate", "/s", &[400.0])
            .baseline("gw", Ok(&[200.0]))
            .goal("≥ 1×", Check::ratio_min(1.0));
        assert_eq!((row.verdict, row.ratio), (Verdict::Pass, Some(2.0)));
        let row = Row::new("P2b", "rate", "/s", &[400.0])
            .baseline("gw", Err("npm missing"))
            .goal("≥ 1×", Check::ratio_min(1.0));
        assert_eq!(row.verdict, Verdict::Skipped);
        let row = Row::new("P1", "p50", "ms", &[2.0])
            .baseline("gw", Err("npm missing"))
            .goal("≤ 3 ms and ≤ 1× gw", Check::max(3.0).and_ratio_max(1.0));
        assert_eq!(row.verdict, Verdict::Pass, "absolute part still judged");
        let row = Row::new("P1", "p50", "ms", &[]).goal("≤ 3 ms", Check::max(3.0));
        assert_eq!(row.verdict, Verdict::Fail, "nothing measured is not a pass");
    }

    #[test]
    fn docs_keep_what_humans_wrote() {
        let block = format!("{BEGIN_MARKER}\nnew\n{END_MARKER}");
        let doc =
            format!("# B\n\nintro\n\n{BEGIN_MARKER}\nold\n{END_MARKER}\n\n## Analysis\ntext\n");
        let out = splice(&doc, &block);
        assert!(out.contains("intro") && out.contains("## Analysis\ntext"));
        assert!(out.contains("new") && !out.contains("old"));
        assert_eq!(splice(&out, &block), out, "idempotent");
        assert!(splice("", &block).starts_with("# Benchmarks"));
        assert!(splice("# Mine\n", &block).starts_with("# Mine\n\n"));
    }
}
