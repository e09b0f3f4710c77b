#!/usr/bin/env sh
# Starts the Coder agent of a workspace: downloads the coder binary for this platform from the
# deployment and runs `coder agent`. The coder/coder provider fills in the deployment's URL and
# the agent's authentication type; CODER_AGENT_TOKEN comes from the template.
set -eu

binary_url="${ACCESS_URL}bin/@BINARY@"
binary_dir="$(mktemp -d "${TMPDIR:-/tmp}/coder.XXXXXX")"
binary="$binary_dir/coder"

download() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --compressed --connect-timeout 10 --max-time 300 -o "$binary" "$binary_url"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -T 60 -O "$binary" "$binary_url"
	else
		echo "error: the Coder agent needs curl or wget to download $binary_url" >&2
		exit 1
	fi
}

# The deployment may not be reachable yet (a network still coming up): keep trying, waiting
# twice as long after each failure, at most 30 seconds.
delay=1
until download; do
	echo "downloading $binary_url failed; retrying in ${delay}s" >&2
	sleep "$delay"
	delay=$((delay * 2))
	if [ "$delay" -gt 30 ]; then
		delay=30
	fi
done
chmod +x "$binary"

export CODER_AGENT_AUTH="${AUTH_TYPE}"
export CODER_AGENT_URL="${ACCESS_URL}"
exec "$binary" agent
