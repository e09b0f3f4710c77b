//! The rules a `coder_parameter` value must follow, as Coder enforces them: which form types
//! fit which types, options, `validation` blocks (min/max/monotonic/regex) and value types.
//! Messages follow Coder's wording, since users search for them.

use regex::Regex;

/// A parameter's configuration, reduced to what its value is checked against.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spec {
    pub(crate) ty: String,
    pub(crate) form_type: String,
    pub(crate) default: Option<String>,
    pub(crate) options: Vec<(String, String)>,
    pub(crate) validation: Option<Rule>,
}

/// A `validation` block. `min`/`max` only count when they were set.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rule {
    pub(crate) min: Option<i64>,
    pub(crate) max: Option<i64>,
    pub(crate) monotonic: String,
    pub(crate) regex: String,
    pub(crate) error: String,
}

/// Why a value was refused: a summary, a detail, and whether it is about `default`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) summary: String,
    pub(crate) detail: String,
    pub(crate) about_default: bool,
}

fn refuse(summary: impl Into<String>, detail: impl Into<String>) -> Refusal {
    Refusal {
        summary: summary.into(),
        detail: detail.into(),
        about_default: false,
    }
}

/// Allowed form types per `(type, has options)`; the first is the default.
fn form_types(ty: &str, has_options: bool) -> &'static [&'static str] {
    match (ty, has_options) {
        ("string" | "number" | "bool", true) => &["radio", "dropdown"],
        ("string", false) => &["input", "textarea"],
        ("number", false) => &["input", "slider"],
        ("bool", false) => &["checkbox", "switch"],
        ("list(string)", true) => &["radio", "multi-select"],
        ("list(string)", false) => &["tag-select"],
        _ => &[],
    }
}

/// Resolves the form type and the type option values must have (a multi-select of a
/// `list(string)` parameter picks plain strings).
pub(crate) fn form_type(spec: &Spec) -> Result<(String, String), Refusal> {
    let has_options = !spec.options.is_empty();
    let allowed = form_types(&spec.ty, has_options);
    let Some(first) = allowed.first() else {
        return Err(refuse(
            "Invalid form_type for parameter",
            format!(
                "\"type\" attribute={:?} is not supported, choose one of [string number bool list(string)]",
                spec.ty
            ),
        ));
    };
    let chosen = if spec.form_type.is_empty() {
        *first
    } else {
        spec.form_type.as_str()
    };
    if !allowed.contains(&chosen) {
        let hint = match (
            form_types(&spec.ty, !has_options).contains(&chosen),
            has_options,
        ) {
            (true, true) => " when options exist",
            (true, false) => " when options do not exist",
            (false, _) => "",
        };
        return Err(refuse(
            "Invalid form_type for parameter",
            format!(
                "\"form_type\" attribute={chosen:?} is not supported for \"type\"={:?}{hint}, choose one of [{}]",
                spec.ty,
                allowed.join(" ")
            ),
        ));
    }
    let option_type = if spec.ty == "list(string)" && chosen == "multi-select" {
        "string"
    } else {
        spec.ty.as_str()
    };
    Ok((chosen.to_owned(), option_type.to_owned()))
}

/// Checks the parameter and returns its value and form type. `input` is the value Coder
/// passed for this build, `previous` the value of the last build (for monotonic rules).
pub(crate) fn resolve(
    spec: &Spec,
    input: Option<&str>,
    previous: Option<&str>,
) -> Result<(String, String), Refusal> {
    let (form_type, option_type) = form_type(spec)?;
    let option_values = check_options(spec, &option_type)?;
    let from_default = input.is_none() && spec.default.is_some();
    let value = input.or(spec.default.as_deref());
    let Some(value) = value.or(spec.validation.as_ref().map(|_| "")) else {
        // Nothing to check: a required parameter without a value yet (template import).
        return Ok((String::new(), form_type));
    };
    check_value(
        spec,
        value,
        from_default,
        previous,
        &option_type,
        &option_values,
    )
    .map_err(|mut refusal| {
        refusal.about_default = from_default;
        refusal
    })?;
    if let Err(detail) = value_is_type(&spec.ty, value) {
        return Err(refuse(
            format!("Parameter value is not of type {:?}", spec.ty),
            detail,
        ));
    }
    Ok((value.to_owned(), form_type))
}

fn check_options(spec: &Spec, option_type: &str) -> Result<Vec<String>, Refusal> {
    let mut names: Vec<&str> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    let mut bad_types = Vec::new();
    for (name, value) in &spec.options {
        if names.contains(&name.as_str()) {
            return Err(refuse(
                "Option names must be unique.",
                format!("multiple options found with the same name {name:?}"),
            ));
        }
        if values.contains(value) {
            return Err(refuse(
                "Option values must be unique.",
                format!("multiple options found with the same value {value:?}"),
            ));
        }
        if let Err(detail) = value_is_type(option_type, value) {
            bad_types.push(refuse(
                format!("Option {name:?} with value={value:?} is not of type {option_type:?}"),
                detail,
            ));
            continue;
        }
        names.push(name);
        values.push(value.clone());
    }
    match bad_types.into_iter().next() {
        Some(refusal) => Err(refusal),
        None => Ok(values),
    }
}

fn check_value(
    spec: &Spec,
    value: &str,
    from_default: bool,
    previous: Option<&str>,
    option_type: &str,
    options: &[String],
) -> Result<(), Refusal> {
    let name = if from_default {
        "Default value"
    } else {
        "Value"
    };
    if !options.is_empty() {
        if spec.ty == "list(string)" && option_type == "string" {
            let items = parse_list(value).map_err(|detail| {
                refuse(
                    "When using list(string) type, value must be a json encoded list of strings",
                    detail,
                )
            })?;
            let missing: Vec<&str> = items
                .iter()
                .map(String::as_str)
                .filter(|i| !options.iter().any(|o| o == i))
                .collect();
            if !missing.is_empty() {
                return Err(refuse(
                    format!("{name}s must be a valid option"),
                    format!(
                        "{name} {value:?} is not a valid option, values {:?} are missing from the options",
                        missing.join(", ")
                    ),
                ));
            }
        } else if !options.iter().any(|o| o == value) {
            let extra = if value.is_empty() {
                ". The value is empty, did you forget to set it with a default or from user input?"
            } else {
                ""
            };
            return Err(refuse(
                format!("{name} must be a valid option{extra}"),
                format!("the value {value:?} must be defined as one of options"),
            ));
        }
    }
    if let Some(rule) = &spec.validation {
        rule.check(&spec.ty, value, previous).map_err(|detail| {
            refuse(
                format!(
                    "Invalid parameter {} according to 'validation' block",
                    name.to_lowercase()
                ),
                detail,
            )
        })?;
    }
    Ok(())
}

impl Rule {
    fn check(&self, ty: &str, value: &str, previous: Option<&str>) -> Result<(), String> {
        if ty != "number" {
            if self.min.is_some() {
                return Err(format!("a min cannot be specified for a {ty} type"));
            }
            if self.max.is_some() {
                return Err(format!("a max cannot be specified for a {ty} type"));
            }
            if !self.monotonic.is_empty() {
                return Err(format!(
                    "monotonic validation can only be specified for number types, not {ty} types"
                ));
            }
        }
        if ty != "string" && !self.regex.is_empty() {
            return Err(format!("a regex cannot be specified for a {ty} type"));
        }
        match ty {
            "bool" if value != "true" && value != "false" => {
                Err(r#"boolean value can be either "true" or "false""#.to_owned())
            }
            "string" if !self.regex.is_empty() => self.check_regex(value),
            "number" => self.check_number(value, previous),
            "list(string)" => parse_list(value)
                .map(drop)
                .map_err(|_| format!("value {value:?} is not valid list of strings")),
            _ => Ok(()),
        }
    }

    fn check_regex(&self, value: &str) -> Result<(), String> {
        let regex = Regex::new(&self.regex)
            .map_err(|err| format!("compile regex {:?}: {err}", self.regex))?;
        if self.error.is_empty() {
            return Err("an error must be specified with a regex validation".to_owned());
        }
        if regex.is_match(value) {
            Ok(())
        } else {
            Err(format!(
                "{} (value {value:?} does not match {:?})",
                self.error, self.regex
            ))
        }
    }

    fn check_number(&self, value: &str, previous: Option<&str>) -> Result<(), String> {
        let fail = |fallback: String| Err(self.rendered(value).unwrap_or(fallback));
        let Ok(num) = value.parse::<i64>() else {
            return fail(format!("value {value:?} is not a number"));
        };
        if let Some(min) = self.min
            && num < min
        {
            return fail(format!("value {num} is less than the minimum {min}"));
        }
        if let Some(max) = self.max
            && num > max
        {
            return fail(format!("value {num} is more than the maximum {max}"));
        }
        let previous = previous.and_then(|p| p.parse::<i64>().ok());
        match (self.monotonic.as_str(), previous) {
            ("", _) | ("increasing" | "decreasing", None) => Ok(()),
            ("increasing", Some(prev)) if num < prev => Err(format!(
                "parameter value '{num}' must be equal or greater than previous value: {prev}"
            )),
            ("decreasing", Some(prev)) if num > prev => Err(format!(
                "parameter value '{num}' must be equal or lower than previous value: {prev}"
            )),
            ("increasing" | "decreasing", Some(_)) => Ok(()),
            _ => {
                Err(r#"number monotonicity can be either "increasing" or "decreasing""#.to_owned())
            }
        }
    }

    /// The template's own error message with `{min}`, `{max}` and `{value}` filled in.
    fn rendered(&self, value: &str) -> Option<String> {
        (!self.error.is_empty()).then(|| {
            self.error
                .replace("{min}", &self.min.unwrap_or_default().to_string())
                .replace("{max}", &self.max.unwrap_or_default().to_string())
                .replace("{value}", value)
        })
    }
}

fn parse_list(value: &str) -> Result<Vec<String>, String> {
    serde_json::from_str(value)
        .map_err(|_| format!("value {value:?} is not a valid list of strings"))
}

fn value_is_type(ty: &str, value: &str) -> Result<(), String> {
    match ty {
        "number" if value.trim().parse::<f64>().is_err() || value.trim() != value => {
            Err(format!("{value:?} is not a number"))
        }
        "bool"
            if !matches!(
                value,
                "1" | "t"
                    | "T"
                    | "TRUE"
                    | "true"
                    | "True"
                    | "0"
                    | "f"
                    | "F"
                    | "FALSE"
                    | "false"
                    | "False"
            ) =>
        {
            Err(format!("{value:?} is not a bool"))
        }
        "list(string)" => parse_list(value).map(drop),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(default: &str, min: Option<i64>, max: Option<i64>) -> Spec {
        Spec {
            ty: "number".into(),
            default: Some(default.into()),
            validation: Some(Rule {
                min,
                max,
                ..Rule::default()
            }),
            ..Spec::default()
        }
    }

    #[test]
    fn value_comes_from_input_then_default() {
        let spec = Spec {
            ty: "string".into(),
            default: Some("d".into()),
            ..Spec::default()
        };
        assert_eq!(
            resolve(&spec, Some("in"), None),
            Ok(("in".into(), "input".into()))
        );
        assert_eq!(resolve(&spec, None, None), Ok(("d".into(), "input".into())));
        let required = Spec {
            ty: "string".into(),
            ..Spec::default()
        };
        assert_eq!(
            resolve(&required, None, None),
            Ok((String::new(), "input".into()))
        );
    }

    #[test]
    fn min_and_max_refuse_out_of_range_defaults() {
        let err = resolve(&number("10", Some(1), Some(5)), None, None).err();
        assert_eq!(
            err,
            Some(Refusal {
                summary: "Invalid parameter default value according to 'validation' block".into(),
                detail: "value 10 is more than the maximum 5".into(),
                about_default: true,
            })
        );
        assert!(resolve(&number("3", Some(1), Some(5)), None, None).is_ok());
        let err = resolve(&number("3", Some(1), Some(5)), Some("0"), None).err();
        assert_eq!(
            err.map(|e| (e.detail, e.about_default)),
            Some(("value 0 is less than the minimum 1".into(), false))
        );
    }

    #[test]
    fn custom_errors_are_rendered() {
        let mut spec = number("3", Some(4), None);
        if let Some(rule) = spec.validation.as_mut() {
            rule.error = "{value} is below {min}".into();
        }
        assert_eq!(
            resolve(&spec, None, None).err().map(|e| e.detail),
            Some("3 is below 4".into())
        );
    }

    #[test]
    fn monotonic_rules_compare_with_the_previous_value() {
        let mut spec = number("3", None, None);
        if let Some(rule) = spec.validation.as_mut() {
            rule.monotonic = "increasing".into();
        }
        assert!(resolve(&spec, Some("5"), Some("4")).is_ok());
        let err = resolve(&spec, Some("3"), Some("4")).err().map(|e| e.detail);
        assert_eq!(
            err,
            Some("parameter value '3' must be equal or greater than previous value: 4".into())
        );
    }

    #[test]
    fn regex_rules_need_an_error_message() {
        let spec = |error: &str| Spec {
            ty: "string".into(),
            validation: Some(Rule {
                regex: "^[a-z]+$".into(),
                error: error.into(),
                ..Rule::default()
            }),
            ..Spec::default()
        };
        assert!(resolve(&spec("lowercase only"), Some("abc"), None).is_ok());
        let err = resolve(&spec("lowercase only"), Some("ABC"), None)
            .err()
            .map(|e| e.detail);
        assert_eq!(
            err,
            Some(r#"lowercase only (value "ABC" does not match "^[a-z]+$")"#.into())
        );
        let err = resolve(&spec(""), Some("abc"), None)
            .err()
            .map(|e| e.detail);
        assert_eq!(
            err,
            Some("an error must be specified with a regex validation".into())
        );
    }

    #[test]
    fn options_constrain_values() {
        let spec = Spec {
            ty: "string".into(),
            options: vec![
                ("First".into(), "first".into()),
                ("Second".into(), "second".into()),
            ],
            ..Spec::default()
        };
        assert_eq!(
            resolve(&spec, Some("first"), None),
            Ok(("first".into(), "radio".into()))
        );
        let err = resolve(&spec, Some("third"), None).err().map(|e| e.summary);
        assert_eq!(err, Some("Value must be a valid option".into()));
        let multi = Spec {
            ty: "list(string)".into(),
            form_type: "multi-select".into(),
            ..spec.clone()
        };
        assert!(resolve(&multi, Some(r#"["first","second"]"#), None).is_ok());
        let err = resolve(&multi, Some(r#"["first","x"]"#), None)
            .err()
            .map(|e| e.detail);
        assert_eq!(err, Some(r#"Value "[\"first\",\"x\"]" is not a valid option, values "x" are missing from the options"#.into()));
        let dup = Spec {
            options: vec![("A".into(), "a".into()), ("A".into(), "b".into())],
            ..spec
        };
        assert_eq!(
            resolve(&dup, None, None).err().map(|e| e.summary),
            Some("Option names must be unique.".into())
        );
    }

    #[test]
    fn form_types_follow_type_and_options() {
        let spec = |ty: &str, form: &str| Spec {
            ty: ty.into(),
            form_type: form.into(),
            ..Spec::default()
        };
        assert_eq!(
            form_type(&spec("bool", "")).map(|f| f.0),
            Ok("checkbox".into())
        );
        assert_eq!(
            form_type(&spec("list(string)", "")).map(|f| f.0),
            Ok("tag-select".into())
        );
        let err = form_type(&spec("number", "radio")).err().map(|e| e.detail);
        assert_eq!(
            err,
            Some(r#""form_type" attribute="radio" is not supported for "type"="number" when options do not exist, choose one of [input slider]"#.into())
        );
    }

    #[test]
    fn values_must_match_their_type() {
        let spec = Spec {
            ty: "number".into(),
            default: Some("abc".into()),
            ..Spec::default()
        };
        let err = resolve(&spec, None, None).err();
        assert_eq!(
            err.map(|e| (e.summary, e.detail)),
            Some((
                r#"Parameter value is not of type "number""#.into(),
                r#""abc" is not a number"#.into()
            ))
        );
        let spec = Spec {
            ty: "bool".into(),
            default: Some("maybe".into()),
            ..Spec::default()
        };
        assert!(resolve(&spec, None, None).is_err());
    }
}
