//! The deployment's configuration as it was given: every `coder server` option with its value
//! and where the value came from (Coder's `value_source`), computed once from the parsed command
//! line. Secret values (those clap hides from help, `hide_env_values`) never enter this type.

/// Where an option's value came from, as Coder names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueSource {
    /// Not set, and without a default.
    None,
    Default,
    Flag,
    Env,
}

impl ValueSource {
    /// Coder's spelling (`""` when unset).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Default => "default",
            Self::Flag => "flag",
            Self::Env => "env",
        }
    }
}

/// One option of `coder server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentOption {
    /// The flag's name without dashes, which is also its name in the listing.
    pub flag: String,
    pub env: Option<String>,
    pub description: String,
    pub default: String,
    /// The value in effect, list items joined by commas; empty for secrets.
    value: String,
    pub source: ValueSource,
    /// Its value is a credential and is never shown.
    secret: bool,
    /// Not listed in `--help`.
    pub hidden: bool,
}

impl DeploymentOption {
    /// An option; the value of a secret one is dropped here.
    pub fn new(flag: &str, value: &str, source: ValueSource, secret: bool) -> Self {
        Self {
            flag: flag.to_owned(),
            env: None,
            description: String::new(),
            default: String::new(),
            value: value.to_owned(),
            source,
            secret,
            hidden: false,
        }
        .redacted()
    }

    /// The option with a secret's value blanked (as Coder blanks it).
    pub fn redacted(mut self) -> Self {
        if self.secret {
            self.value.clear();
        }
        self
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    pub fn secret(&self) -> bool {
        self.secret
    }
}

/// Every option of a server, in `--help`'s order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeploymentOptions(pub Vec<DeploymentOption>);
