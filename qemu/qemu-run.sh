#!/usr/bin/env bash
# `make qemu-run EXTRA=<dir> CMD='<command>'`: boots the guest with the module loaded,
# copies EXTRA's files into the guest's /work, runs CMD there (after insmod), and exits
# with CMD's status. The console scan of qemu/boot.sh still applies: a kernel complaint
# fails the run even when CMD succeeded. MODULE_PARAMS='...' are passed to insmod. The module
# carries its KUnit suites (they run at insmod) unless MODULE_KUNIT=0.
#
# Usage: [KVER=7.2|7.3] qemu/qemu-run.sh VARIANT EXTRA_DIR|'' CMD
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=qemu/env.sh
source "$root/qemu/env.sh"
variant="${1:-base}" extra="${2:-}" cmd="${3:-}"
[ -n "$cmd" ] || {
    echo "usage: make qemu-run [VARIANT=debug] [EXTRA=<dir>] CMD='<command>'" >&2
    exit 2
}
cd "$root"
# One harness run at a time: runs share build/ and the two cores.
mkdir -p build && exec 8>build/.harness.lock && flock 8
make -s module VARIANT="$variant" KUNIT="${MODULE_KUNIT:-1}"

out="$root/build/qemu-run-$variant$KVER_SUFFIX"
rm -rf "$out" && mkdir -p "$out/work"
[ -z "$extra" ] || cp -a "$extra"/. "$out/work/"
printf '#!/bin/sh\necho "NEURON-DS-RUN-BEGIN"\n%s\nrc=$?\necho "NEURON-DS-RUN-END rc=$rc"\nexit $rc\n' \
    "$cmd" >"$out/work/run.sh"
chmod +x "$out/work/run.sh"
# shellcheck disable=SC2086
bash qemu/initramfs.sh "$out/initramfs.cpio.gz" "build/module-$variant$KVER_SUFFIX/rust/neuron_ds.ko" "$out/work" \
    ${MODULE_PARAMS:-}
boot_status=0
bash qemu/boot.sh "$(bash qemu/kernel.sh --dir "$variant")" "$out/initramfs.cpio.gz" "$out/console.log" ||
    boot_status=$?
cmd_status="$(sed -n 's/^NEURON-DS-RUN-END rc=\([0-9]*\)$/\1/p' "$out/console.log" | tail -n1)"
# CMD's own failure status wins; a kernel complaint or a lost guest is 1.
if [ -n "$cmd_status" ] && [ "$cmd_status" -ne 0 ]; then
    exit "$cmd_status"
fi
exit "$boot_status"
