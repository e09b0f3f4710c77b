//! The binary outside Terraform: it refuses to run and says why.

use std::process::Command;

use anyhow::Result;

#[test]
fn refuses_to_serve_without_terraforms_handshake() -> Result<()> {
    let output = Command::new(env!("CARGO_BIN_EXE_terraform-provider-coder"))
        .env_remove("TF_PLUGIN_MAGIC_COOKIE")
        .output()?;
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "nothing may be announced");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Terraform starts it itself"), "{stderr}");
    assert!(!terraform_provider_coder::is_plugin_invocation());
    Ok(())
}
