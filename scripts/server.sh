#!/usr/bin/env bash
# Runs `coder server` with its embedded PostgreSQL (built in release mode). Extra arguments go to
# `coder server`, e.g. `scripts/server.sh --http-address 0.0.0.0:3000`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p cli --bin coder
scripts/compress-binary.sh target/release/coder
exec target/release/coder server "$@"
