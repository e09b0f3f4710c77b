//! `coder_app`: a shortcut to an application in the workspace (proxied URL, external link
//! or command), shown with its agent.

use regex::Regex;

use super::agent_id_attribute;
use crate::diag::{AttrPath, Diagnostics};
use crate::provider::Resource;
use crate::schema::{Attribute, Block, Check, NestedBlock, Schema, id_attribute};
use crate::value::Value;

pub(crate) struct App;

/// Must stay a valid hostname label: Coder serves apps on subdomains named after it.
const SLUG_PATTERN: &str = "^[a-z0-9](-?[a-z0-9])*$";

/// Attribute pairs that must not both be set, as `(attribute, conflicts with)`.
const CONFLICTS: [(&str, &str); 7] = [
    ("command", "url"),
    ("command", "subdomain"),
    ("healthcheck", "command"),
    ("external", "healthcheck"),
    ("external", "command"),
    ("external", "subdomain"),
    ("external", "share"),
];

fn slug_attribute() -> Attribute {
    let slug = Attribute::string("slug")
        .required()
        .describe("Hostname-friendly name used in the app's URL.");
    match Regex::new(SLUG_PATTERN) {
        Ok(pattern) => slug.check(Check::Pattern(
            pattern,
            "must be a valid hostname (^[a-z0-9](-?[a-z0-9])*$: lowercase letters, digits and \
             single hyphens, not starting or ending with a hyphen)",
        )),
        Err(_) => slug,
    }
}

fn is_set(config: &Value, name: &str) -> bool {
    match config.get(name) {
        Value::Null => false,
        Value::List(items) => !items.is_empty(),
        _ => true,
    }
}

impl Resource for App {
    fn type_name(&self) -> &'static str {
        "coder_app"
    }

    fn schema(&self) -> Schema {
        let healthcheck = Block::new("HTTP health check deciding whether the app is ready.")
            .attr(
                Attribute::string("url")
                    .required()
                    .describe("URL to probe; a status below 500 is healthy."),
            )
            .attr(
                Attribute::int("interval")
                    .required()
                    .describe("Seconds between probes."),
            )
            .attr(
                Attribute::int("threshold")
                    .required()
                    .describe("Failed probes before the app is unhealthy."),
            );
        let block = Block::new("A shortcut to an application inside the workspace.")
            .attr(id_attribute("Random id of the app."))
            .attr(agent_id_attribute())
            .attr(slug_attribute())
            .attr(
                Attribute::string("display_name")
                    .check(Check::MaxLen(64))
                    .describe("Name shown in the UI; defaults to the slug."),
            )
            .attr(
                Attribute::string("command").describe("Command run in a terminal to open the app."),
            )
            .attr(Attribute::string("url").describe("URL proxied to, or opened when `external`."))
            .attr(
                Attribute::bool("external")
                    .default(false)
                    .describe("Open `url` on the client, unproxied."),
            )
            .attr(Attribute::icon("icon"))
            .attr(Attribute::bool("subdomain").describe("Serve the app on its own subdomain."))
            .attr(
                Attribute::string("share")
                    .default("owner")
                    .one_of(&["owner", "authenticated", "public"])
                    .describe("Who may open the app."),
            )
            .attr(
                Attribute::string("open_in")
                    .default("slim-window")
                    .one_of(&["tab", "slim-window"])
                    .describe("Where the browser opens the app."),
            )
            .attr(Attribute::int("order").describe("Position in the UI, lowest first."))
            .attr(
                Attribute::string("group")
                    .check(Check::MaxLen(64))
                    .describe("Group the app belongs to."),
            )
            .attr(
                Attribute::bool("hidden")
                    .default(false)
                    .describe("Hide the app in the UI."),
            )
            .attr(
                Attribute::string("tooltip")
                    .check(Check::MaxLen(2048))
                    .describe("Markdown shown when hovering over the app."),
            )
            .block(NestedBlock::set("healthcheck", healthcheck).max_items(1))
            .all_force_new();
        Schema { version: 1, block }
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        for (name, other) in CONFLICTS {
            if is_set(config, name) && is_set(config, other) {
                diags.error_at(
                    AttrPath::attr(name),
                    format!("{name:?}: conflicts with {other}"),
                    "",
                );
            }
        }
        if config.get("hidden").as_bool() == Some(true) {
            for name in ["display_name", "icon", "order"] {
                if is_set(config, name) {
                    diags.warning_at(
                        AttrPath::attr(name),
                        format!("`{name}` set when app is hidden"),
                        "",
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    fn diagnose(config: &Value) -> Vec<String> {
        let mut diags = Diagnostics::default();
        App.schema()
            .block
            .validate(config, &AttrPath::root(), &mut diags);
        App.validate(config, &mut diags);
        diags.0.into_iter().map(|d| d.summary).collect()
    }

    #[test]
    fn slugs_must_be_hostname_labels() {
        for ok in ["code-server", "a", "app1"] {
            assert!(
                diagnose(&object([("slug", Value::from(ok))])).is_empty(),
                "{ok}"
            );
        }
        for bad in ["Code", "a--b", "-a", "a-", "a_b", ""] {
            assert_eq!(
                diagnose(&object([("slug", Value::from(bad))])).len(),
                1,
                "{bad}"
            );
        }
    }

    #[test]
    fn conflicting_attributes_and_hidden_warnings() {
        let config = object([
            ("command", Value::from("vim")),
            ("url", Value::from("http://localhost")),
            ("hidden", Value::from(true)),
            ("icon", Value::from("/icon.svg")),
        ]);
        assert_eq!(
            diagnose(&config),
            [
                r#""command": conflicts with url"#,
                "`icon` set when app is hidden"
            ]
        );
    }
}
