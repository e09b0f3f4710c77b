//! Accessibility audits with axe-core (npm, MPL-2.0; `scripts/setup.sh --tests` installs it
//! outside the repository, the dashboard never ships it). The script is injected over WebDriver,
//! whose script execution the page's CSP does not govern, and run once with the light and once
//! with the dark colour scheme (emulated through chromedriver's CDP bridge), since the
//! stylesheet's contrast differs between them.

use std::path::PathBuf;

use anyhow::Context;
use axum::http::Method;
use fantoccini::Client;
use fantoccini::wd::WebDriverCompatibleCommand;
use serde_json::{Value, json};

/// The version `scripts/setup.sh --tests` installs.
const AXE_VERSION: &str = "4.14.1";

/// Impacts that fail the test; `moderate` and `minor` are reported in the JSON only.
const FAILING: [&str; 2] = ["serious", "critical"];

fn install_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CODER_TEST_AXE_DIR") {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/coder-rs/axe-core"))
}

/// `axe.min.js` as installed by `scripts/setup.sh --tests`, or `None` when it is missing.
pub(crate) fn script() -> anyhow::Result<Option<String>> {
    let Some(dir) = install_dir() else {
        return Ok(None);
    };
    let package = dir.join("node_modules/axe-core");
    let Ok(manifest) = std::fs::read_to_string(package.join("package.json")) else {
        return Ok(None);
    };
    let version = serde_json::from_str::<Value>(&manifest)?["version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    anyhow::ensure!(
        version == AXE_VERSION,
        "axe-core {version} is installed in {}, the tests pin {AXE_VERSION} (scripts/setup.sh --tests)",
        package.display()
    );
    let js = std::fs::read_to_string(package.join("axe.min.js"))
        .with_context(|| format!("reading axe.min.js in {}", package.display()))?;
    Ok(Some(js))
}

/// chromedriver's passthrough to the DevTools protocol, for what WebDriver cannot set.
#[derive(Debug)]
struct Cdp {
    cmd: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (Method, Option<String>) {
        let body = json!({ "cmd": self.cmd, "params": self.params });
        (Method::POST, Some(body.to_string()))
    }
}

/// Switches the page's `prefers-color-scheme`, which the stylesheet's dark mode follows.
pub(crate) async fn color_scheme(client: &Client, scheme: &str) -> anyhow::Result<()> {
    client
        .issue_cmd(Cdp {
            cmd: "Emulation.setEmulatedMedia",
            params: json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
        })
        .await?;
    let dark = client
        .execute(
            "return matchMedia('(prefers-color-scheme: dark)').matches;",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        dark == json!(scheme == "dark"),
        "the page did not switch to the {scheme} colour scheme"
    );
    Ok(())
}

/// Proves the audit can fail: axe must flag a nameless button and grey-on-grey text added to
/// the current page (both removed again).
pub(crate) async fn self_check(client: &Client, axe: &str) -> anyhow::Result<()> {
    client
        .execute(
            r#"const b = document.createElement("button"); b.id = "axe-probe-button";
               const p = document.createElement("p"); p.id = "axe-probe-text";
               p.textContent = "probe"; p.style.color = "rgb(119,119,119)"; p.style.background = "rgb(136,136,136)";
               document.body.append(b, p); return null;"#,
            vec![],
        )
        .await?;
    let result = run(client, axe).await?;
    client
        .execute(
            r#"document.getElementById("axe-probe-button").remove();
               document.getElementById("axe-probe-text").remove(); return null;"#,
            vec![],
        )
        .await?;
    let ids: Vec<&str> = result["violations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["id"].as_str())
        .collect();
    anyhow::ensure!(
        ids.contains(&"button-name") && ids.contains(&"color-contrast"),
        "axe did not flag the probe elements (found {ids:?})"
    );
    Ok(())
}

/// Runs axe on the current document; the result without its (large) list of passes.
async fn run(client: &Client, axe: &str) -> anyhow::Result<Value> {
    let runner = r#"
const done = arguments[arguments.length - 1];
axe.run(document, { resultTypes: ["violations"] })
  .then(r => done(JSON.stringify({
      url: r.url, timestamp: r.timestamp, testEngine: r.testEngine,
      violations: r.violations, incomplete: r.incomplete })))
  .catch(e => done(JSON.stringify({ error: String(e) })));
"#;
    let out = client
        .execute_async(&format!("{axe}\n{runner}"), vec![])
        .await?;
    let text = out.as_str().context("axe returned no text")?;
    let result: Value = serde_json::from_str(text)?;
    if let Some(error) = result.get("error") {
        anyhow::bail!("axe failed: {error}");
    }
    Ok(result)
}

/// The serious and critical violations of one run, one readable line per element.
fn failures(page: &str, scheme: &str, result: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for v in result["violations"].as_array().into_iter().flatten() {
        let impact = v["impact"].as_str().unwrap_or_default();
        if !FAILING.contains(&impact) {
            continue;
        }
        for node in v["nodes"].as_array().into_iter().flatten() {
            out.push(format!(
                "{page} ({scheme}): {impact} {}: {} — {} — {}",
                v["id"].as_str().unwrap_or_default(),
                node["target"],
                v["help"].as_str().unwrap_or_default(),
                node["failureSummary"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('\n', " "),
            ));
        }
    }
    out
}

/// Audits the current page in both colour schemes, writes the results beside the screenshot
/// (`json_path`), and returns the serious and critical violations found.
pub(crate) async fn audit(
    client: &Client,
    axe: &str,
    page: &str,
    json_path: &std::path::Path,
) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    let mut results = serde_json::Map::new();
    for scheme in ["light", "dark"] {
        color_scheme(client, scheme).await?;
        let result = run(client, axe).await?;
        found.extend(failures(page, scheme, &result));
        results.insert(scheme.to_owned(), result);
    }
    color_scheme(client, "light").await?;
    std::fs::write(json_path, serde_json::to_vec_pretty(&results)?)?;
    Ok(found)
}
