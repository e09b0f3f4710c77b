//! Why script ordering rules are refused, worded for the template's author as Coder's
//! provisioner words them.

/// A selector that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("not a Terraform address")]
    Unparsable,
    #[error("module selectors must select all module instances")]
    ModuleInstance,
    #[error(
        "must reference a coder_script in the declaring module or an entire direct child module call"
    )]
    OutsideDeclaringModule,
    #[error("must select a coder_script or module")]
    NotScriptOrModule,
}

/// Which list of a rule a selector is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Run,
    After,
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Run => "run",
            Self::After => "after",
        })
    }
}

/// What is wrong with one rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    #[error("requires must be \"success\" or \"completion\", got {0:?}")]
    Requires(String),
    #[error("phase must be \"start\" or \"stop\", got {0:?}")]
    Phase(String),
    #[error("{0} must contain at least one selector")]
    NoSelectors(Field),
    #[error("invalid {field} selector {raw:?}: {why}")]
    InvalidSelector {
        field: Field,
        raw: String,
        why: SelectorError,
    },
    #[error("{field} selector {raw:?} expanded to no coder_script resources")]
    NoInstance { field: Field, raw: String },
    #[error("{field} selector {raw:?} does not name a declared coder_script resource")]
    UndeclaredScript { field: Field, raw: String },
    #[error("{field} selector {raw:?} does not name a declared child module call")]
    UndeclaredModule { field: Field, raw: String },
    #[error("{field} selector {raw:?} expanded to {expanded:?}, but script {address:?} {why}")]
    Unorderable {
        field: Field,
        raw: String,
        expanded: Vec<String>,
        address: String,
        why: &'static str,
    },
    #[error(
        "{} selector {:?} selects {} script {:?}, but {} selector {:?} selects {} script {:?}; {reason}",
        .one.field, .one.raw, .one.phase, .one.address,
        .two.field, .two.raw, .two.phase, .two.address
    )]
    MixedPhases {
        one: Sighting,
        two: Sighting,
        reason: &'static str,
    },
    #[error(
        "{field} selector {raw:?} selects {actual} script {address:?}, but the rule phase is {phase:?}"
    )]
    WrongPhase {
        field: Field,
        raw: String,
        actual: &'static str,
        address: String,
        phase: &'static str,
    },
    #[error(
        "{field} selector {raw:?} selects script {address:?}, but it could not be associated with an agent or devcontainer subagent"
    )]
    NoRuntime {
        field: Field,
        raw: String,
        address: String,
    },
    #[error(
        "selector {first_raw:?} expands to script {first:?} executed by {first_runtime:?}, but selector {raw:?} expands to script {address:?} executed by {runtime:?}; scripts can be ordered only within the same agent or devcontainer subagent"
    )]
    CrossRuntime {
        first_raw: String,
        first: String,
        first_runtime: String,
        raw: String,
        address: String,
        runtime: String,
    },
    #[error(
        "run selector {run:?} and after selector {after:?} both select script {address:?}; a script cannot depend on itself"
    )]
    SelfDependency {
        run: String,
        after: String,
        address: String,
    },
    #[error(
        "run selector {run:?} and after selector {after:?} declare script {dependent:?} after {prerequisite:?} with requires {requires:?}, conflicting with requires {earlier:?} from data source {earlier_source:?} rule {earlier_rule}"
    )]
    ConflictingRequires {
        run: String,
        after: String,
        dependent: String,
        prerequisite: String,
        requires: &'static str,
        earlier: &'static str,
        earlier_source: String,
        earlier_rule: usize,
    },
    #[error(
        "script ordering rules are limited to {limit} run/after script combinations in total; {used} from earlier rules together with {more} from this rule exceed the limit"
    )]
    TooManyCombinations {
        limit: usize,
        used: usize,
        more: usize,
    },
}

/// The first script seen in one phase, for reporting a mix of phases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    pub field: Field,
    pub raw: String,
    pub phase: &'static str,
    pub address: String,
}

/// Why the script ordering of a template is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptOrderError {
    #[error("script order data source {0:?} must contain at least one rule")]
    NoRules(String),
    #[error("script order data source {source_address:?} rule {rule}: {problem}")]
    Rule {
        source_address: String,
        rule: usize,
        problem: Box<RuleProblem>,
    },
    /// `path` runs in execution order and ends where it starts.
    #[error("script order dependency cycle: {}; cycle edges: {}", .path.join(" -> "), .edges.join("; "))]
    Cycle {
        path: Vec<String>,
        edges: Vec<String>,
    },
}
