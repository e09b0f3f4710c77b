//! The deployment's configuration as it was given: every `coder server` option with its value
//! and where the value came from (Coder's `value_source`), computed once from the parsed command
//! line. Secret values (those clap hides from help, `hide_env_values`) never enter this type.

use clap::parser::ValueSource as ClapSource;
use clap::{ArgMatches, Args, Command};

use crate::config::ServerConfig;

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

impl DeploymentOptions {
    /// The options of [`ServerConfig`] from the matches it was parsed from (those of the
    /// `server` command).
    pub fn from_matches(matches: &ArgMatches) -> Self {
        let command = ServerConfig::augment_args(Command::new("server"));
        let options = command
            .get_arguments()
            .filter_map(|arg| {
                let id = arg.get_id().as_str();
                let flag = arg.get_long()?;
                let joined = |values: &mut dyn Iterator<Item = &std::ffi::OsStr>| {
                    values
                        .map(|v| v.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let value = matches
                    .try_get_raw(id)
                    .ok()
                    .flatten()
                    .map(|mut raw| joined(&mut raw))
                    .unwrap_or_default();
                let source = match matches.value_source(id) {
                    Some(ClapSource::CommandLine) => ValueSource::Flag,
                    Some(ClapSource::EnvVariable) => ValueSource::Env,
                    Some(ClapSource::DefaultValue) => ValueSource::Default,
                    _ => ValueSource::None,
                };
                let mut option =
                    DeploymentOption::new(flag, &value, source, arg.is_hide_env_values_set());
                option.env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                option.description = arg.get_help().map(ToString::to_string).unwrap_or_default();
                option.default = joined(&mut arg.get_default_values().iter().map(|v| v.as_ref()));
                option.hidden = arg.is_hide_set();
                Some(option)
            })
            .collect();
        Self(options)
    }

    /// The options of a server started with `args` (the `server` command's arguments only).
    pub fn parse<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let command = ServerConfig::augment_args(Command::new("server"));
        let matches = command.try_get_matches_from(
            std::iter::once("server".into()).chain(args.into_iter().map(Into::into)),
        )?;
        Ok(Self::from_matches(&matches))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(options: &'a DeploymentOptions, flag: &str) -> &'a DeploymentOption {
        match options.0.iter().find(|o| o.flag == flag) {
            Some(o) => o,
            None => panic!("no option {flag}"),
        }
    }

    #[test]
    fn sources_values_and_secrets() -> Result<(), clap::Error> {
        let options = DeploymentOptions::parse([
            "--provisioner-daemons",
            "5",
            "--oidc-client-secret",
            "hunter2",
            "--oidc-scopes",
            "openid,email",
        ])?;
        let daemons = find(&options, "provisioner-daemons");
        assert_eq!(
            (daemons.value(), daemons.source, daemons.default.as_str()),
            ("5", ValueSource::Flag, "3")
        );
        assert_eq!(daemons.env.as_deref(), Some("CODER_PROVISIONER_DAEMONS"));
        let secret = find(&options, "oidc-client-secret");
        assert!(secret.secret());
        assert_eq!((secret.value(), secret.source), ("", ValueSource::Flag));
        assert_eq!(find(&options, "oidc-scopes").value(), "openid,email");
        let session = find(&options, "session-duration");
        assert_eq!(
            (session.value(), session.source),
            ("24h", ValueSource::Default)
        );
        assert_eq!(find(&options, "access-url").source, ValueSource::None);
        assert!(find(&options, "autobuild-poll-interval").hidden);
        assert_eq!(find(&options, "disable-password-auth").value(), "false");
        Ok(())
    }
}
