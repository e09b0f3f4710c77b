//! Rich parameter values for a build: which values it gets, and whether they are allowed.
//!
//! A build's values are its request's values, else the previous build's (ephemeral parameters
//! are never carried over), else the parameter's default. Every value must be declared by the
//! template version and fit its type, options and validation; an immutable parameter keeps the
//! value it had; a required parameter without a value fails the build before anything runs.

use codersdk::ValidationError;
use codersdk::proto::RichParameter;
use codersdk::workspaces::WorkspaceBuildParameter;

use coderd_store::TemplateVersionRow;

/// The parameters a version declares, as its import recorded them.
pub fn declared(version: &TemplateVersionRow) -> Vec<RichParameter> {
    serde_json::from_value(version.rich_parameters.clone()).unwrap_or_default()
}

fn check_value(p: &RichParameter, value: &str) -> Result<(), String> {
    match p.kind.as_str() {
        "number" => {
            let n: f64 = value
                .parse()
                .map_err(|_| format!("{value:?} is not a number"))?;
            if let Some(min) = p.validation_min
                && n < f64::from(min)
            {
                return Err(custom_error(p, format!("must be at least {min}")));
            }
            if let Some(max) = p.validation_max
                && n > f64::from(max)
            {
                return Err(custom_error(p, format!("must be at most {max}")));
            }
        }
        "bool" if value != "true" && value != "false" => {
            return Err(format!("{value:?} is not a boolean (true or false)"));
        }
        "list(string)" => {
            let items: Vec<String> = serde_json::from_str(value)
                .map_err(|_| format!("{value:?} is not a JSON list of strings"))?;
            if !p.options.is_empty()
                && let Some(bad) = items
                    .iter()
                    .find(|i| !p.options.iter().any(|o| &o.value == *i))
            {
                return Err(format!("{bad:?} is not one of the options"));
            }
            return Ok(());
        }
        _ => {}
    }
    if !p.options.is_empty() && !p.options.iter().any(|o| o.value == value) {
        let allowed: Vec<&str> = p.options.iter().map(|o| o.value.as_str()).collect();
        return Err(format!(
            "{value:?} is not one of the options: {}",
            allowed.join(", ")
        ));
    }
    if !p.validation_regex.is_empty() && p.kind == "string" {
        let re = regex::Regex::new(&p.validation_regex)
            .map_err(|e| format!("the template's validation regex is invalid: {e}"))?;
        if !re.is_match(value) {
            return Err(custom_error(
                p,
                format!("must match {}", p.validation_regex),
            ));
        }
    }
    Ok(())
}

fn custom_error(p: &RichParameter, fallback: String) -> String {
    if p.validation_error.is_empty() {
        fallback
    } else {
        p.validation_error.clone()
    }
}

fn check_monotonic(p: &RichParameter, previous: &str, value: &str) -> Result<(), String> {
    let (Ok(old), Ok(new)) = (previous.parse::<f64>(), value.parse::<f64>()) else {
        return Ok(());
    };
    match p.validation_monotonic.as_str() {
        "increasing" if new < old => Err(format!("must not decrease (it was {previous})")),
        "decreasing" if new > old => Err(format!("must not increase (it was {previous})")),
        _ => Ok(()),
    }
}

/// The values a build gets, or one validation error per bad parameter.
pub fn resolve(
    declared: &[RichParameter],
    previous: &[(String, String)],
    requested: &[WorkspaceBuildParameter],
) -> Result<Vec<(String, String)>, Vec<ValidationError>> {
    let mut errors = Vec::new();
    let error = |name: &str, detail: String| ValidationError {
        field: format!("rich_parameter_values.{name}"),
        detail,
    };
    for r in requested {
        if !declared.iter().any(|p| p.name == r.name) {
            errors.push(error(
                &r.name,
                "the template version does not declare this parameter".into(),
            ));
        }
    }
    let mut values = Vec::with_capacity(declared.len());
    for p in declared {
        let requested = requested
            .iter()
            .rev()
            .find(|r| r.name == p.name)
            .map(|r| r.value.clone());
        let before = previous
            .iter()
            .find(|(name, _)| *name == p.name)
            .map(|(_, v)| v.clone())
            .filter(|_| !p.ephemeral);
        let value = match (&requested, &before) {
            (Some(v), _) => v.clone(),
            (None, Some(v)) => v.clone(),
            (None, None) if p.required && p.default_value.is_empty() => {
                errors.push(error(&p.name, "a value is required".into()));
                continue;
            }
            (None, None) => p.default_value.clone(),
        };
        if let (Some(new), Some(old)) = (&requested, &before) {
            if !p.mutable && new != old {
                errors.push(error(
                    &p.name,
                    format!("is immutable and cannot be changed from {old:?}"),
                ));
                continue;
            }
            if let Err(detail) = check_monotonic(p, old, new) {
                errors.push(error(&p.name, detail));
                continue;
            }
        }
        if let Err(detail) = check_value(p, &value) {
            errors.push(error(&p.name, detail));
            continue;
        }
        values.push((p.name.clone(), value));
    }
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codersdk::proto::RichParameterOption;

    fn param(name: &str, kind: &str) -> RichParameter {
        RichParameter {
            name: name.into(),
            kind: kind.into(),
            mutable: true,
            ..Default::default()
        }
    }

    fn req(name: &str, value: &str) -> WorkspaceBuildParameter {
        WorkspaceBuildParameter {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn values_come_from_request_then_previous_then_default() {
        let mut a = param("a", "string");
        a.default_value = "da".into();
        let mut b = param("b", "string");
        b.default_value = "db".into();
        let c = param("c", "string");
        let got = resolve(
            &[a, b, c],
            &[("b".into(), "pb".into()), ("c".into(), "pc".into())],
            &[req("c", "rc")],
        )
        .expect("valid");
        assert_eq!(
            got,
            vec![
                ("a".into(), "da".into()),
                ("b".into(), "pb".into()),
                ("c".into(), "rc".into())
            ]
        );
    }

    #[test]
    fn bad_values_are_named() {
        let mut n = param("n", "number");
        n.validation_min = Some(1);
        n.validation_max = Some(5);
        let mut o = param("o", "string");
        o.options = vec![RichParameterOption {
            value: "x".into(),
            ..Default::default()
        }];
        let mut r = param("r", "string");
        r.validation_regex = "^[a-z]+$".into();
        r.validation_error = "lowercase only".into();
        let mut req_p = param("q", "string");
        req_p.required = true;
        let errors = resolve(
            &[n, o, r, req_p, param("b", "bool")],
            &[],
            &[
                req("n", "9"),
                req("o", "y"),
                req("r", "ABC"),
                req("b", "yes"),
                req("zzz", "1"),
            ],
        )
        .expect_err("invalid");
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "rich_parameter_values.zzz",
                "rich_parameter_values.n",
                "rich_parameter_values.o",
                "rich_parameter_values.r",
                "rich_parameter_values.q",
                "rich_parameter_values.b"
            ]
        );
        assert!(errors.iter().any(|e| e.detail == "lowercase only"));
    }

    #[test]
    fn immutable_and_monotonic_parameters_keep_their_history() {
        let mut fixed = param("region", "string");
        fixed.mutable = false;
        let previous = [("region".to_string(), "eu".to_string())];
        assert!(resolve(&[fixed.clone()], &previous, &[req("region", "us")]).is_err());
        assert!(resolve(&[fixed.clone()], &previous, &[req("region", "eu")]).is_ok());
        assert_eq!(
            resolve(&[fixed], &previous, &[]).expect("kept"),
            previous.to_vec()
        );

        let mut disk = param("disk", "number");
        disk.validation_monotonic = "increasing".into();
        let previous = [("disk".to_string(), "10".to_string())];
        assert!(resolve(&[disk.clone()], &previous, &[req("disk", "5")]).is_err());
        assert!(resolve(&[disk], &previous, &[req("disk", "20")]).is_ok());
    }

    #[test]
    fn ephemeral_values_are_not_carried_over() {
        let mut e = param("once", "string");
        e.ephemeral = true;
        e.default_value = "default".into();
        let got = resolve(&[e], &[("once".into(), "used".into())], &[]).expect("valid");
        assert_eq!(got, vec![("once".into(), "default".into())]);
    }
}
