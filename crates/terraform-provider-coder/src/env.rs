//! The environment the provider reads its inputs from. Coder's provisioner passes everything
//! about a build as `CODER_*` variables; we snapshot them once at startup so the rest of the
//! code (and its tests) reads an explicit value instead of the process environment.

use std::collections::HashMap;

#[derive(Clone, Debug, Default)]
pub(crate) struct Env(HashMap<String, String>);

impl Env {
    /// The variables of this process that the provider may read.
    pub(crate) fn from_process() -> Self {
        Self(
            std::env::vars()
                .filter(|(k, _)| k.starts_with("CODER_"))
                .collect(),
        )
    }

    #[cfg(test)]
    pub(crate) fn from_pairs<const N: usize>(pairs: [(&str, &str); N]) -> Self {
        Self(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    /// The variable's value when it is set, even to the empty string.
    pub(crate) fn lookup(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The variable's value when it is set and not empty (Go's `os.Getenv(x) != ""`).
    pub(crate) fn non_empty(&self, name: &str) -> Option<&str> {
        self.lookup(name).filter(|v| !v.is_empty())
    }

    pub(crate) fn or_empty(&self, name: &str) -> &str {
        self.lookup(name).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinguishes_empty_from_unset() {
        let env = Env::from_pairs([("CODER_A", ""), ("CODER_B", "x")]);
        assert_eq!(env.lookup("CODER_A"), Some(""));
        assert_eq!(env.non_empty("CODER_A"), None);
        assert_eq!(env.non_empty("CODER_B"), Some("x"));
        assert_eq!(env.or_empty("CODER_C"), "");
    }
}
