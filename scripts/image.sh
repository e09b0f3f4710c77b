#!/usr/bin/env bash
# Builds the OCI image of `coder`, daemonless (buildah) and offline: no base image is pulled.
# The root filesystem is assembled from scratch: the `coder` binary at /opt/coder, terraform,
# the C libraries the binaries link (found with ldd), CA certificates, a static busybox for
# /bin/sh (terraform's local-exec and agent init scripts need a shell), and a non-root user
# `coder` (uid 1000) whose HOME and cache directory are writable.
#
#   scripts/image.sh [--tag NAME] [--terraform PATH] [--binary PATH] [--source URL] [--zstd-level N]
#
#   --tag NAME        image name (default localhost/coder:latest)
#   --terraform PATH  terraform to put in the image (default: `terraform` from PATH)
#   --binary PATH     use this `coder` binary instead of building the release one
#   --source URL      the org.opencontainers.image.source label (default: git remote origin)
#   --zstd-level N    level of /opt/coder.zst, the copy agents download (default 19)
#
# Without --binary the release binary is built (cargo build --release). The binary is stripped
# in a copy, and compressed beside it for agent downloads (scripts/compress-binary.sh).
# Storage and configuration are podman's/buildah's usual ones (CONTAINERS_CONF,
# CONTAINERS_STORAGE_CONF apply); see docs/container.md.
set -euo pipefail
cd "$(dirname "$0")/.."

tag="localhost/coder:latest"
terraform=""
binary=""
source_url=""
zstd_level=19
while (($#)); do
  case "$1" in
    --tag) tag="${2:?--tag needs a value}"; shift 2 ;;
    --terraform) terraform="${2:?--terraform needs a value}"; shift 2 ;;
    --binary) binary="${2:?--binary needs a value}"; shift 2 ;;
    --source) source_url="${2:?--source needs a value}"; shift 2 ;;
    --zstd-level) zstd_level="${2:?--zstd-level needs a value}"; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

scripts/setup.sh --image

if [ -z "$terraform" ]; then
  terraform="$(command -v terraform || true)"
  [ -n "$terraform" ] || { echo "image.sh: terraform is not on PATH; pass --terraform PATH" >&2; exit 1; }
fi
[ -x "$terraform" ] || { echo "image.sh: $terraform is not an executable" >&2; exit 1; }
if [ -z "$binary" ]; then
  nice cargo build --release --locked -p cli --bin coder
  binary="target/release/coder"
fi
[ -x "$binary" ] || { echo "image.sh: $binary is not an executable" >&2; exit 1; }
busybox=/bin/busybox
if [ ! -x "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
  echo "image.sh: $busybox is not the static busybox (Debian: busybox-static)" >&2
  exit 1
fi

work="$(mktemp -d /tmp/coder-image.XXXXXX)"
ctr=""
cleanup() {
  [ -z "$ctr" ] || buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
root="$work/root"

# Debian's merged /usr layout, so library paths from ldd resolve the same way in the image.
mkdir -p "$root"/{usr/bin,usr/lib,usr/lib64,opt,etc/ssl/certs,tmp,home/coder/.cache/coder,home/coder/.config/coderv2}
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
ln -s bin "$root/usr/sbin"
ln -s bin "$root/sbin"
chmod 1777 "$root/tmp"

strip --strip-all -o "$root/opt/coder" "$binary"
scripts/compress-binary.sh --level "$zstd_level" "$root/opt/coder"
install -m 0755 "$terraform" "$root/usr/bin/terraform"
install -m 0755 "$busybox" "$root/usr/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$root/usr/bin/$applet" ] || ln -s busybox "$root/usr/bin/$applet"
done

# Every shared object a binary needs, at the path the dynamic linker looks for it.
for exe in "$root/opt/coder" "$root/usr/bin/terraform"; do
  # ldd fails on a static binary (terraform is one): nothing to copy then.
  { ldd "$exe" 2>/dev/null || true; } | awk '/=> \// { print $3 } /^\t\// { print $1 }' | while read -r lib; do
    real="$(readlink -f "$lib")"
    dest="$root$(readlink -f "$(dirname "$lib")")/$(basename "$lib")"
    mkdir -p "$(dirname "$dest")"
    [ -e "$dest" ] || cp "$real" "$dest"
  done
done

cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
coder:x:1000:1000:coder:/home/coder:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
coder:x:1000:
nogroup:x:65534:
EOF
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
chown -R 1000:1000 "$root/home/coder"
chmod 0755 "$root/home/coder"

version="$("$root/opt/coder" --version | awk '{ print $NF }')"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
# Where the source is: --source, else the checkout's remote (a local build may have none).
[ -n "$source_url" ] || source_url="$(git config --get remote.origin.url 2>/dev/null || echo unknown)"

tar --numeric-owner -C "$root" -cf "$work/root.tar" .
ctr="$(buildah from scratch)"
buildah add --quiet "$ctr" "$work/root.tar" / >/dev/null
buildah config \
  --entrypoint '["/opt/coder"]' \
  --cmd server \
  --port 3000 \
  --user 1000:1000 \
  --workingdir /home/coder \
  --env HOME=/home/coder \
  --env USER=coder \
  --env PATH=/usr/local/bin:/usr/bin:/bin \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --env CODER_HTTP_ADDRESS=0.0.0.0:3000 \
  --stop-signal SIGTERM \
  --label org.opencontainers.image.title=coder \
  --label "org.opencontainers.image.description=coder-rs: coder server, provisioner daemon, agent and CLI, with terraform" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.source=$source_url" \
  --label org.opencontainers.image.licenses=AGPL-3.0-only \
  --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$ctr"
buildah commit --quiet --rm "$ctr" "$tag" >/dev/null
ctr=""
echo "image.sh: built $tag ($(du -sb "$root" | cut -f1) bytes unpacked; coder $version, $("$terraform" version -json 2>/dev/null | awk -F'"' '/terraform_version/ { print "terraform " $4 }'))"
