#!/usr/bin/env bash
# A longer API fuzzing run than the test suite's: the same test (crates/cli/tests/it/fuzz.rs,
# a real `coder server` fuzzed by schemathesis as a member and as an owner, with the checks and
# exclusions of crates/cli/tests/fuzz/schemathesis.toml), with more cases and more time.
#
#   scripts/fuzz.sh [--examples N] [--minutes M] [schemathesis flags...]
#
# Defaults: 200 cases per operation, 15 minutes per run (so up to ~30 minutes in all). Further
# flags go to schemathesis, e.g. `--seed 123` to replay a run or `--include-path-regex templates`
# to focus. Reports: target/tmp/fuzz/schemathesis-{member,owner}.log.
set -euo pipefail
cd "$(dirname "$0")/.."

examples=200
minutes=15
extra=()
while (($#)); do
  case "$1" in
    --examples) examples="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done

scripts/setup.sh --tests
export CODER_FUZZ_MAX_EXAMPLES="$examples"
export CODER_FUZZ_MAX_TIME="$((minutes * 60))"
export CODER_FUZZ_ARGS="${extra[*]:-}"
# `cargo test` rather than nextest: the suite's profile ends a test after five minutes.
exec cargo test -p cli --test it --locked -- --exact fuzz::schemathesis_finds_nothing --nocapture
