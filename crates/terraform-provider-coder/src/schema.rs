//! The schema model every resource and data source declares, and the generic checks that
//! follow from it (allowed values, ranges, patterns).
//!
//! Protocol 6 is strict where Coder's Go provider (SDKv2, protocol 5) was lenient: an
//! attribute with a default must be `Optional + Computed` so the provider may fill it in at
//! plan time. [`Attribute::default`] does exactly that.

use regex::Regex;

use crate::diag::{AttrPath, Diagnostics};
use crate::value::Value;

/// A Terraform type constraint, as far as this provider needs them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Type {
    String,
    Number,
    Bool,
    List(Box<Type>),
    Map(Box<Type>),
    Object(Vec<(&'static str, Type)>),
}

impl Type {
    /// The compact JSON form Terraform expects in `Schema.Attribute.type`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Self::String => json!("string"),
            Self::Number => json!("number"),
            Self::Bool => json!("bool"),
            Self::List(elem) => json!(["list", elem.to_json()]),
            Self::Map(elem) => json!(["map", elem.to_json()]),
            Self::Object(attrs) => {
                let attrs: serde_json::Map<_, _> = attrs
                    .iter()
                    .map(|(name, ty)| ((*name).to_owned(), ty.to_json()))
                    .collect();
                json!(["object", attrs])
            }
        }
    }

    /// What Coder's Go provider writes for an unset attribute inside a nested block.
    fn zero(&self) -> Value {
        match self {
            Self::String => Value::from(""),
            Self::Number => Value::from(0),
            Self::Bool => Value::from(false),
            Self::List(_) | Self::Map(_) | Self::Object(_) => Value::Null,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Required,
    Optional,
    Computed,
    OptionalComputed,
}

/// A value rule checked at validation time, worded like the Go provider's messages.
#[derive(Clone, Debug)]
pub(crate) enum Check {
    OneOf(&'static [&'static str]),
    IntBetween(i64, i64),
    IntAtLeast(i64),
    MaxLen(usize),
    Pattern(Regex, &'static str),
    /// SDKv2's `StringIsNotEmpty`.
    NotEmpty,
    /// SDKv2's `StringLenBetween`, in characters.
    LenBetween(usize, usize),
    /// SDKv2's `IsUUID`.
    Uuid,
    /// Coder's `ValidateURL`: whatever Go's `url.Parse` accepts.
    Url,
    /// SDKv2's `MinItems` on a list attribute.
    MinItems(usize),
    /// A rule of the Go provider's own: given the attribute's name and value, the problem.
    Func(fn(&str, &Value) -> Option<String>),
}

#[derive(Clone, Debug)]
pub(crate) struct Attribute {
    pub(crate) name: &'static str,
    pub(crate) ty: Type,
    pub(crate) mode: Mode,
    pub(crate) sensitive: bool,
    pub(crate) description: &'static str,
    pub(crate) default: Option<Value>,
    pub(crate) force_new: bool,
    pub(crate) checks: Vec<Check>,
    /// Checks of each element of a list or map attribute.
    pub(crate) elem_checks: Vec<Check>,
}

impl Attribute {
    fn new(name: &'static str, ty: Type) -> Self {
        Self {
            name,
            ty,
            mode: Mode::Optional,
            sensitive: false,
            description: "",
            default: None,
            force_new: false,
            checks: Vec::new(),
            elem_checks: Vec::new(),
        }
    }

    pub(crate) fn string(name: &'static str) -> Self {
        Self::new(name, Type::String)
    }

    pub(crate) fn int(name: &'static str) -> Self {
        Self::new(name, Type::Number)
    }

    pub(crate) fn bool(name: &'static str) -> Self {
        Self::new(name, Type::Bool)
    }

    pub(crate) fn typed(name: &'static str, ty: Type) -> Self {
        Self::new(name, ty)
    }

    pub(crate) fn required(mut self) -> Self {
        self.mode = Mode::Required;
        self
    }

    pub(crate) fn computed(mut self) -> Self {
        self.mode = Mode::Computed;
        self
    }

    /// Optional, filled in by the provider (at plan time when known) if unset.
    pub(crate) fn optional_computed(mut self) -> Self {
        self.mode = Mode::OptionalComputed;
        self
    }

    pub(crate) fn default(mut self, value: impl Into<Value>) -> Self {
        self.mode = Mode::OptionalComputed;
        self.default = Some(value.into());
        self
    }

    /// Defaults to the zero value, as the Go SDK stores unset attributes of nested blocks.
    pub(crate) fn zero_default(self) -> Self {
        let zero = self.ty.zero();
        self.default(zero)
    }

    pub(crate) fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    pub(crate) fn describe(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    pub(crate) fn check(mut self, check: Check) -> Self {
        self.checks.push(check);
        self
    }

    pub(crate) fn one_of(self, allowed: &'static [&'static str]) -> Self {
        self.check(Check::OneOf(allowed))
    }

    /// A check every element of a list or map must pass.
    pub(crate) fn elem_check(mut self, check: Check) -> Self {
        self.elem_checks.push(check);
        self
    }

    /// An icon: Coder's provider checks that it parses as a URL (paths are URLs too).
    pub(crate) fn icon(name: &'static str) -> Self {
        Self::string(name)
            .check(Check::Url)
            .describe("URL or path of an icon, e.g. `/icon/code.svg`.")
    }

    pub(crate) fn is_computed_only(&self) -> bool {
        self.mode == Mode::Computed
    }

    fn validate(&self, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        if value.is_null() || value.is_unknown() {
            return;
        }
        for check in &self.checks {
            if let Some((summary, detail)) = check.problem(self.name, value) {
                diags.error_at(path.clone(), summary, detail);
            }
        }
        if self.elem_checks.is_empty() {
            return;
        }
        let elements: Vec<(AttrPath, String, &Value)> = match value {
            Value::List(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (path.index(i), format!("{}.{i}", self.name), v))
                .collect(),
            Value::Object(entries) => entries
                .iter()
                .map(|(k, v)| (path.key(k), format!("{}.{k}", self.name), v))
                .collect(),
            _ => Vec::new(),
        };
        for (at, key, element) in elements {
            if element.is_null() || element.is_unknown() {
                continue;
            }
            for check in &self.elem_checks {
                if let Some((summary, detail)) = check.problem(&key, element) {
                    diags.error_at(at.clone(), summary, detail);
                }
            }
        }
    }
}

impl Check {
    /// What is wrong with `value` as (summary, detail), worded like the Go provider.
    pub(crate) fn problem(&self, name: &str, value: &Value) -> Option<(String, String)> {
        let summary = |text: String| Some((text, String::new()));
        match self {
            Self::OneOf(allowed) => {
                let got = value.as_str()?;
                if allowed.contains(&got) {
                    return None;
                }
                let quoted: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
                summary(format!(
                    "expected {name} to be one of [{}], got {got}",
                    quoted.join(" ")
                ))
            }
            Self::IntBetween(lo, hi) => {
                let got = value.as_i64()?;
                (got < *lo || got > *hi).then(|| {
                    (
                        format!("expected {name} to be in the range ({lo} - {hi}), got {got}"),
                        String::new(),
                    )
                })
            }
            Self::IntAtLeast(min) => {
                let got = value.as_i64()?;
                (got < *min).then(|| {
                    (
                        format!("expected {name} to be at least ({min}), got {got}"),
                        String::new(),
                    )
                })
            }
            Self::MaxLen(max) => {
                let got = value.as_str()?;
                (got.chars().count() > *max).then(|| {
                    (
                        format!("{name} is too long (max {max} characters)"),
                        String::new(),
                    )
                })
            }
            Self::Pattern(regex, message) => {
                let got = value.as_str()?;
                (!regex.is_match(got))
                    .then(|| (format!("invalid {name} {got:?}: {message}"), String::new()))
            }
            Self::NotEmpty => {
                let got = value.as_str()?;
                got.is_empty().then(|| {
                    (
                        format!("expected {name:?} to not be an empty string, got {got}"),
                        String::new(),
                    )
                })
            }
            Self::LenBetween(lo, hi) => {
                let got = value.as_str()?;
                let len = got.chars().count();
                (len < *lo || len > *hi).then(|| {
                    (
                        format!(
                            "expected length of {name} to be in the range ({lo} - {hi}), got {got}"
                        ),
                        String::new(),
                    )
                })
            }
            Self::Uuid => {
                let got = value.as_str()?;
                (got.len() != 36 || uuid::Uuid::parse_str(got).is_err()).then(|| {
                    (
                        format!("expected {name:?} to be a valid UUID, got {got}"),
                        String::new(),
                    )
                })
            }
            Self::Url => crate::url_check::problem(value.as_str()?).map(|p| (p, String::new())),
            Self::Func(rule) => rule(name, value).map(|p| (p, String::new())),
            Self::MinItems(min) => {
                let got = value.as_list()?.len();
                (got < *min).then(|| {
                    (
                        "Not enough list items".to_owned(),
                        format!(
                            "Attribute requires {min} item{} minimum, but config has only {got} declared.",
                            if *min == 1 { "" } else { "s" }
                        ),
                    )
                })
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nesting {
    List,
    Set,
}

#[derive(Clone, Debug)]
pub(crate) struct NestedBlock {
    pub(crate) name: &'static str,
    pub(crate) nesting: Nesting,
    pub(crate) min_items: i64,
    pub(crate) max_items: i64,
    pub(crate) block: Block,
    pub(crate) force_new: bool,
}

impl NestedBlock {
    pub(crate) fn list(name: &'static str, block: Block) -> Self {
        Self {
            name,
            nesting: Nesting::List,
            min_items: 0,
            max_items: 0,
            block,
            force_new: false,
        }
    }

    pub(crate) fn set(name: &'static str, block: Block) -> Self {
        Self {
            name,
            nesting: Nesting::Set,
            min_items: 0,
            max_items: 0,
            block,
            force_new: false,
        }
    }

    pub(crate) fn max_items(mut self, max: i64) -> Self {
        self.max_items = max;
        self
    }

    /// Terraform itself refuses configs with fewer blocks.
    pub(crate) fn min_items(mut self, min: i64) -> Self {
        self.min_items = min;
        self
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Block {
    pub(crate) description: &'static str,
    pub(crate) attributes: Vec<Attribute>,
    pub(crate) blocks: Vec<NestedBlock>,
}

impl Block {
    pub(crate) fn new(description: &'static str) -> Self {
        Self {
            description,
            ..Self::default()
        }
    }

    pub(crate) fn attr(mut self, attribute: Attribute) -> Self {
        self.attributes.push(attribute);
        self
    }

    pub(crate) fn block(mut self, block: NestedBlock) -> Self {
        self.blocks.push(block);
        self
    }

    /// Every Coder resource recreates itself on any change of configuration (Go's ForceNew).
    pub(crate) fn all_force_new(mut self) -> Self {
        for attr in &mut self.attributes {
            attr.force_new = !attr.is_computed_only();
        }
        for nested in &mut self.blocks {
            nested.force_new = true;
            nested.block = std::mem::take(&mut nested.block).all_force_new();
        }
        self
    }

    /// Applies every attribute's [`Check`]s to a (possibly partly unknown) config value.
    pub(crate) fn validate(&self, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        for attr in &self.attributes {
            attr.validate(value.get(attr.name), &path.child(attr.name), diags);
        }
        for nested in &self.blocks {
            let Some(items) = value.get(nested.name).as_list() else {
                continue;
            };
            let nested_path = path.child(nested.name);
            for (i, item) in items.iter().enumerate() {
                nested.block.validate(item, &nested_path.index(i), diags);
            }
        }
    }
}

/// A versioned schema of one resource type, data source or the provider itself.
#[derive(Clone, Debug)]
pub(crate) struct Schema {
    pub(crate) version: i64,
    pub(crate) block: Block,
}

/// The implicit `id` every Coder resource and data source has.
pub(crate) fn id_attribute(description: &'static str) -> Attribute {
    Attribute::string("id").computed().describe(description)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    fn attribute<'a>(block: &'a Block, name: &str) -> Option<&'a Attribute> {
        block.attributes.iter().find(|a| a.name == name)
    }

    fn sample() -> Block {
        Block::new("sample")
            .attr(
                Attribute::string("os")
                    .required()
                    .one_of(&["linux", "darwin"]),
            )
            .attr(Attribute::int("threshold").check(Check::IntBetween(0, 100)))
            .attr(Attribute::string("id").computed())
            .block(NestedBlock::list(
                "item",
                Block::new("").attr(Attribute::string("key").zero_default()),
            ))
    }

    #[test]
    fn type_json_matches_terraform_type_constraints() {
        let ty = Type::Object(vec![("name", Type::String), ("org_id", Type::String)]);
        assert_eq!(
            Type::List(Box::new(ty)).to_json().to_string(),
            r#"["list",["object",{"name":"string","org_id":"string"}]]"#
        );
        assert_eq!(
            Type::Map(Box::new(Type::String)).to_json().to_string(),
            r#"["map","string"]"#
        );
    }

    #[test]
    fn defaults_make_attributes_optional_and_computed() {
        let a = Attribute::string("auth").default("token");
        assert_eq!(a.mode, Mode::OptionalComputed);
        assert_eq!(a.default, Some(Value::from("token")));
        let z = Attribute::int("timeout").zero_default();
        assert_eq!(z.default, Some(Value::from(0)));
    }

    #[test]
    fn force_new_marks_everything_but_computed_only_attributes() {
        let b = sample().all_force_new();
        assert!(attribute(&b, "os").is_some_and(|a| a.force_new));
        assert!(attribute(&b, "id").is_some_and(|a| !a.force_new));
        assert!(
            b.blocks
                .iter()
                .all(|n| n.force_new && n.block.attributes[0].force_new)
        );
    }

    #[test]
    fn checks_report_go_style_messages_and_skip_unknowns() {
        let config = object([
            ("os", Value::from("plan9")),
            ("threshold", Value::from(101)),
        ]);
        let mut diags = Diagnostics::default();
        sample().validate(&config, &AttrPath::root(), &mut diags);
        let summaries: Vec<_> = diags.0.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                r#"expected os to be one of ["linux" "darwin"], got plan9"#,
                "expected threshold to be in the range (0 - 100), got 101",
            ]
        );
        let mut diags = Diagnostics::default();
        let unknown = object([("os", Value::unknown())]);
        sample().validate(&unknown, &AttrPath::root(), &mut diags);
        assert!(!diags.has_errors());
    }
}
