//! From `coder_script_order` data sources to rules with concrete scripts: selectors resolved
//! relative to the declaring module, one phase per rule (declared or inferred), and one
//! runtime (agent or dev container sub-agent) per rule.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use codersdk::proto::ScriptRequirement;

use super::error::{Field, RuleProblem, ScriptOrderError, Sighting};
use super::selector::{self, ScriptAddress, Selector};

/// Which lifecycle a rule orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Phase {
    Start,
    Stop,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Stop => "stop",
        }
    }
}

/// A `coder_script` instance as ordering needs it.
#[derive(Debug, Clone)]
pub(crate) struct ScriptInfo {
    pub parsed: ScriptAddress,
    pub run_on_start: bool,
    pub run_on_stop: bool,
    pub cron: String,
    /// The agent or dev container that runs it; `None` when it attached to none.
    pub runtime: Option<String>,
}

impl ScriptInfo {
    fn phase(&self) -> Option<Phase> {
        match (self.run_on_start, self.run_on_stop) {
            (true, false) => Some(Phase::Start),
            (false, true) => Some(Phase::Stop),
            _ => None,
        }
    }
}

/// What the configuration declares, to tell a resource with no instances in this plan
/// (`count = 0`) from a selector naming nothing.
pub(crate) struct Declarations {
    /// Labels of declared resources (`module.m.coder_script.x`).
    pub labels: HashSet<String>,
    /// Declared module calls (`module.m`, `module.m.module.n`).
    pub module_calls: HashSet<String>,
}

/// A `coder_script_order` data source as decoded.
pub(crate) struct Source {
    pub address: String,
    /// Its module instance (`module.m[0]`), empty at the root.
    pub module: String,
    pub rules: Vec<RawRule>,
}

pub(crate) struct RawRule {
    pub run: Vec<String>,
    pub after: Vec<String>,
    pub requires: String,
    pub phase: String,
}

/// One selector with the script addresses it ended up selecting.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub field: Field,
    pub raw: String,
    pub module: bool,
    pub addresses: Vec<String>,
}

/// A rule ready to become dependency edges.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub source: String,
    pub index: usize,
    pub runtime: String,
    pub phase: Phase,
    pub requires: ScriptRequirement,
    pub run: Vec<Resolved>,
    pub after: Vec<Resolved>,
}

pub(crate) fn requirement_name(requires: ScriptRequirement) -> &'static str {
    match requires {
        ScriptRequirement::Success => "success",
        ScriptRequirement::Completion => "completion",
    }
}

/// Resolves every rule of `sources`; rules that select nothing on one side are dropped.
/// Returns the rules and the warnings for module selectors a phase filtered.
pub(crate) fn resolve(
    sources: &[Source],
    scripts: &BTreeMap<String, ScriptInfo>,
    declared: &Declarations,
) -> Result<(Vec<Rule>, Vec<String>), ScriptOrderError> {
    let mut rules = Vec::new();
    let mut warnings = Vec::new();
    for source in sources {
        if source.rules.is_empty() {
            return Err(ScriptOrderError::NoRules(source.address.clone()));
        }
        for (index, raw) in source.rules.iter().enumerate() {
            let in_rule = |problem: Box<RuleProblem>| ScriptOrderError::Rule {
                source_address: source.address.clone(),
                rule: index,
                problem,
            };
            if let Some(rule) = resolve_rule(source, index, raw, scripts, declared, &mut warnings)
                .map_err(in_rule)?
            {
                rules.push(rule);
            }
        }
    }
    Ok((rules, warnings))
}

fn resolve_rule(
    source: &Source,
    index: usize,
    raw: &RawRule,
    scripts: &BTreeMap<String, ScriptInfo>,
    declared: &Declarations,
    warnings: &mut Vec<String>,
) -> Result<Option<Rule>, Box<RuleProblem>> {
    let requires = match raw.requires.as_str() {
        "" | "success" => ScriptRequirement::Success,
        "completion" => ScriptRequirement::Completion,
        other => return fail(RuleProblem::Requires(other.to_owned())),
    };
    let declared_phase = match raw.phase.as_str() {
        "" => None,
        "start" => Some(Phase::Start),
        "stop" => Some(Phase::Stop),
        other => return fail(RuleProblem::Phase(other.to_owned())),
    };
    let mut run = selectors(Field::Run, &raw.run, &source.module, scripts, declared)?;
    let mut after = selectors(Field::After, &raw.after, &source.module, scripts, declared)?;
    for selected in run.iter().chain(&after) {
        for address in &selected.addresses {
            check_orderable(selected, address, scripts)?;
        }
    }

    let (phase, inferred) = match declared_phase {
        Some(phase) => (Some(phase), false),
        None => (infer_phase(&run, &after, scripts)?, true),
    };
    let Some(phase) = phase else {
        // Every selector names something declared that has no scripts in this plan.
        return Ok(None);
    };
    for selected in run.iter().chain(&after).filter(|s| !s.module) {
        for address in &selected.addresses {
            let actual = script_phase(scripts, address);
            if actual != Some(phase) {
                return fail(RuleProblem::WrongPhase {
                    field: selected.field,
                    raw: selected.raw.clone(),
                    actual: actual.map_or("", Phase::as_str),
                    address: address.clone(),
                    phase: phase.as_str(),
                });
            }
        }
    }
    let mut filtered = BTreeSet::new();
    for selected in run.iter_mut().chain(after.iter_mut()).filter(|s| s.module) {
        let before = selected.addresses.len();
        selected
            .addresses
            .retain(|a| script_phase(scripts, a) == Some(phase));
        if selected.addresses.len() != before {
            filtered.insert(selected.raw.clone());
        }
    }
    if inferred && !filtered.is_empty() {
        let names: Vec<String> = filtered.iter().map(|s| format!("{s:?}")).collect();
        warnings.push(format!(
            "script order data source {:?} rule {index} inferred phase {:?} and omitted scripts \
             in the other phase from module selectors: {}; set phase = {:?} explicitly to make \
             this filtering intentional",
            source.address,
            phase.as_str(),
            names.join(", "),
            phase.as_str()
        ));
    }
    if run.iter().all(|s| s.addresses.is_empty()) || after.iter().all(|s| s.addresses.is_empty()) {
        return Ok(None);
    }
    let runtime = one_runtime(&run, &after, scripts)?;
    no_self_dependency(&run, &after)?;
    Ok(Some(Rule {
        source: source.address.clone(),
        index,
        runtime,
        phase,
        requires,
        run,
        after,
    }))
}

/// Rule problems are boxed: some carry several addresses, and they travel far.
fn fail<T>(problem: RuleProblem) -> Result<T, Box<RuleProblem>> {
    Err(Box::new(problem))
}

fn selectors(
    field: Field,
    raws: &[String],
    module: &str,
    scripts: &BTreeMap<String, ScriptInfo>,
    declared: &Declarations,
) -> Result<Vec<Resolved>, Box<RuleProblem>> {
    if raws.is_empty() {
        return fail(RuleProblem::NoSelectors(field));
    }
    let mut out: Vec<Resolved> = Vec::new();
    for raw in raws {
        if out.iter().any(|r| r.raw == *raw) {
            continue;
        }
        let parsed = selector::parse(raw).map_err(|why| RuleProblem::InvalidSelector {
            field,
            raw: raw.clone(),
            why,
        })?;
        let addresses: Vec<String> = scripts
            .iter()
            .filter(|(_, info)| selector::selects(&parsed, module, &info.parsed))
            .map(|(address, _)| address.clone())
            .collect();
        let module_label = crate::convert::show::address_label(module);
        let within = |rest: String| {
            if module_label.is_empty() {
                rest
            } else {
                format!("{module_label}.{rest}")
            }
        };
        match &parsed {
            Selector::Script { key: Some(_), .. } if addresses.is_empty() => {
                return fail(RuleProblem::NoInstance {
                    field,
                    raw: raw.clone(),
                });
            }
            Selector::Script { name, .. }
                if addresses.is_empty()
                    && !declared
                        .labels
                        .contains(&within(format!("coder_script.{name}"))) =>
            {
                return fail(RuleProblem::UndeclaredScript {
                    field,
                    raw: raw.clone(),
                });
            }
            Selector::Module { name }
                if !declared
                    .module_calls
                    .contains(&within(format!("module.{name}"))) =>
            {
                return fail(RuleProblem::UndeclaredModule {
                    field,
                    raw: raw.clone(),
                });
            }
            _ => {}
        }
        out.push(Resolved {
            field,
            raw: raw.clone(),
            module: parsed.is_module(),
            addresses,
        });
    }
    Ok(out)
}

fn script_phase(scripts: &BTreeMap<String, ScriptInfo>, address: &str) -> Option<Phase> {
    scripts.get(address).and_then(ScriptInfo::phase)
}

/// Only scripts of exactly one of the start and stop lifecycles can be ordered.
fn check_orderable(
    selected: &Resolved,
    address: &str,
    scripts: &BTreeMap<String, ScriptInfo>,
) -> Result<(), Box<RuleProblem>> {
    let Some(info) = scripts.get(address) else {
        return Ok(());
    };
    let why = match (info.run_on_start, info.run_on_stop) {
        (true, true) => "has both run_on_start and run_on_stop enabled",
        (false, false) if !info.cron.is_empty() => {
            "is cron-only; script ordering requires run_on_start or run_on_stop"
        }
        (false, false) => "has neither run_on_start nor run_on_stop enabled",
        _ => return Ok(()),
    };
    fail(RuleProblem::Unorderable {
        field: selected.field,
        raw: selected.raw.clone(),
        expanded: selected.addresses.clone(),
        address: address.to_owned(),
        why,
    })
}

/// The phase of the scripts a rule selects: script selectors decide, module selectors only
/// when there are none; both phases at once cannot be inferred.
fn infer_phase(
    run: &[Resolved],
    after: &[Resolved],
    scripts: &BTreeMap<String, ScriptInfo>,
) -> Result<Option<Phase>, Box<RuleProblem>> {
    for (modules, reason) in [
        (
            false,
            "coder_script resource selectors cannot mix start and stop scripts",
        ),
        (
            true,
            "phase cannot be inferred from module selectors that expand to both start and stop \
             scripts; set phase to \"start\" or \"stop\"",
        ),
    ] {
        let mut seen: BTreeMap<Phase, Sighting> = BTreeMap::new();
        for selected in run.iter().chain(after).filter(|s| s.module == modules) {
            for address in &selected.addresses {
                if let Some(phase) = script_phase(scripts, address) {
                    seen.entry(phase).or_insert_with(|| Sighting {
                        field: selected.field,
                        raw: selected.raw.clone(),
                        phase: phase.as_str(),
                        address: address.clone(),
                    });
                }
            }
        }
        let mut sightings = seen.into_iter();
        match (sightings.next(), sightings.next()) {
            (Some((_, one)), Some((_, two))) => {
                return fail(RuleProblem::MixedPhases { one, two, reason });
            }
            (Some((phase, _)), None) => return Ok(Some(phase)),
            _ => {}
        }
    }
    Ok(None)
}

fn one_runtime(
    run: &[Resolved],
    after: &[Resolved],
    scripts: &BTreeMap<String, ScriptInfo>,
) -> Result<String, Box<RuleProblem>> {
    let mut first: Option<(&Resolved, &str, &str)> = None;
    for selected in run.iter().chain(after) {
        for address in &selected.addresses {
            let Some(runtime) = scripts.get(address).and_then(|s| s.runtime.as_deref()) else {
                return fail(RuleProblem::NoRuntime {
                    field: selected.field,
                    raw: selected.raw.clone(),
                    address: address.clone(),
                });
            };
            match first {
                None => first = Some((selected, address, runtime)),
                Some((first_selected, first_address, first_runtime))
                    if first_runtime != runtime =>
                {
                    return fail(RuleProblem::CrossRuntime {
                        first_raw: first_selected.raw.clone(),
                        first: first_address.to_owned(),
                        first_runtime: first_runtime.to_owned(),
                        raw: selected.raw.clone(),
                        address: address.clone(),
                        runtime: runtime.to_owned(),
                    });
                }
                Some(_) => {}
            }
        }
    }
    Ok(first
        .map(|(_, _, runtime)| runtime.to_owned())
        .unwrap_or_default())
}

fn no_self_dependency(run: &[Resolved], after: &[Resolved]) -> Result<(), Box<RuleProblem>> {
    for waiting in run {
        for address in &waiting.addresses {
            if let Some(before) = after.iter().find(|a| a.addresses.contains(address)) {
                return fail(RuleProblem::SelfDependency {
                    run: waiting.raw.clone(),
                    after: before.raw.clone(),
                    address: address.clone(),
                });
            }
        }
    }
    Ok(())
}
