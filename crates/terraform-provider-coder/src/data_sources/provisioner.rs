//! `coder_provisioner`: the operating system and architecture of the host running Terraform,
//! named as Go names them (Coder's templates compare them with `coder_agent.os`/`arch`).

use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::platform;
use crate::provider::{DataSource, fill_new_id};
use crate::schema::{Attribute, Block, Schema, id_attribute};
use crate::value::Value;

pub(crate) struct Provisioner;

impl DataSource for Provisioner {
    fn type_name(&self) -> &'static str {
        "coder_provisioner"
    }

    fn schema(&self) -> Schema {
        let block = Block::new("The host that runs Terraform for Coder.")
            .attr(id_attribute("Random id."))
            .attr(
                Attribute::string("os")
                    .computed()
                    .describe("Operating system of the host, e.g. `linux`."),
            )
            .attr(
                Attribute::string("arch")
                    .computed()
                    .describe("CPU architecture of the host, e.g. `amd64`."),
            );
        Schema { version: 1, block }
    }

    fn read(&self, _ctx: &Ctx, _config: &Value, state: &mut Value, _diags: &mut Diagnostics) {
        fill_new_id(state);
        state.set("os", Value::from(platform::go_os()));
        // Coder calls 32-bit ARM "armv7" where Go says "arm".
        let arch = match platform::go_arch() {
            "arm" => "armv7",
            other => other,
        };
        state.set("arch", Value::from(arch));
    }
}
