//! `coder_workspace_tags`: provisioner tags a template asks for. Coder reads them from the
//! template's source when importing; at build time the data source only needs to exist.

use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::{DataSource, fill_new_id};
use crate::schema::{Attribute, Block, Schema, Type, id_attribute};
use crate::value::Value;

pub(crate) struct WorkspaceTags;

impl DataSource for WorkspaceTags {
    fn type_name(&self) -> &'static str {
        "coder_workspace_tags"
    }

    fn schema(&self) -> Schema {
        let block =
            Block::new("Tags selecting which provisioners may build workspaces of this template.")
                .attr(id_attribute("Random id."))
                .attr(
                    Attribute::typed("tags", Type::Map(Box::new(Type::String)))
                        .describe("Tags the provisioner must have."),
                );
        Schema { version: 1, block }
    }

    fn read(&self, _ctx: &Ctx, _config: &Value, state: &mut Value, _diags: &mut Diagnostics) {
        fill_new_id(state);
    }
}
