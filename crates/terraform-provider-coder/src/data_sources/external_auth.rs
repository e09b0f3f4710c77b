//! `coder_external_auth`: requires the workspace owner to be linked with an external auth
//! provider and exposes the access token Coder passes in.

use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::DataSource;
use crate::schema::{Attribute, Block, Schema};
use crate::value::Value;

pub(crate) struct ExternalAuth;

impl DataSource for ExternalAuth {
    fn type_name(&self) -> &'static str {
        "coder_external_auth"
    }

    fn schema(&self) -> Schema {
        let block = Block::new("An external auth provider the workspace owner must link.")
            .attr(
                Attribute::string("id")
                    .required()
                    .describe("Id of the provider configured in Coder."),
            )
            .attr(
                Attribute::string("access_token")
                    .computed()
                    .sensitive()
                    .describe("The owner's access token for this provider."),
            )
            .attr(Attribute::bool("optional").describe("Users may skip linking this provider."));
        Schema { version: 1, block }
    }

    fn read(&self, ctx: &Ctx, config: &Value, state: &mut Value, diags: &mut Diagnostics) {
        let Some(id) = config.get("id").as_str().filter(|id| !id.is_empty()) else {
            diags.error("id is required", "");
            return;
        };
        // Coder's name, else the hex-named copy our provisioner also sets (the `/bin/sh`
        // launcher drops names with a `-`, common in ids).
        let token = ctx
            .env
            .lookup(&format!("CODER_EXTERNAL_AUTH_ACCESS_TOKEN_{id}"))
            .or_else(|| {
                ctx.env.lookup(&format!(
                    "CODER_EXTERNAL_AUTH_ACCESS_TOKEN_HEX_{}",
                    hex::encode(id.as_bytes())
                ))
            })
            .unwrap_or_default();
        state.set("access_token", Value::from(token));
    }
}
