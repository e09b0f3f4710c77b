#!/usr/bin/env bash
# Builds `coder` and `coder-bench` in release mode and runs the benchmark suite (see
# crates/bench/README.md). The full suite (~10 min) writes its rows into docs/benchmarks.md;
# `--quick` (< 2 min) only prints. Other arguments go to coder-bench (--json PATH,
# --no-graphile, --work-dir DIR, `--only relay`, `--only apps`, `--only uploads`,
# `--only dashboard` or `--only jobs` (P1, P2, P2b and their baselines) for one scenario, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "bench: note: node/npm are missing, so the graphile-worker baseline will be skipped" >&2
  echo "bench: (Debian: apt-get install nodejs npm)" >&2
fi

docs=(--write-docs docs/benchmarks.md)
for arg in "$@"; do
  case "$arg" in --quick | --tiny | --only | --only=*) docs=() ;; esac
done

# P8 holds thousands of agent connections, a socket each in coder-bench and in coder server
# (which inherits this limit); coder-bench also raises its soft limit up to the hard one.
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 8192 ]; then
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fi

cargo build --release --locked -p cli --bin coder -p bench --bin coder-bench
# What a release ships for agent downloads (P11b measures it).
scripts/compress-binary.sh target/release/coder
exec target/release/coder-bench ${docs[@]+"${docs[@]}"} "$@"
