//! The host platform in the names Terraform and Coder use (Go's `GOOS`/`GOARCH`).

/// Go's name of this host's operating system (`linux`, `darwin`, `windows`, ...).
pub(crate) fn go_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's name of this host's CPU architecture.
pub(crate) fn go_arch() -> &'static str {
    go_arch_of(std::env::consts::ARCH)
}

fn go_arch_of(arch: &'static str) -> &'static str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        "x86" => "386",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_use_go_names() {
        assert_eq!(go_arch_of("x86_64"), "amd64");
        assert_eq!(go_arch_of("aarch64"), "arm64");
        assert_eq!(go_arch_of("x86"), "386");
        assert_eq!(go_arch_of("riscv64"), "riscv64");
    }
}
