#!/usr/bin/env sh
# Starts the Coder agent of a workspace: downloads the coder binary for this platform from the
# deployment and runs `coder agent`. The coder/coder provider fills in the deployment's URL and
# the agent's authentication type; CODER_AGENT_TOKEN comes from the template.
#
# The binary is kept in the user's cache directory. The next start sends the hash of the kept
# copy and the deployment answers 304 while it still serves that binary: no download at all.
set -eu

binary_url="${ACCESS_URL}bin/@BINARY@"
cache_dir="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/coder"
if ! mkdir -p "$cache_dir" 2>/dev/null || [ ! -w "$cache_dir" ]; then
	cache_dir="$(mktemp -d "${TMPDIR:-/tmp}/coder.XXXXXX")"
fi
binary="$cache_dir/@BINARY@"
# Downloads land next to the binary and replace it by rename: an agent already running from the
# old file, or another workspace starting from the same cache, is never disturbed.
partial="$(mktemp "$cache_dir/.@BINARY@.XXXXXX")"
trap 'rm -f "$partial"' EXIT

cached_hash=""
if [ -x "$binary" ] && command -v sha256sum >/dev/null 2>&1; then
	cached_hash="$(sha256sum "$binary" | cut -d ' ' -f 1)"
fi

# Prints the HTTP status; 200 leaves the binary in $partial.
download() {
	if command -v curl >/dev/null 2>&1; then
		if [ -n "$cached_hash" ]; then
			curl -fsSL --compressed --connect-timeout 10 --max-time 300 -o "$partial" \
				-H "If-None-Match: W/\"$cached_hash\"" -w '%{http_code}' "$binary_url"
		else
			curl -fsSL --compressed --connect-timeout 10 --max-time 300 -o "$partial" \
				-w '%{http_code}' "$binary_url"
		fi
	else
		wget -q -T 60 -O "$partial" "$binary_url" && echo 200
	fi
}
if ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; then
	echo "error: the Coder agent needs curl or wget to download $binary_url" >&2
	exit 1
fi

# The deployment may not be reachable yet (a network still coming up): keep trying, waiting
# twice as long after each failure, at most 30 seconds.
delay=1
until status="$(download)"; do
	echo "downloading $binary_url failed; retrying in ${delay}s" >&2
	sleep "$delay"
	delay=$((delay * 2))
	if [ "$delay" -gt 30 ]; then
		delay=30
	fi
done
if [ "$status" = 304 ]; then
	echo "the cached agent binary $binary is current (sha256 $cached_hash)" >&2
	rm -f "$partial"
else
	chmod +x "$partial"
	mv -f "$partial" "$binary"
fi

export CODER_AGENT_AUTH="${AUTH_TYPE}"
export CODER_AGENT_URL="${ACCESS_URL}"
exec "$binary" agent
