//! Diagnostics: the errors and warnings we hand back to Terraform, with the attribute they
//! are about so Terraform can point at the offending line of configuration.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Attr(String),
    Index(i64),
    /// A map element.
    Key(String),
}

/// A path from the root of a resource's object to one attribute, e.g. `validation[0].min`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AttrPath(pub(crate) Vec<Step>);

impl AttrPath {
    pub(crate) fn root() -> Self {
        Self::default()
    }

    pub(crate) fn attr(name: &str) -> Self {
        Self(vec![Step::Attr(name.to_owned())])
    }

    pub(crate) fn child(&self, name: &str) -> Self {
        let mut steps = self.0.clone();
        steps.push(Step::Attr(name.to_owned()));
        Self(steps)
    }

    pub(crate) fn key(&self, key: &str) -> Self {
        let mut steps = self.0.clone();
        steps.push(Step::Key(key.to_owned()));
        Self(steps)
    }

    pub(crate) fn index(&self, i: usize) -> Self {
        let mut steps = self.0.clone();
        steps.push(Step::Index(i64::try_from(i).unwrap_or(i64::MAX)));
        Self(steps)
    }
}

impl fmt::Display for AttrPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Attr(name) if i == 0 => write!(f, "{name}")?,
                Step::Attr(name) => write!(f, ".{name}")?,
                Step::Index(idx) => write!(f, "[{idx}]")?,
                Step::Key(key) => write!(f, "[{key:?}]")?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Diagnostic {
    pub(crate) severity: Severity,
    pub(crate) summary: String,
    pub(crate) detail: String,
    pub(crate) path: Option<AttrPath>,
}

/// Diagnostics collected while handling one request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Diagnostics(pub(crate) Vec<Diagnostic>);

impl Diagnostics {
    pub(crate) fn error(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.push(Severity::Error, summary.into(), detail.into(), None);
    }

    pub(crate) fn error_at(
        &mut self,
        path: AttrPath,
        summary: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.push(Severity::Error, summary.into(), detail.into(), Some(path));
    }

    pub(crate) fn warning_at(
        &mut self,
        path: AttrPath,
        summary: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.push(Severity::Warning, summary.into(), detail.into(), Some(path));
    }

    fn push(
        &mut self,
        severity: Severity,
        summary: String,
        detail: String,
        path: Option<AttrPath>,
    ) {
        self.0.push(Diagnostic {
            severity,
            summary,
            detail,
            path,
        });
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }

    pub(crate) fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_terraform_addresses() {
        let p = AttrPath::attr("validation").index(0).child("min");
        assert_eq!(p.to_string(), "validation[0].min");
    }

    #[test]
    fn warnings_are_not_errors() {
        let mut d = Diagnostics::default();
        d.warning_at(AttrPath::attr("dir"), "w", "");
        assert!(!d.has_errors());
        d.error("e", "");
        assert!(d.has_errors());
    }
}
