//! Extra HTTP headers for every request to the deployment: `--header key=value` and the lines
//! `--header-command` prints, as Coder's CLI takes them (a proxy in front of coderd may ask
//! for a header of its own; Coder's IDE plugins pass their `--header-command` through).

use anyhow::{Context, bail};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

/// `--header` values first, then each line the command printed. The command runs through the
/// shell with `CODER_URL` set to the deployment's URL; every line must be `key=value`.
pub fn resolve(headers: &[String], command: Option<&str>, url: &Url) -> anyhow::Result<HeaderMap> {
    let mut lines: Vec<String> = headers.to_vec();
    if let Some(command) = command.filter(|c| !c.trim().is_empty()) {
        lines.extend(run(command, url)?);
    }
    let mut map = HeaderMap::new();
    for line in &lines {
        let (name, value) = parse(line)?;
        map.append(name, value);
    }
    Ok(map)
}

fn run(command: &str, url: &Url) -> anyhow::Result<Vec<String>> {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("CODER_URL", url.as_str())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("failed to run the header command {command:?}"))?;
    if !output.status.success() {
        bail!("the header command {command:?} failed: {}", output.status);
    }
    let stdout = String::from_utf8(output.stdout)
        .with_context(|| format!("the header command {command:?} printed something not UTF-8"))?;
    Ok(stdout.lines().map(str::to_owned).collect())
}

fn parse(line: &str) -> anyhow::Result<(HeaderName, HeaderValue)> {
    let Some((name, value)) = line.split_once('=') else {
        bail!("header {line:?} is not of the form key=value");
    };
    let name = HeaderName::from_bytes(name.as_bytes())
        .with_context(|| format!("header {line:?}: {name:?} is not a valid header name"))?;
    let value = HeaderValue::from_str(value)
        .with_context(|| format!("header {line:?}: the value is not a valid header value"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://coder.example.com").expect("a URL")
    }

    #[test]
    fn flags_then_command_lines_with_the_url_in_its_environment() -> anyhow::Result<()> {
        let map = resolve(
            &["X-One=1".into()],
            Some("echo X-Url=$CODER_URL; echo 'X-Two=a=b'"),
            &url(),
        )?;
        assert_eq!(map["x-one"], "1");
        assert_eq!(map["x-url"], "https://coder.example.com/");
        assert_eq!(map["x-two"], "a=b");
        Ok(())
    }

    #[test]
    fn a_malformed_line_or_a_failing_command_is_an_error() {
        for command in [
            "echo nonsense",
            "echo 'X-A=1'; echo",
            "exit 3",
            "echo 'bad name=1'",
        ] {
            let err = resolve(&[], Some(command), &url()).expect_err(command);
            assert!(err.to_string().contains("header"), "{command}: {err:#}");
        }
    }
}
