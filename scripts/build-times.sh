#!/usr/bin/env bash
# Compares build times of two revisions on this machine, in one run (docs/benchmarks.md,
# "Build times"): a clean release build of the workspace each, then incremental debug
# rebuilds after an edit to one API handler, one store query file and one dashboard template,
# the two revisions alternating edit by edit.
#
#   scripts/build-times.sh BASE NEW [REPS]      (REPS incremental rebuilds per edit, default 3)
#
# Each revision is built in its own detached worktree with its own target directory under
# $BUILD_TIMES_DIR (default: a new directory in /tmp), removed at the end. Nothing else should
# run meanwhile: two cores are shared by everything.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BASE NEW [REPS]" >&2; exit 2; }
base=$1 new=$2 reps=${3:-3}
root=${BUILD_TIMES_DIR:-$(mktemp -d /tmp/coder-rs-build-times.XXXXXX)}
repo=$PWD
export SQLX_OFFLINE=true CARGO_TERM_COLOR=never

cleanup() {
  for side in base new; do
    [ -d "$root/$side" ] && git -C "$repo" worktree remove --force "$root/$side" >/dev/null 2>&1
  done
  rm -rf "$root"
}
trap cleanup EXIT

for side in base new; do
  rev=${!side}
  git worktree add --detach "$root/$side" "$rev" >/dev/null 2>&1
done

# Seconds a command takes, to a tenth.
timed() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "build-times: failed: $*" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}

# The file of an edit in a revision's layout (the crates moved between revisions).
edit_file() {
  local dir=$1 what=$2 candidate
  case $what in
    api) set -- crates/coderd-api/src/workspaces.rs crates/coderd/src/http/workspaces.rs ;;
    store) set -- crates/coderd-store/src/workspaces.rs crates/coderd/src/store/workspaces.rs ;;
    template) set -- crates/dashboard/templates/workspace.html ;;
  esac
  for candidate in "$@"; do
    [ -f "$dir/$candidate" ] && { echo "$candidate"; return; }
  done
  echo "build-times: no $what file in $dir" >&2
  exit 1
}

# An edit that changes the file's content but not what it means.
probe_line() {
  case $1 in
    *.html) echo "{# build-times probe $2 #}" ;;
    *) echo "// build-times probe $2" ;;
  esac
}

build() { (cd "$root/$1" && CARGO_TARGET_DIR="$root/$1/target" timed cargo "${@:2}"); }

echo "# build times: base $(git rev-parse --short "$base"), new $(git rev-parse --short "$new"), $(nproc) cores, $(date -u +%FT%TZ)"
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for side in base new; do
  echo "clean-release $side $(build "$side" build --release --workspace --locked)"
done
for side in base new; do
  build "$side" build --workspace --locked >/dev/null
done
for what in api store template; do
  for rep in $(seq 1 "$reps"); do
    for side in base new; do
      file=$(edit_file "$root/$side" "$what")
      probe_line "$file" "$rep" >> "$root/$side/$file"
      echo "incremental-$what $side $(build "$side" build --workspace --locked)"
    done
  done
  for side in base new; do
    git -C "$root/$side" checkout -- .
    build "$side" build --workspace --locked >/dev/null
  done
done
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
