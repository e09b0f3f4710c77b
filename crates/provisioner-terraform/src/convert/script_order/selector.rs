//! Selectors of `coder_script_order` rules and the script addresses they match.
//!
//! A selector names, relative to the module that declares the rule, either one
//! `coder_script` resource (`coder_script.x`, every instance; `coder_script.x[0]` or
//! `coder_script.x["k"]`, one instance) or a whole direct child module call (`module.m`:
//! every script inside it, nested modules included).

use super::error::SelectorError;

/// An instance key, compared by value (`[1]` and `["a"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Key {
    Int(i64),
    Str(String),
}

impl Key {
    fn parse(raw: &str) -> Option<Self> {
        if let Ok(n) = raw.parse() {
            return Some(Self::Int(n));
        }
        let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?),
                '"' => return None,
                c => out.push(c),
            }
        }
        Some(Self::Str(out))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selector {
    Script { name: String, key: Option<Key> },
    Module { name: String },
}

impl Selector {
    pub(crate) fn is_module(&self) -> bool {
        matches!(self, Self::Module { .. })
    }
}

/// One step of an address: a name with an optional instance key.
struct Step<'a> {
    name: &'a str,
    key: Option<&'a str>,
}

/// Splits an address on the dots outside instance keys.
fn steps(address: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    let mut rest = address;
    loop {
        let name_end = rest.find(['.', '[']).unwrap_or(rest.len());
        let name = &rest[..name_end];
        if !is_identifier(name) {
            return None;
        }
        rest = &rest[name_end..];
        let mut key = None;
        if rest.starts_with('[') {
            let end = key_end(rest)?;
            key = Some(&rest[1..end]);
            rest = &rest[end + 1..];
        }
        out.push(Step { name, key });
        if rest.is_empty() {
            return Some(out);
        }
        rest = rest.strip_prefix('.')?;
    }
}

/// The index of the `]` closing the key that `text` starts with.
fn key_end(text: &str) -> Option<usize> {
    let mut in_string = false;
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        match (in_string, escaped, c) {
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, _, _) => escaped = false,
            (false, _, '"') => in_string = true,
            (false, _, ']') => return Some(at),
            _ => {}
        }
    }
    None
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

pub(crate) fn parse(raw: &str) -> Result<Selector, SelectorError> {
    let steps = steps(raw).ok_or(SelectorError::Unparsable)?;
    match steps.as_slice() {
        [module, name] if module.name == "module" && module.key.is_none() => {
            if name.key.is_some() {
                return Err(SelectorError::ModuleInstance);
            }
            Ok(Selector::Module {
                name: name.name.to_owned(),
            })
        }
        [kind, name] if kind.key.is_none() => {
            if kind.name != "coder_script" {
                return Err(SelectorError::NotScriptOrModule);
            }
            let key = match name.key {
                None => None,
                Some(raw_key) => Some(Key::parse(raw_key).ok_or(SelectorError::Unparsable)?),
            };
            Ok(Selector::Script {
                name: name.name.to_owned(),
                key,
            })
        }
        [first, ..] if first.name == "module" => Err(SelectorError::OutsideDeclaringModule),
        [first, ..] if first.name == "data" => Err(SelectorError::NotScriptOrModule),
        _ => Err(SelectorError::Unparsable),
    }
}

/// A `coder_script` instance's address taken apart: its module instance (`module.m[0]`,
/// empty at the root), its name and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScriptAddress {
    pub module: String,
    pub name: String,
    pub key: Option<Key>,
}

pub(crate) fn script_address(address: &str) -> Option<ScriptAddress> {
    let steps = steps(address)?;
    let (resource, modules) = steps.split_last_chunk::<2>().map(|(m, r)| (r, m))?;
    if resource[0].name != "coder_script" || resource[0].key.is_some() {
        return None;
    }
    let mut module = String::new();
    for pair in modules.chunks(2) {
        let [call, name] = pair else { return None };
        if call.name != "module" || call.key.is_some() {
            return None;
        }
        if !module.is_empty() {
            module.push('.');
        }
        module.push_str("module.");
        module.push_str(name.name);
        if let Some(key) = name.key {
            module.push('[');
            module.push_str(key);
            module.push(']');
        }
    }
    let key = match resource[1].key {
        None => None,
        Some(raw) => Some(Key::parse(raw)?),
    };
    Some(ScriptAddress {
        module,
        name: resource[1].name.to_owned(),
        key,
    })
}

/// Whether the script at `script` is selected by `selector` declared in module `module`.
pub(crate) fn selects(selector: &Selector, module: &str, script: &ScriptAddress) -> bool {
    match selector {
        Selector::Script { name, key } => {
            script.module == module
                && script.name == *name
                && key.as_ref().is_none_or(|k| script.key.as_ref() == Some(k))
        }
        Selector::Module { name } => {
            let call = if module.is_empty() {
                format!("module.{name}")
            } else {
                format!("{module}.module.{name}")
            };
            script.module.strip_prefix(&call).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('[') || rest.starts_with('.')
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_name_scripts_or_whole_module_calls() {
        assert_eq!(
            parse("coder_script.clone"),
            Ok(Selector::Script {
                name: "clone".into(),
                key: None
            })
        );
        assert_eq!(
            parse(r#"coder_script.x["a.b"]"#),
            Ok(Selector::Script {
                name: "x".into(),
                key: Some(Key::Str("a.b".into()))
            })
        );
        assert_eq!(
            parse("module.bootstrap"),
            Ok(Selector::Module {
                name: "bootstrap".into()
            })
        );
        assert_eq!(parse("module.m[0]"), Err(SelectorError::ModuleInstance));
        assert_eq!(
            parse("module.m.coder_script.x"),
            Err(SelectorError::OutsideDeclaringModule)
        );
        assert_eq!(
            parse("null_resource.x"),
            Err(SelectorError::NotScriptOrModule)
        );
        for bad in [
            "",
            "coder_script",
            "coder_script.",
            "coder_script.x[",
            "1x.y",
        ] {
            assert_eq!(parse(bad), Err(SelectorError::Unparsable), "{bad}");
        }
    }

    #[test]
    fn script_addresses_come_apart() {
        assert_eq!(
            script_address(r#"module.a["k"].module.b.coder_script.x[2]"#),
            Some(ScriptAddress {
                module: r#"module.a["k"].module.b"#.into(),
                name: "x".into(),
                key: Some(Key::Int(2)),
            })
        );
        assert_eq!(script_address("null_resource.x"), None);
    }

    #[test]
    fn selection_is_relative_to_the_declaring_module() {
        let at = |a: &str| script_address(a).unwrap_or_else(|| panic!("{a}"));
        let module = |name: &str| Selector::Module { name: name.into() };
        let script = |name: &str, key| Selector::Script {
            name: name.into(),
            key,
        };
        assert!(selects(&script("x", None), "", &at("coder_script.x[1]")));
        assert!(selects(
            &script("x", Some(Key::Int(1))),
            "",
            &at("coder_script.x[1]")
        ));
        assert!(!selects(
            &script("x", Some(Key::Int(0))),
            "",
            &at("coder_script.x[1]")
        ));
        assert!(!selects(
            &script("x", None),
            "",
            &at("module.m.coder_script.x")
        ));
        assert!(selects(
            &script("x", None),
            "module.m[0]",
            &at("module.m[0].coder_script.x")
        ));
        assert!(selects(
            &module("m"),
            "",
            &at("module.m[3].module.n.coder_script.y")
        ));
        assert!(!selects(&module("m"), "", &at("module.mm.coder_script.y")));
        assert!(selects(
            &module("n"),
            "module.m",
            &at("module.m.module.n.coder_script.y")
        ));
    }
}
