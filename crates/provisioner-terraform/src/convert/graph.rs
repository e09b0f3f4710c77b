//! The dependency graph `terraform graph` describes, indexed for the converter's two questions:
//! "which resource is nearest to this node?" and "does this node point straight at that one?".
//!
//! Terraform draws an edge from a node to each node it depends on, and labels resource nodes
//! with their address without instance keys (`module.m.null_resource.dev`). Nodes only named by
//! edges (variables, locals, module closers) have no label; walks pass through them.

use std::collections::{HashMap, VecDeque};

use super::dot::DotGraph;

/// Which way a walk follows edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Towards the nodes that depend on the start (what an agent runs inside).
    Dependents,
    /// Towards the nodes the start depends on (what a `coder_metadata` describes).
    Dependencies,
}

#[derive(Debug, Default)]
pub(crate) struct Graph {
    labels: Vec<Option<String>>,
    dependencies: Vec<Vec<usize>>,
    dependents: Vec<Vec<usize>>,
    by_label: HashMap<String, Vec<usize>>,
}

impl Graph {
    pub(crate) fn new(dot: &DotGraph) -> Self {
        let mut graph = Self {
            labels: Vec::with_capacity(dot.nodes.len()),
            dependencies: vec![Vec::new(); dot.nodes.len()],
            dependents: vec![Vec::new(); dot.nodes.len()],
            by_label: HashMap::new(),
        };
        for (at, node) in dot.nodes.iter().enumerate() {
            let label = node.attrs.get("label").cloned();
            if let Some(label) = &label {
                graph.by_label.entry(label.clone()).or_default().push(at);
            }
            graph.labels.push(label);
        }
        for &(from, to) in &dot.edges {
            if !graph.dependencies[from].contains(&to) {
                graph.dependencies[from].push(to);
                graph.dependents[to].push(from);
            }
        }
        graph
    }

    /// The nodes labelled `label`; usually one.
    pub(crate) fn nodes_labelled(&self, label: &str) -> &[usize] {
        self.by_label.get(label).map_or(&[], Vec::as_slice)
    }

    /// Walks from `starts` in `direction` and returns the label, among those `is_target` accepts,
    /// of the closest node; ties go to the lexically smallest label. Direct neighbours are at
    /// depth 0. Start nodes themselves are never candidates.
    ///
    /// A breadth-first walk gives every node its shortest distance, which is the smallest depth
    /// at which any path reaches it, and cannot loop on a cyclic graph.
    pub(crate) fn nearest(
        &self,
        starts: &[usize],
        direction: Direction,
        is_target: impl Fn(&str) -> bool,
    ) -> Option<&str> {
        let edges = match direction {
            Direction::Dependents => &self.dependents,
            Direction::Dependencies => &self.dependencies,
        };
        let mut seen = vec![false; self.labels.len()];
        let mut queue = VecDeque::new();
        for &start in starts {
            if let Some(flag) = seen.get_mut(start) {
                *flag = true;
                queue.push_back((start, 0usize));
            }
        }
        let mut best: Option<(usize, &str)> = None;
        while let Some((node, distance)) = queue.pop_front() {
            if best.is_some_and(|(depth, _)| distance > depth) {
                break;
            }
            for &next in &edges[node] {
                if seen[next] {
                    continue;
                }
                seen[next] = true;
                queue.push_back((next, distance + 1));
                let depth = distance;
                if let Some(label) = self.labels[next].as_deref().filter(|l| is_target(l))
                    && best.is_none_or(|(d, l)| depth < d || (depth == d && label < l))
                {
                    best = Some((depth, label));
                }
            }
        }
        best.map(|(_, label)| label)
    }

    /// Whether a node labelled `from` depends on a node labelled `to`, straight or through
    /// unlabelled nodes only (variables, locals, outputs and module boundaries): how a resource
    /// inside a module names an agent passed in as a variable. Another resource on the way
    /// stops the walk.
    pub(crate) fn depends_on(&self, from: &str, to: &str) -> bool {
        let targets = self.nodes_labelled(to);
        let mut seen = vec![false; self.labels.len()];
        let mut queue: VecDeque<usize> = self.nodes_labelled(from).iter().copied().collect();
        while let Some(node) = queue.pop_front() {
            for &next in &self.dependencies[node] {
                if targets.contains(&next) {
                    return true;
                }
                if !seen[next] && self.labels[next].is_none() {
                    seen[next] = true;
                    queue.push_back(next);
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::dot;

    fn graph(text: &str) -> Graph {
        Graph::new(&dot::parse(text).expect("test graphs are valid DOT"))
    }

    fn nearest_to<'g>(graph: &'g Graph, label: &str, direction: Direction) -> Option<&'g str> {
        graph.nearest(graph.nodes_labelled(label), direction, |l| {
            l.starts_with("null_resource.")
        })
    }

    #[test]
    fn prefers_the_shortest_path_then_the_smallest_label() {
        // a is two steps from the agent one way and one step another way; b and c are one step.
        let g = graph(
            "digraph {
               agent [label=\"coder_agent.x\"]
               a [label=\"null_resource.a\"] b [label=\"null_resource.b\"]
               c [label=\"null_resource.c\"] v
               c -> agent; b -> agent; v -> agent; a -> v
             }",
        );
        assert_eq!(
            nearest_to(&g, "coder_agent.x", Direction::Dependents),
            Some("null_resource.b")
        );
        assert_eq!(
            nearest_to(&g, "coder_agent.x", Direction::Dependencies),
            None
        );
    }

    #[test]
    fn walks_through_unlabelled_and_rejected_nodes() {
        let g = graph(
            "digraph {
               agent [label=\"coder_agent.x\"] data [label=\"data.null.d\"]
               res [label=\"null_resource.r\"]
               var -> agent; data -> var; res -> data
             }",
        );
        assert_eq!(
            nearest_to(&g, "coder_agent.x", Direction::Dependents),
            Some("null_resource.r")
        );
    }

    #[test]
    fn survives_cycles_and_missing_starts() {
        let g = graph(
            "digraph { a [label=\"coder_agent.x\"] b [label=\"null_resource.b\"] a -> b -> a }",
        );
        assert_eq!(
            nearest_to(&g, "coder_agent.x", Direction::Dependents),
            Some("null_resource.b")
        );
        assert_eq!(
            nearest_to(&g, "coder_agent.none", Direction::Dependents),
            None
        );
        assert_eq!(g.nearest(&[99], Direction::Dependents, |_| true), None);
    }

    #[test]
    fn finds_edges_by_label_through_unlabelled_nodes_only() {
        let g = graph(
            "digraph { app [label=\"coder_app.a\"] ag [label=\"coder_agent.x\"] v app -> v -> ag }",
        );
        assert!(g.depends_on("coder_app.a", "coder_agent.x"));
        let g = graph(
            "digraph { app [label=\"coder_app.a\"] ag [label=\"coder_agent.x\"]
                       r [label=\"null_resource.r\"] app -> r -> ag }",
        );
        assert!(!g.depends_on("coder_app.a", "coder_agent.x"));
        let g =
            graph("digraph { app [label=\"coder_app.a\"] ag [label=\"coder_agent.x\"] app -> ag }");
        assert!(g.depends_on("coder_app.a", "coder_agent.x"));
        assert!(!g.depends_on("coder_agent.x", "coder_app.a"));
    }
}
