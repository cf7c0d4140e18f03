#!/usr/bin/env bash
# Builds rlproxy's container image as an OCI image layout, without a
# container engine: the static binary and the CA bundle in an otherwise
# empty file system,
# assembled with umoci (Debian: apt-get install umoci) and readable by
# skopeo (`skopeo inspect oci:DIR:TAG`, `skopeo copy oci:DIR:TAG
# docker://REGISTRY/rlproxy:TAG` to push it). Those with an engine can use
# the Dockerfile instead; both run the binary as user 65532 with
# ENTRYPOINT /rlproxy and the same CMD.
#
#   scripts/image.sh [DIR [TAG]]     default: dist/oci and the chart's appVersion
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-dist/oci}
tag=${2:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' deploy/helm/rlproxy/Chart.yaml)}
command -v umoci >/dev/null || { echo "umoci not found: apt-get install umoci" >&2; exit 1; }
# As root, umoci records the owners the files have; otherwise (--rootless)
# it reads them from the user.rootlesscontainers attribute.
rootless=--rootless
[ "$(id -u)" = 0 ] && rootless=
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X main.version=$tag -X main.commit=$commit -X main.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  -o "$work/rlproxy" ./cmd/rlproxy

rm -rf "$dir"
umoci init --layout "$dir"
umoci new --image "$dir:$tag"
umoci unpack $rootless --image "$dir:$tag" "$work/bundle" >/dev/null
install -m 0755 "$work/rlproxy" "$work/bundle/rootfs/rlproxy"
# The CA bundle Go reads on Linux, so https:// upstreams and valkey.tls
# without a ca_file verify against the usual roots, as in the Dockerfile's
# distroless base.
cas=/etc/ssl/certs/ca-certificates.crt
[ -s "$cas" ] || { echo "$cas not found: apt-get install ca-certificates" >&2; exit 1; }
install -D -m 0644 "$cas" "$work/bundle/rootfs$cas"
mkdir -p "$work/bundle/rootfs/etc/rlproxy" "$work/bundle/rootfs/tmp"
chmod 1777 "$work/bundle/rootfs/tmp"
# /var/lib/rlproxy, the state directory (tls.acme's certificates), owned by
# the user the image runs as: a volume mounted there starts with this owner,
# where a directory the engine creates would belong to root.
state="$work/bundle/rootfs/var/lib/rlproxy"
install -d -m 0700 "$state"
if [ -z "$rootless" ]; then
  chown 65532:65532 "$state"
else
  # The attribute is a protobuf message: uid (field 1) and gid (field 2), 65532 each.
  command -v python3 >/dev/null || { echo "python3 is needed to set the state directory's owner without root" >&2; exit 1; }
  python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.rootlesscontainers", bytes.fromhex("08fcff0310fcff03"))' "$state"
fi
umoci repack --image "$dir:$tag" "$work/bundle"
umoci config --image "$dir:$tag" \
  --author rlproxy --os linux --architecture "$(go env GOARCH)" \
  --config.user 65532:65532 --config.workingdir / \
  --config.entrypoint /rlproxy \
  --config.cmd -config --config.cmd /etc/rlproxy/rlproxy.yaml \
  --config.cmd -listen --config.cmd :8080 --config.cmd -admin-listen --config.cmd :9090 \
  --config.exposedports 8080/tcp --config.exposedports 9090/tcp \
  --config.label "org.opencontainers.image.version=$tag" \
  --config.label "org.opencontainers.image.revision=$commit"
umoci gc --layout "$dir"
echo "$dir:$tag"
