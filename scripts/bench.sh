#!/usr/bin/env bash
# Builds `coder` and `coder-bench` in release mode and runs the benchmark suite (see
# crates/bench/README.md). The full suite (~7 min) writes its rows into docs/benchmarks.md;
# `--quick` (< 2 min) only prints. Other arguments go to coder-bench (--json PATH,
# --no-graphile, --work-dir DIR, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "bench: note: node/npm are missing, so the graphile-worker baseline will be skipped" >&2
  echo "bench: (Debian: apt-get install nodejs npm)" >&2
fi

docs=(--write-docs docs/benchmarks.md)
for arg in "$@"; do
  case "$arg" in --quick | --tiny) docs=() ;; esac
done

cargo build --release --locked -p cli --bin coder -p bench --bin coder-bench
exec target/release/coder-bench ${docs[@]+"${docs[@]}"} "$@"
