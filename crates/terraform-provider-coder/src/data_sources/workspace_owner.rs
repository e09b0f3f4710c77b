//! `coder_workspace_owner`: the user who owns the workspace being built.

use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::DataSource;
use crate::schema::{Attribute, Block, Schema, Type};
use crate::value::{Value, object};

pub(crate) struct WorkspaceOwner;

/// Attributes read straight from a variable, with Coder's fallback when it is unset or empty.
const FROM_ENV: [(&str, &str, Option<&str>); 7] = [
    ("name", "CODER_WORKSPACE_OWNER", Some("default")),
    ("full_name", "CODER_WORKSPACE_OWNER_NAME", Some("default")),
    (
        "email",
        "CODER_WORKSPACE_OWNER_EMAIL",
        Some("default@example.com"),
    ),
    (
        "ssh_public_key",
        "CODER_WORKSPACE_OWNER_SSH_PUBLIC_KEY",
        Some(""),
    ),
    (
        "ssh_private_key",
        "CODER_WORKSPACE_OWNER_SSH_PRIVATE_KEY",
        Some(""),
    ),
    (
        "session_token",
        "CODER_WORKSPACE_OWNER_SESSION_TOKEN",
        Some(""),
    ),
    (
        "oidc_access_token",
        "CODER_WORKSPACE_OWNER_OIDC_ACCESS_TOKEN",
        Some(""),
    ),
];

fn role_type() -> Type {
    Type::Object(vec![("name", Type::String), ("org_id", Type::String)])
}

impl DataSource for WorkspaceOwner {
    fn type_name(&self) -> &'static str {
        "coder_workspace_owner"
    }

    fn schema(&self) -> Schema {
        let text = |name, description| Attribute::string(name).computed().describe(description);
        let block = Block::new("The owner of the workspace being built.")
            .attr(text("id", "The owner's user id."))
            .attr(text("name", "The owner's username."))
            .attr(text("full_name", "The owner's full name."))
            .attr(text("email", "The owner's email address."))
            .attr(text(
                "ssh_public_key",
                "The owner's Coder-generated SSH public key.",
            ))
            .attr(
                text(
                    "ssh_private_key",
                    "The owner's Coder-generated SSH private key.",
                )
                .sensitive(),
            )
            .attr(
                text(
                    "session_token",
                    "A session token of the owner, renewed on every start.",
                )
                .sensitive(),
            )
            .attr(
                text(
                    "oidc_access_token",
                    "The owner's OpenID Connect access token, if any.",
                )
                .sensitive(),
            )
            .attr(text("login_type", "How the owner logs in."))
            .attr(
                Attribute::typed("groups", Type::List(Box::new(Type::String)))
                    .computed()
                    .describe("Groups the owner belongs to."),
            )
            .attr(
                Attribute::typed("rbac_roles", Type::List(Box::new(role_type())))
                    .computed()
                    .describe("The owner's roles."),
            );
        Schema { version: 0, block }
    }

    fn read(&self, ctx: &Ctx, _config: &Value, state: &mut Value, diags: &mut Diagnostics) {
        let env = &ctx.env;
        let id = env
            .non_empty("CODER_WORKSPACE_OWNER_ID")
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        state.set("id", Value::from(id));
        for (attr, var, fallback) in FROM_ENV {
            state.set(attr, Value::from(env.non_empty(var).or(fallback)));
        }
        state.set(
            "login_type",
            Value::from(env.non_empty("CODER_WORKSPACE_OWNER_LOGIN_TYPE")),
        );

        let groups = match env.lookup("CODER_WORKSPACE_OWNER_GROUPS") {
            None => Vec::new(),
            Some(raw) => match serde_json::from_str::<Option<Vec<String>>>(raw) {
                Ok(groups) => groups.unwrap_or_default(),
                Err(err) => {
                    diags.error(format!("invalid user groups: {err}"), "");
                    return;
                }
            },
        };
        state.set(
            "groups",
            Value::List(groups.into_iter().map(Value::from).collect()),
        );

        let roles = match env.lookup("CODER_WORKSPACE_OWNER_RBAC_ROLES") {
            None => Vec::new(),
            Some(raw) => match serde_json::from_str::<
                Option<Vec<std::collections::HashMap<String, String>>>,
            >(raw)
            {
                Ok(roles) => roles.unwrap_or_default(),
                Err(err) => {
                    diags.error(format!("invalid user rbac roles: {err}"), "");
                    return;
                }
            },
        };
        let roles = roles
            .into_iter()
            .map(|mut role| {
                object([
                    ("name", Value::from(role.remove("name").unwrap_or_default())),
                    (
                        "org_id",
                        Value::from(role.remove("org_id").unwrap_or_default()),
                    ),
                ])
            })
            .collect();
        state.set("rbac_roles", Value::List(roles));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;

    fn read(env: Env) -> (Value, Diagnostics) {
        crate::data_sources::read_for_test(&WorkspaceOwner, &object([]), env)
    }

    #[test]
    fn reads_the_owner_with_coder_fallbacks() {
        let (state, diags) = read(Env::from_pairs([
            ("CODER_WORKSPACE_OWNER", "alice"),
            ("CODER_WORKSPACE_OWNER_GROUPS", r#"["devs"]"#),
            (
                "CODER_WORKSPACE_OWNER_RBAC_ROLES",
                r#"[{"name":"member","org_id":"o"}]"#,
            ),
        ]));
        assert!(!diags.has_errors());
        assert!(state.is_wholly_known());
        assert_eq!(state.get("name"), &Value::from("alice"));
        assert_eq!(state.get("email"), &Value::from("default@example.com"));
        assert_eq!(state.get("groups"), &Value::List(vec![Value::from("devs")]));
        assert_eq!(
            state.get("rbac_roles").as_list().map(<[Value]>::len),
            Some(1)
        );
        assert!(state.get("login_type").is_null());
    }

    #[test]
    fn malformed_groups_are_an_error() {
        let (_, diags) = read(Env::from_pairs([("CODER_WORKSPACE_OWNER_GROUPS", "devs")]));
        assert!(diags.has_errors());
    }
}
