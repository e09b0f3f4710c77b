#!/usr/bin/env bash
# Runs every check and test of the workspace: formatting, clippy, and all tests (unit,
# integration against a throwaway PostgreSQL cluster, end-to-end through the real binaries).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests

# One throwaway PostgreSQL cluster for the whole run (testutil starts it on first use).
CODER_TEST_PG_DIR="$(mktemp -d /tmp/coder-rs-test-pg.XXXXXX)"
export CODER_TEST_PG_DIR
cleanup() {
  pid_file="$CODER_TEST_PG_DIR/data/postmaster.pid"
  if [ -f "$pid_file" ]; then
    pid="$(head -n 1 "$pid_file")"
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$CODER_TEST_PG_DIR" "$CODER_TEST_PG_DIR.lock"
}
trap cleanup EXIT

cargo fmt --all --check
# The crates' layering (docs/architecture.md, "Crates") and the document's graph of it.
python3 scripts/crate-graph.py --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --profile "${NEXTEST_PROFILE:-default}"
