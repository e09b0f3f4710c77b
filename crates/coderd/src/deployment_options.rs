//! The server's options as given (flag, environment or default), read from the `server`
//! command's parsed arguments for those who may read the deployment's configuration.

use clap::parser::ValueSource as ClapSource;
use clap::{ArgMatches, Args, Command};
use coderd_core::deployment_options::{DeploymentOption, DeploymentOptions, ValueSource};

use crate::config::ServerConfig;

/// The options of [`ServerConfig`] from the matches it was parsed from (those of the
/// `server` command).
pub fn from_matches(matches: &ArgMatches) -> DeploymentOptions {
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
    DeploymentOptions(options)
}

/// The options of a server started with `args` (the `server` command's arguments only).
pub fn parse<I, T>(args: I) -> Result<DeploymentOptions, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let command = ServerConfig::augment_args(Command::new("server"));
    let matches = command.try_get_matches_from(
        std::iter::once("server".into()).chain(args.into_iter().map(Into::into)),
    )?;
    Ok(from_matches(&matches))
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
        let options = parse([
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
