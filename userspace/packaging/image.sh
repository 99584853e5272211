#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the nds-monitor container image from nothing, reproducibly, as an OCI archive: the
# static (musl) tools on an empty base, no image pulled from anywhere. The rootfs is assembled
# by hand and umoci turns it into one layer and an image configuration; every input that could
# differ between two builds of the same tree is fixed: timestamps (SOURCE_DATE_EPOCH, default
# the last commit's time), file order (umoci walks the tree in name order; the archive is
# written sorted), owners (root:root, numeric), modes, and the paths compiled into the
# binaries (remapped). Prints the manifest digest, the archive's path and sizes.
#
# Why umoci: it builds an OCI layout straight from a directory, without a daemon, a container
# storage or a base image, and records exactly what the directory holds (file capabilities
# included); podman then runs the archive and skopeo copies it to a registry (kubernetes.rst).
#
# The binaries are static-tools.sh's, the release build the guest and the input tests run too
# (STATIC_TOOLS_TARGET says where it goes).
#
# Usage: userspace/packaging/image.sh [--output FILE]   (default build/nds-monitor-image.tar)
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=qemu/env.sh
source "$root/qemu/env.sh"

output="$root/build/nds-monitor-image.tar"
while [ $# -gt 0 ]; do
    case "$1" in
    --output)
        output="$(realpath -m "$2")"
        shift 2
        ;;
    *)
        echo "usage: $0 [--output FILE]" >&2
        exit 2
        ;;
    esac
done

for tool in umoci setcap; do
    command -v "$tool" >/dev/null || {
        echo "$tool is not installed (make deps installs it)" >&2
        exit 1
    }
done

# The image's name and version: the tools' version, as in the Debian package.
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/userspace/Cargo.toml" | head -n1)"
name=nds-monitor
# The image's user: not root, and no name in it (the image has no /etc/passwd).
user=65532
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
revision="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"

work="$root/build/image"
mkdir -p "$work"

# The binaries: the static, stripped, path-remapped release build of the tools.
bin="$(bash "$root/userspace/packaging/static-tools.sh")"

# The rootfs, by hand: three programs and the configuration AWS's DaemonSet names.
layout="$work/oci"
bundle="$work/bundle"
rm -rf "$layout" "$bundle"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci unpack --image "$layout:$version" "$bundle"
rootfs="$bundle/rootfs"
install -D -m 0755 "$bin/nds-entrypoint" "$rootfs/opt/bin/entrypoint.sh"
install -D -m 0755 "$bin/nds-monitor" "$rootfs/opt/bin/nds-monitor"
install -D -m 0755 "$bin/nds-top" "$rootfs/opt/bin/nds-top"
install -D -m 0644 "$root/userspace/packaging/image/neuron-monitor.conf" \
    "$rootfs/opt/aws/neuron/bin/neuron-monitor.conf"
chown -R 0:0 "$rootfs"
find "$rootfs" -type d -exec chmod 0755 {} +
# Permitted, not effective: the entrypoint raises it into the ambient set for nds-monitor,
# and starts without it where the pod does not grant it (entrypoint's capability.rs). After
# chown, which clears file capabilities.
setcap cap_perfmon=p "$rootfs/opt/bin/entrypoint.sh"
find "$rootfs" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

labels=(
    "org.opencontainers.image.title=$name"
    "org.opencontainers.image.description=neuron-monitor for the Neuron DataStore: nds-monitor serve (Prometheus /metrics, /healthz) and nds-top, static, with /opt/bin/entrypoint.sh"
    "org.opencontainers.image.version=$version"
    "org.opencontainers.image.revision=$revision"
    "org.opencontainers.image.created=$created"
    "org.opencontainers.image.licenses=GPL-2.0-only"
    "org.opencontainers.image.vendor=neuron-ds"
    "org.opencontainers.image.documentation=Documentation/kubernetes.rst"
)
config_args=()
for label in "${labels[@]}"; do
    config_args+=(--config.label "$label" --manifest.annotation "$label")
done
umoci repack --image "$layout:$version" --history.created "$created" \
    --history.created_by "userspace/packaging/image.sh" "$bundle"
umoci config --image "$layout:$version" --created "$created" \
    --history.created "$created" --history.created_by "userspace/packaging/image.sh" \
    --author neuron-ds --os linux --architecture amd64 \
    --config.user "$user:$user" --config.workingdir / \
    --config.entrypoint /opt/bin/entrypoint.sh \
    --config.cmd --port --config.cmd 8000 \
    --config.cmd --neuron-monitor-config --config.cmd /opt/aws/neuron/bin/neuron-monitor.conf \
    --config.exposedports 8000/tcp "${config_args[@]}"
umoci gc --layout "$layout"
rm -rf "$bundle"

# The archive: the layout's files in name order, one owner, one time, fixed modes.
mkdir -p "$(dirname "$output")"
tar --create --file "$output.tmp" --directory "$layout" --sort=name --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    --mode='u=rwX,go=rX' oci-layout index.json blobs
mv "$output.tmp" "$output"

manifest="$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$layout/index.json")"
layer_bytes="$(du -cb "$layout"/blobs/sha256/* | tail -n1 | cut -f1)"
rootfs_bytes="$(stat -c %s "$bin/nds-entrypoint" "$bin/nds-monitor" "$bin/nds-top" \
    "$root/userspace/packaging/image/neuron-monitor.conf" | awk '{ n += $1 } END { print n }')"
echo "image $name:$version"
echo "manifest digest $manifest"
echo "archive $output ($(stat -c %s "$output") bytes, sha256 $(sha256sum "$output" | cut -d' ' -f1))"
echo "blobs $layer_bytes bytes compressed; files $rootfs_bytes bytes uncompressed"
