#!/usr/bin/env bash
# Builds a second copy of the module under another name, neuron_ds_twin.ko, from the same
# sources (the DKMS source tree with the crate root renamed), so that a guest test can load
# two instances side by side the way the module runs next to the original Neuron driver:
# each with its own class_name and node_name.
#
# Usage: tests/twin-module.sh VARIANT OUT.ko
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
variant="$1" out="$2"
# shellcheck source=qemu/env.sh
source "$root/qemu/env.sh"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
make -s -C "$root" dkms-source DESTDIR="$stage/tree" >/dev/null
src="$(echo "$stage"/tree/usr/src/neuron-ds-*)"
mv "$src/rust/neuron_ds.rs" "$src/rust/neuron_ds_twin.rs"
sed -i 's|rust/neuron_ds\.o|rust/neuron_ds_twin.o|' "$src/Kbuild"
kdir="$(bash "$root/qemu/kernel.sh" --dir "$variant")"
MAKE=make bash "$src/packaging/kbuild.sh" "$kdir" MO="$stage/out" modules >"$stage/build.log" 2>&1 || {
    cat "$stage/build.log" >&2
    exit 1
}
cp "$stage/out/rust/neuron_ds_twin.ko" "$out"
