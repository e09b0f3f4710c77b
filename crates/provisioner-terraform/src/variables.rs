//! A template's variables (`variable` blocks of its root module), read from the source before
//! terraform runs: a plan needs every required variable's value, and the import reports them
//! to coderd (which shows them and validates the values a template admin gives).
//!
//! `terraform show -json` has no variable types and needs a plan first, so the `.tf` (HCL) and
//! `.tf.json` files are read here. Like terraform, files named `override.tf` or `*_override.tf`
//! (and their `.json` forms) are applied last, attribute by attribute.

use std::path::{Path, PathBuf};

use codersdk::provisionerd::TemplateVariable;
use hcl::eval::{Context, Evaluate};

#[derive(Debug, thiserror::Error)]
pub enum VariablesError {
    #[error("reading {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: variable {variable:?}: {message}")]
    Invalid {
        file: String,
        variable: String,
        message: String,
    },
}

/// What one file says about a variable; `None` is "not set here".
#[derive(Debug, Default)]
struct Declared {
    name: String,
    kind: Option<String>,
    /// `Some(None)` is `default = null`: optional, with no value.
    default: Option<Option<String>>,
    description: Option<String>,
    sensitive: Option<bool>,
}

impl Declared {
    fn apply(&mut self, over: Declared) {
        self.kind = over.kind.or(self.kind.take());
        self.default = over.default.or(self.default.take());
        self.description = over.description.or(self.description.take());
        self.sensitive = over.sensitive.or(self.sensitive.take());
    }

    fn into_variable(self) -> TemplateVariable {
        TemplateVariable {
            name: self.name,
            description: self.description.unwrap_or_default(),
            kind: self.kind.unwrap_or_default(),
            required: self.default.is_none(),
            default_value: self.default.flatten().unwrap_or_default(),
            sensitive: self.sensitive.unwrap_or(false),
        }
    }
}

/// The variables of the module in `dir`, in declaration order (files by name).
pub fn parse_dir(dir: &Path) -> Result<Vec<TemplateVariable>, VariablesError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VariablesError::Io { path, source }
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_config = name.ends_with(".tf") || name.ends_with(".tf.json");
        if is_config && entry.file_type().map_err(io(&entry.path()))?.is_file() {
            files.push(name);
        }
    }
    files.sort();
    let (overrides, primary): (Vec<String>, Vec<String>) =
        files.into_iter().partition(|name| is_override(name));

    let mut declared: Vec<Declared> = Vec::new();
    for name in primary.iter().chain(&overrides) {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let found = if name.ends_with(".json") {
            parse_json(name, &text)?
        } else {
            parse_hcl(name, &text)?
        };
        for variable in found {
            match declared.iter_mut().find(|d| d.name == variable.name) {
                Some(existing) => existing.apply(variable),
                None => declared.push(variable),
            }
        }
    }
    Ok(declared.into_iter().map(Declared::into_variable).collect())
}

fn is_override(name: &str) -> bool {
    let stem = name
        .strip_suffix(".tf.json")
        .or_else(|| name.strip_suffix(".tf"))
        .unwrap_or(name);
    stem == "override" || stem.ends_with("_override")
}

fn parse_hcl(file: &str, text: &str) -> Result<Vec<Declared>, VariablesError> {
    let body = hcl::parse(text).map_err(|e| VariablesError::Syntax {
        file: file.to_owned(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    for block in body.blocks().filter(|b| b.identifier() == "variable") {
        let Some(name) = block.labels().first().map(|l| l.as_str().to_owned()) else {
            continue;
        };
        let invalid = |message: String| VariablesError::Invalid {
            file: file.to_owned(),
            variable: name.clone(),
            message,
        };
        let context = Context::new();
        let evaluate = |key: &str| -> Result<Option<hcl::Value>, VariablesError> {
            match block.body().attributes().find(|a| a.key() == key) {
                None => Ok(None),
                Some(attr) => attr
                    .expr()
                    .evaluate(&context)
                    .map(Some)
                    .map_err(|e| invalid(format!("{key}: {e}"))),
            }
        };
        let kind = match block.body().attributes().find(|a| a.key() == "type") {
            Some(attr) => Some(
                hcl::format::to_string(attr.expr()).map_err(|e| invalid(format!("type: {e}")))?,
            ),
            None => None,
        };
        let description = match evaluate("description")? {
            None => None,
            Some(hcl::Value::String(s)) => Some(s),
            Some(other) => return Err(invalid(format!("description must be a string: {other}"))),
        };
        let sensitive = match evaluate("sensitive")? {
            None => None,
            Some(hcl::Value::Bool(b)) => Some(b),
            Some(other) => return Err(invalid(format!("sensitive must be a boolean: {other}"))),
        };
        let default = match evaluate("default")? {
            None => None,
            Some(value) => Some(default_text(&value).map_err(invalid)?),
        };
        out.push(Declared {
            name,
            kind,
            default,
            description,
            sensitive,
        });
    }
    Ok(out)
}

/// How a default reaches coderd (as Coder sends it): strings as they are, `null` as no value,
/// anything else as JSON.
fn default_text<T: serde::Serialize>(value: &T) -> Result<Option<String>, String> {
    match serde_json::to_value(value).map_err(|e| e.to_string())? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s)),
        other => Ok(Some(other.to_string())),
    }
}

/// `{"variable": {"name": {...}}}`, where the blocks may also be a list of such objects.
fn parse_json(file: &str, text: &str) -> Result<Vec<Declared>, VariablesError> {
    let syntax = |message: String| VariablesError::Syntax {
        file: file.to_owned(),
        message,
    };
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| syntax(e.to_string()))?;
    let groups: Vec<&serde_json::Value> = match doc.get("variable") {
        None => Vec::new(),
        Some(serde_json::Value::Array(items)) => items.iter().collect(),
        Some(object) => vec![object],
    };
    let mut out = Vec::new();
    for group in groups {
        let Some(group) = group.as_object() else {
            return Err(syntax("\"variable\" must be an object".into()));
        };
        for (name, attrs) in group {
            let invalid = |message: &str| VariablesError::Invalid {
                file: file.to_owned(),
                variable: name.clone(),
                message: message.to_owned(),
            };
            let string = |key: &str| match attrs.get(key) {
                None => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(invalid(&format!("{key} must be a string"))),
            };
            let sensitive = match attrs.get("sensitive") {
                None => None,
                Some(serde_json::Value::Bool(b)) => Some(*b),
                Some(_) => return Err(invalid("sensitive must be a boolean")),
            };
            let default = match attrs.get("default") {
                None => None,
                Some(value) => Some(default_text(value).map_err(|e| invalid(&e))?),
            };
            out.push(Declared {
                name: name.clone(),
                kind: string("type")?,
                default,
                description: string("description")?,
                sensitive,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> std::io::Result<tempfile::TempDir> {
        let dir = tempfile::tempdir()?;
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text)?;
        }
        Ok(dir)
    }

    fn by_name<'a>(vars: &'a [TemplateVariable], name: &str) -> &'a TemplateVariable {
        vars.iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("{name} not found in {vars:?}"))
    }

    #[test]
    fn hcl_variables_keep_types_defaults_and_flags() -> anyhow::Result<()> {
        let dir = dir_with(&[(
            "main.tf",
            r#"
variable "image" {
  type        = string
  default     = "ubuntu:22.04"
  description = "Container image"
}
variable "cpus" {
  type    = number
  default = 2
}
variable "regions" {
  type    = list(string)
  default = ["eu", "us"]
}
variable "tags" {
  type    = map(string)
  default = { team = "dev" }
}
variable "token" {
  type      = string
  sensitive = true
}
variable "maybe" {
  default = null
}
variable "notes" {
  type    = string
  default = <<-EOT
    line one
  EOT
}
resource "terraform_data" "x" {}
"#,
        )])?;
        let vars = parse_dir(dir.path())?;
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "image", "cpus", "regions", "tags", "token", "maybe", "notes"
            ]
        );
        let image = by_name(&vars, "image");
        assert_eq!(
            (image.kind.as_str(), image.default_value.as_str()),
            ("string", "ubuntu:22.04")
        );
        assert_eq!(image.description, "Container image");
        assert!(!image.required && !image.sensitive);
        assert_eq!(by_name(&vars, "cpus").default_value, "2");
        let regions = by_name(&vars, "regions");
        assert_eq!(regions.kind, "list(string)");
        assert_eq!(regions.default_value, r#"["eu","us"]"#);
        assert_eq!(by_name(&vars, "tags").default_value, r#"{"team":"dev"}"#);
        let token = by_name(&vars, "token");
        assert!(token.required && token.sensitive);
        let maybe = by_name(&vars, "maybe");
        assert!(!maybe.required, "default = null makes a variable optional");
        assert_eq!(
            (maybe.kind.as_str(), maybe.default_value.as_str()),
            ("", "")
        );
        assert_eq!(by_name(&vars, "notes").default_value, "line one\n");
        Ok(())
    }

    #[test]
    fn files_are_read_in_name_order_and_overrides_apply_last() -> anyhow::Result<()> {
        let dir = dir_with(&[
            ("b.tf", "variable \"second\" {}\n"),
            ("a.tf", "variable \"first\" {\n  default = \"a\"\n}\n"),
            (
                "override.tf",
                "variable \"first\" {\n  default = \"overridden\"\n}\n",
            ),
            (
                "c.tf.json",
                r#"{"variable": {"third": {"type": "bool", "default": true, "description": "json"}}}"#,
            ),
            ("notes.txt", "variable \"ignored\" {}"),
        ])?;
        let vars = parse_dir(dir.path())?;
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["first", "second", "third"]);
        assert_eq!(by_name(&vars, "first").default_value, "overridden");
        assert!(by_name(&vars, "second").required);
        let third = by_name(&vars, "third");
        assert_eq!(
            (third.kind.as_str(), third.default_value.as_str()),
            ("bool", "true")
        );
        assert_eq!(third.description, "json");
        Ok(())
    }

    #[test]
    fn mistakes_name_the_file_and_variable() -> anyhow::Result<()> {
        let dir = dir_with(&[("main.tf", "variable \"x\" {\n  default = \n")])?;
        let err = parse_dir(dir.path()).expect_err("syntax error");
        assert!(err.to_string().starts_with("main.tf: "), "{err}");

        let dir = dir_with(&[("main.tf", "variable \"x\" {\n  sensitive = \"yes\"\n}\n")])?;
        let err = parse_dir(dir.path()).expect_err("not a boolean");
        assert!(
            err.to_string()
                .contains("main.tf: variable \"x\": sensitive must be a boolean"),
            "{err}"
        );

        let dir = dir_with(&[("v.tf.json", r#"{"variable": {"x": {"type": 1}}}"#)])?;
        let err = parse_dir(dir.path()).expect_err("type not a string");
        assert!(err.to_string().contains("type must be a string"), "{err}");
        Ok(())
    }
}
