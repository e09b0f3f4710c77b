#!/usr/bin/env bash
# Installs what building, running and testing coder-rs needs on a Debian machine, when missing.
# Idempotent: a machine that has everything is left alone.
set -euo pipefail

need_apt=()
# The embedded database (and the test harness) run the system's PostgreSQL server binaries.
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null 2>&1; then
  need_apt+=(postgresql)
fi
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# Prebuild schedules of workspace presets name IANA time zones, looked up like Go does.
[ -e /usr/share/zoneinfo/UTC ] || need_apt+=(tzdata)
# scripts/compress-binary.sh makes the zstd copy of a release binary that agents download.
command -v zstd >/dev/null 2>&1 || need_apt+=(zstd)
# The agent's SSH tests drive the system's OpenSSH client (ssh, scp, sftp, ssh-agent) and run
# interactive sessions inside tmux.
if [ "${1:-}" = "--tests" ]; then
  command -v ssh >/dev/null 2>&1 && command -v ssh-agent >/dev/null 2>&1 || need_apt+=(openssh-client)
  command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
fi

if ((${#need_apt[@]})); then
  echo "setup: installing Debian packages: ${need_apt[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian starts a system cluster on install; coder-rs runs its own clusters and needs none.
  $sudo systemctl disable --now postgresql >/dev/null 2>&1 || true
fi

# The container image (scripts/image.sh) and its test: daemonless podman/buildah with runc, and
# a static busybox for the image's /bin/sh. Nothing is configured system-wide: the tests point
# podman at scripts/podman/containers.conf themselves (see docs/container.md).
case "${1:-}" in
  --tests | --image)
    need_image=()
    command -v podman >/dev/null 2>&1 || need_image+=(podman)
    command -v buildah >/dev/null 2>&1 || need_image+=(buildah)
    command -v runc >/dev/null 2>&1 || need_image+=(runc)
    [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need_image+=(busybox-static)
    if ((${#need_image[@]})); then
      echo "setup: installing Debian packages for the container image: ${need_image[*]}" >&2
      sudo=""
      [ "$(id -u)" -eq 0 ] || sudo="sudo"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_image[@]}" >/dev/null
    fi
    ;;
esac

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: Rust is missing. Install it with rustup (https://rustup.rs), then re-run." >&2
  exit 1
fi

if [ "${1:-}" = "--tests" ] && ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: installing cargo-nextest" >&2
  cargo install --locked cargo-nextest
fi

# What the relay's end-to-end tests drive: the system OpenSSH client, tmux for an interactive
# terminal, python3 servers inside a workspace, and for `ssh -X` a virtual X server (Xvfb), an
# X client (xdpyinfo) and xauth.
if [ "${1:-}" = "--tests" ]; then
  relay_apt=()
  command -v ssh >/dev/null 2>&1 || relay_apt+=(openssh-client)
  command -v tmux >/dev/null 2>&1 || relay_apt+=(tmux)
  command -v python3 >/dev/null 2>&1 || relay_apt+=(python3)
  command -v Xvfb >/dev/null 2>&1 || relay_apt+=(xvfb)
  command -v xauth >/dev/null 2>&1 || relay_apt+=(xauth)
  command -v xdpyinfo >/dev/null 2>&1 || relay_apt+=(x11-utils)
  if ((${#relay_apt[@]})); then
    echo "setup: installing Debian packages for the relay's tests: ${relay_apt[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${relay_apt[@]}" >/dev/null
  fi
fi

# npm_pinned DIR PACKAGE VERSION: installs PACKAGE@VERSION into DIR unless that version is there.
npm_pinned() {
  local installed
  installed="$(node -p "try { require('$1/node_modules/$2/package.json').version } catch { '' }" 2>/dev/null)"
  if [ "$installed" != "$3" ]; then
    echo "setup: installing $2@$3 into $1" >&2
    mkdir -p "$1"
    npm install --prefix "$1" --no-audit --no-fund --loglevel=error "$2@$3" >/dev/null
  fi
}

# The SSO tests run a real OpenID provider: the certified `oidc-provider` package under the
# machine's Node (crates/testutil/idp), installed outside the repository where testutil looks.
if [ "${1:-}" = "--tests" ]; then
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing Debian packages for the SSO tests: nodejs npm" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  npm_pinned "${CODER_TEST_IDP_DIR:-$HOME/.cache/coder-rs/oidc-provider}" oidc-provider 9.13.3
fi

# The external auth tests clone and push through a real git server (crates/testutil's
# gitserver): nginx with fcgiwrap and git-http-backend, asking the OpenID provider above about
# every request; and OpenSSH's sshd with git-shell for `coder gitssh`. The tests run them as
# the current user from a temp directory; Debian's own services (nginx on :80, fcgiwrap's
# socket, sshd on :22) are not wanted.
if [ "${1:-}" = "--tests" ]; then
  git_server_apt=()
  [ -x /usr/sbin/sshd ] || git_server_apt+=(openssh-server)
  [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || git_server_apt+=(nginx)
  [ -x /usr/sbin/fcgiwrap ] || command -v fcgiwrap >/dev/null 2>&1 || git_server_apt+=(fcgiwrap)
  if ((${#git_server_apt[@]})); then
    echo "setup: installing Debian packages for the external auth tests: ${git_server_apt[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${git_server_apt[@]}" >/dev/null
    $sudo systemctl disable --now nginx fcgiwrap.socket fcgiwrap ssh >/dev/null 2>&1 || true
  fi
fi

# The API fuzzing test (crates/cli/tests/it/fuzz.rs) runs schemathesis, pinned, from a
# virtualenv outside the repository where the test looks.
if [ "${1:-}" = "--tests" ]; then
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "setup: installing Debian packages for the API fuzzing test: python3-venv" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  st_venv="${CODER_TEST_SCHEMATHESIS_VENV:-$HOME/.cache/coder-rs/schemathesis-venv}"
  st_version="4.32.5"
  if [ "$("$st_venv/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $st_version" ]; then
    echo "setup: installing schemathesis==$st_version into $st_venv" >&2
    python3 -m venv "$st_venv"
    "$st_venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$st_version" >/dev/null
  fi
fi

# The dashboard's browser tests drive Debian's chromium through chromium-driver (the driver
# pins that exact browser); fonts-liberation gives pages legible text in screenshots.
if [ "${1:-}" = "--tests" ]; then
  dashboard_apt=()
  command -v chromium >/dev/null 2>&1 || dashboard_apt+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || dashboard_apt+=(chromium-driver)
  [ -d /usr/share/fonts/truetype/liberation ] || dashboard_apt+=(fonts-liberation)
  if ((${#dashboard_apt[@]})); then
    echo "setup: installing Debian packages for the dashboard's browser tests: ${dashboard_apt[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${dashboard_apt[@]}" >/dev/null
  fi
fi

# The browser flow audits every page with axe-core (MPL-2.0, run only by the tests, never
# shipped), injected over WebDriver from an npm install outside the repository (Node and npm
# come from the SSO tests' step above).
if [ "${1:-}" = "--tests" ]; then
  npm_pinned "${CODER_TEST_AXE_DIR:-$HOME/.cache/coder-rs/axe-core}" axe-core 4.14.1
fi

# The relay's benchmarks (scripts/bench.sh) drive the OpenSSH client and hold OpenSSH's sshd
# on loopback as a baseline; the bench starts its own sshd on a free port, never the system's.
# The dashboard's benchmark times pages in Debian's chromium through chromium-driver.
if [ "${1:-}" = "--bench" ]; then
  bench_apt=()
  command -v ssh >/dev/null 2>&1 || bench_apt+=(openssh-client)
  [ -x /usr/sbin/sshd ] || bench_apt+=(openssh-server)
  command -v script >/dev/null 2>&1 || bench_apt+=(bsdutils)
  command -v chromium >/dev/null 2>&1 || bench_apt+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || bench_apt+=(chromium-driver)
  if ((${#bench_apt[@]})); then
    echo "setup: installing Debian packages for the benchmarks: ${bench_apt[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${bench_apt[@]}" >/dev/null
    $sudo systemctl disable --now ssh >/dev/null 2>&1 || true
  fi
fi

if ! command -v terraform >/dev/null 2>&1; then
  echo "setup: note: terraform is not on PATH; templates with the terraform provisioner will fail." >&2
  echo "setup: get it from https://developer.hashicorp.com/terraform/install (1.5 or newer)." >&2
fi
