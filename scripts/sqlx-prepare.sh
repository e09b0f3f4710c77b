#!/usr/bin/env bash
# Refreshes crates/coderd-store/.sqlx/ (the compile-time query metadata of the one crate with SQL) against a scratch database migrated to the
# current schema. Needs sqlx-cli: `cargo install sqlx-cli --no-default-features --features postgres,rustls`.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(mktemp -d /tmp/coder-rs-sqlx.XXXXXX)"
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
run=()
if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; run=(runuser -u postgres --); fi
"${run[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-c listen_addresses='' -k $dir -c fsync=off" -l "$dir/log" -w start >/dev/null
trap '"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null; rm -rf "$dir"' EXIT
export DATABASE_URL="postgres://postgres@$(printf %s "$dir" | sed 's|/|%2F|g')/postgres"
sqlx migrate run --source crates/coderd-store/migrations
cd crates/coderd-store
SQLX_OFFLINE=false cargo sqlx prepare -- --all-targets
