//! `coder_parameter`: values from Coder's environment or defaults, and validation errors.

use anyhow::Result;
use sha2::{Digest, Sha256};

use crate::harness::{Tf, values};

fn variable(name: &str) -> String {
    format!(
        "CODER_PARAMETER_{}",
        hex::encode(Sha256::digest(name.as_bytes()))
    )
}

const CONFIG: &str = r#"
data "coder_parameter" "region" {
  name         = "Region"
  display_name = "Where to run"
  default      = "eu"
  option {
    name  = "Europe"
    value = "eu"
  }
  option {
    name  = "United States"
    value = "us"
  }
}

data "coder_parameter" "cpus" {
  name    = "cpus"
  type    = "number"
  default = 2
  mutable = true
  validation {
    min = 1
    max = 8
  }
}

data "coder_parameter" "features" {
  name    = "features"
  type    = "list(string)"
  default = jsonencode(["git"])
}

resource "terraform_data" "uses" {
  input = "${data.coder_parameter.region.value}/${data.coder_parameter.cpus.value}"
}
"#;

#[test]
fn values_come_from_coder_or_from_defaults() -> Result<()> {
    let mut tf = Tf::new(CONFIG)?;
    tf.env(&variable("Region"), "us");
    let state = tf.init_plan_apply()?;

    let region = values(&state, "data.coder_parameter.region")?;
    assert_eq!(region["value"], "us");
    assert_eq!(region["form_type"], "radio");
    assert_eq!(region["optional"], true);
    assert_eq!(region["option"][1]["description"], "");
    let cpus = values(&state, "data.coder_parameter.cpus")?;
    assert_eq!(cpus["value"], "2");
    assert_eq!(cpus["validation"][0]["min_disabled"], false);
    assert_eq!(cpus["validation"][0]["regex"], "");
    let features = values(&state, "data.coder_parameter.features")?;
    assert_eq!(features["value"], r#"["git"]"#);
    assert_eq!(features["form_type"], "tag-select");
    assert_eq!(values(&state, "terraform_data.uses")?["input"], "us/2");
    Ok(())
}

fn failed_plan(tf: &Tf) -> Result<String> {
    let (output, _) = tf.run(&["plan", "-no-color", "-input=false"])?;
    assert!(!output.status.success(), "plan should fail");
    Ok(String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn validation_failures_are_clear_terraform_errors() -> Result<()> {
    let mut tf = Tf::new(CONFIG)?;
    tf.init()?;
    tf.env(&variable("cpus"), "16");
    let stderr = failed_plan(&tf)?;
    assert!(
        stderr.contains("Invalid parameter value according to 'validation' block"),
        "{stderr}"
    );
    assert!(
        stderr.contains("value 16 is more than the maximum 8"),
        "{stderr}"
    );
    assert!(stderr.contains(r#"parameter "cpus""#), "{stderr}");

    tf.remove_env(&variable("cpus"))
        .env(&variable("Region"), "mars");
    let stderr = failed_plan(&tf)?;
    assert!(stderr.contains("Value must be a valid option"), "{stderr}");
    assert!(
        stderr.contains(r#"the value "mars" must be defined as one of options"#),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn an_invalid_default_points_at_the_default() -> Result<()> {
    let tf = Tf::new(
        r#"
data "coder_parameter" "disk" {
  name    = "disk"
  type    = "number"
  default = 500
  validation {
    max   = 100
    error = "At most {max} GB, not {value}"
  }
}
"#,
    )?;
    tf.init()?;
    let stderr = failed_plan(&tf)?;
    assert!(
        stderr.contains("Invalid parameter default value according to 'validation' block"),
        "{stderr}"
    );
    assert!(stderr.contains("At most 100 GB, not 500"), "{stderr}");
    assert!(
        stderr.contains("default = 500"),
        "terraform should point at the default: {stderr}"
    );
    Ok(())
}
