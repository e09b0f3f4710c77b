//! Rules become dependency edges, one graph per runtime and phase: every `run` script waits
//! for every `after` script. The same edge declared twice must agree on `requires`; the
//! number of edges is bounded; and a graph with a cycle is refused, naming the cycle.

use std::collections::BTreeMap;

use codersdk::proto::ScriptRequirement;

use super::error::{RuleProblem, ScriptOrderError};
use super::rules::{Phase, Rule, requirement_name};

/// Far above real templates; keeps a hostile template from exhausting the provisioner.
const MAX_COMBINATIONS: usize = 100_000;

/// Where an edge was declared, for messages.
#[derive(Debug, Clone)]
struct Origin {
    requires: ScriptRequirement,
    source: String,
    rule: usize,
    run: String,
    after: String,
}

/// Dependent address → prerequisite address → origin.
type Graph = BTreeMap<String, BTreeMap<String, Origin>>;

/// The edges of every graph, as (dependent, prerequisite, requirement), sorted.
pub(crate) fn build(
    rules: &[Rule],
) -> Result<Vec<(String, String, ScriptRequirement)>, ScriptOrderError> {
    let mut graphs: BTreeMap<(String, Phase), Graph> = BTreeMap::new();
    let mut used = 0usize;
    for rule in rules {
        let fail = |problem: RuleProblem| ScriptOrderError::Rule {
            source_address: rule.source.clone(),
            rule: rule.index,
            problem: Box::new(problem),
        };
        let runs = unique(&rule.run);
        let afters = unique(&rule.after);
        let more = runs.len().saturating_mul(afters.len());
        if more > MAX_COMBINATIONS - used {
            return Err(fail(RuleProblem::TooManyCombinations {
                limit: MAX_COMBINATIONS,
                used,
                more,
            }));
        }
        used += more;
        let graph = graphs
            .entry((rule.runtime.clone(), rule.phase))
            .or_default();
        for (run_raw, dependent) in &runs {
            let prerequisites = graph.entry((*dependent).to_owned()).or_default();
            for (after_raw, prerequisite) in &afters {
                if let Some(existing) = prerequisites.get(*prerequisite) {
                    if existing.requires != rule.requires {
                        return Err(fail(RuleProblem::ConflictingRequires {
                            run: (*run_raw).to_owned(),
                            after: (*after_raw).to_owned(),
                            dependent: (*dependent).to_owned(),
                            prerequisite: (*prerequisite).to_owned(),
                            requires: requirement_name(rule.requires),
                            earlier: requirement_name(existing.requires),
                            earlier_source: existing.source.clone(),
                            earlier_rule: existing.rule,
                        }));
                    }
                    continue;
                }
                prerequisites.insert(
                    (*prerequisite).to_owned(),
                    Origin {
                        requires: rule.requires,
                        source: rule.source.clone(),
                        rule: rule.index,
                        run: (*run_raw).to_owned(),
                        after: (*after_raw).to_owned(),
                    },
                );
            }
        }
    }
    let mut edges = Vec::new();
    for graph in graphs.values() {
        if let Some(cycle) = find_cycle(graph) {
            return Err(cycle_error(graph, &cycle));
        }
        for (dependent, prerequisites) in graph {
            for (prerequisite, origin) in prerequisites {
                edges.push((dependent.clone(), prerequisite.clone(), origin.requires));
            }
        }
    }
    Ok(edges)
}

/// Each address once, with the first selector that selected it.
fn unique(selected: &[super::rules::Resolved]) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for s in selected {
        for address in &s.addresses {
            if !out.iter().any(|(_, a)| a == address) {
                out.push((&s.raw, address));
            }
        }
    }
    out
}

/// A cycle as the addresses along dependent → prerequisite edges, first repeated last.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Visiting,
        Done,
    }
    let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
    for root in graph.keys() {
        if marks.contains_key(root.as_str()) {
            continue;
        }
        // An explicit stack: a long chain must not exhaust the thread's stack.
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(root, prerequisites(graph, root))];
        marks.insert(root, Mark::Visiting);
        while let Some(top) = stack.last_mut() {
            let node = top.0;
            let Some(next) = top.1.pop() else {
                marks.insert(node, Mark::Done);
                stack.pop();
                continue;
            };
            match marks.get(next) {
                None => {
                    marks.insert(next, Mark::Visiting);
                    stack.push((next, prerequisites(graph, next)));
                }
                Some(Mark::Visiting) => {
                    let start = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                    let mut cycle: Vec<String> = stack[start..]
                        .iter()
                        .map(|(n, _)| (*n).to_owned())
                        .collect();
                    cycle.push(next.to_owned());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
            }
        }
    }
    None
}

/// Prerequisites in reverse order, so popping visits them in address order.
fn prerequisites<'g>(graph: &'g Graph, node: &str) -> Vec<&'g str> {
    graph
        .get(node)
        .map(|p| p.keys().rev().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Presents the cycle in execution order (prerequisite before dependant).
fn cycle_error(graph: &Graph, cycle: &[String]) -> ScriptOrderError {
    let path: Vec<String> = cycle.iter().rev().cloned().collect();
    let edges = path
        .windows(2)
        .filter_map(|pair| {
            let (before, after) = (&pair[0], &pair[1]);
            let origin = graph.get(after)?.get(before)?;
            Some(format!(
                "{after:?} after {before:?} from run selector {:?} and after selector {:?} \
                 (data source {:?} rule {})",
                origin.run, origin.after, origin.source, origin.rule
            ))
        })
        .collect();
    ScriptOrderError::Cycle { path, edges }
}
