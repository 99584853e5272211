#!/usr/bin/env bash
# Builds the guest initramfs: static busybox, qemu/guest-init as /init, the module, its
# parameters, and a work directory whose run.sh is what the guest runs after insmod.
#
# Usage: qemu/initramfs.sh OUT.cpio.gz MODULE.ko|- WORKDIR|- [MODULE PARAMS...]
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="$1" module="$2" workdir="$3"
shift 3

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
# mktemp makes the directory 0700; as the guest's / it must let every user reach /dev.
chmod 0755 "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,work}
cp /bin/busybox "$root/bin/busybox"
install -m 0755 "$here/guest-init" "$root/init"
if [ "$module" != - ]; then
    cp "$module" "$root/neuron_ds.ko"
    printf '%s\n' "$*" >"$root/module.params"
fi
if [ "$workdir" != - ]; then
    cp -a "$workdir"/. "$root/work/"
fi
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$out"
