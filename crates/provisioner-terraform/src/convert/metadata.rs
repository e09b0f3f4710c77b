//! `coder_metadata`: display details (items, icon, hidden, daily cost) for the resource a
//! metadata resource points at.

use std::collections::{HashMap, HashSet};

use codersdk::proto::ResourceMetadata;

use super::ConvertError;
use super::attrs::Attrs;
use super::graph::{Direction, Graph};
use super::show::TfResource;

/// What one `coder_metadata` says about its resource.
#[derive(Debug, Clone, Default)]
pub(crate) struct Details {
    pub items: Vec<ResourceMetadata>,
    pub hide: bool,
    pub icon: String,
    pub daily_cost: i32,
}

/// Details per resource label. A metadata resource describes the nearest resource it depends on;
/// one that is not in the graph or depends on no resource describes nothing.
pub(crate) fn collect(
    resources: &[TfResource],
    hosts: &HashSet<&str>,
    graph: &Graph,
) -> Result<HashMap<String, Details>, ConvertError> {
    let mut details = HashMap::new();
    for resource in resources.iter().filter(|r| r.kind == "coder_metadata") {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let items = attrs.map_blocks("item", |item| {
            Ok(ResourceMetadata {
                key: item.string("key")?,
                value: item.string("value")?,
                sensitive: item.bool("sensitive")?,
                // Known only after apply: in a plan a null value and an unknown one look alike.
                is_null: item.bool("is_null")?,
            })
        })?;
        let found = Details {
            items,
            hide: attrs.bool("hide")?,
            icon: attrs.string("icon")?,
            daily_cost: attrs.int("daily_cost")?,
        };

        let starts = graph.nodes_labelled(&resource.label);
        let Some(target) = graph.nearest(starts, Direction::Dependencies, |label| {
            hosts.contains(label)
        }) else {
            continue;
        };
        if details.insert(target.to_owned(), found).is_some() {
            return Err(ConvertError::DuplicateMetadata {
                label: target.to_owned(),
            });
        }
    }
    Ok(details)
}
