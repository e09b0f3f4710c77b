#!/usr/bin/env bash
# Compresses a `coder` binary into BINARY.zst beside it: the copy `coder server` sends, as is, to
# workspaces whose agent download accepts zstd (crates/coderd-core/src/agents/binary.rs). Level 19
# with a 128 MiB window takes about 40 s of CPU once per build and makes a release binary about
# 4.5x smaller; the level 3 a server can afford per download makes it 3.3x smaller.
#
#   scripts/compress-binary.sh [--level N] BINARY
#
# Does nothing when BINARY.zst is newer than BINARY. The server checks the copy decompresses to
# its own executable and ignores it otherwise, so a stale one costs nothing but the bytes.
set -euo pipefail

level=19
while (($#)); do
  case "$1" in
    --level) level="${2:?--level needs a value}"; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compress-binary.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
binary="${1:?usage: scripts/compress-binary.sh [--level N] BINARY}"
[ -f "$binary" ] || { echo "compress-binary.sh: $binary does not exist" >&2; exit 1; }
command -v zstd >/dev/null 2>&1 || { echo "compress-binary.sh: zstd is missing (scripts/setup.sh installs it)" >&2; exit 1; }

out="$binary.zst"
[ "$out" -nt "$binary" ] && exit 0
echo "compressing $binary for agent downloads (zstd -$level, once per build)" >&2
# Written aside and renamed, so a server never reads half a file.
zstd -q -f -T0 --ultra "-$level" --long=27 "$binary" -o "$out.partial"
# zstd gives its output the input's modification time; the copy must read as newer.
touch "$out.partial"
mv -f "$out.partial" "$out"
