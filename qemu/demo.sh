#!/usr/bin/env bash
# `make demo`: installs what is missing, builds the module and the userspace tools, boots the
# guest with two Neuron devices, and runs qemu/demo-guest.sh there: producers (one of them
# killed), the monitor's JSON and Prometheus output, two frames of the top view, and the
# kernel's aggregated totals next to what the producers reported.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=qemu/env.sh
source qemu/env.sh

step() { printf '\n### %s\n' "$*"; }

step "dependencies, kernel (cached after the first build) and module"
# Only what the demo needs: no packaging, image or cluster tools, one kernel release.
make -s module DEPS_SCOPE=--demo

step "userspace tools for the guest ($GUEST_TARGET)"
static="$(bash userspace/packaging/static-tools.sh)"
work="$root/build/demo-work"
rm -rf "$work" && mkdir -p "$work/bin"
for tool in nds-loadgen nds-monitor nds-top; do
    cp "$static/$tool" "$work/bin/"
done
install -m 0755 qemu/demo-guest.sh "$work/demo.sh"

step "booting the guest (insmod neuron_ds.ko devices=2)"
log="$root/build/demo.log"
status=0
# The module as it is installed: without its KUnit suites.
MODULE_KUNIT=0 MODULE_PARAMS='devices=2' bash qemu/qemu-run.sh base "$work" 'sh /work/demo.sh' >"$log" 2>&1 || status=$?
sed -n '/^NEURON-DS-RUN-BEGIN/,/^NEURON-DS-RUN-END/{/^NEURON-DS-RUN-/d;p}' "$log"
if [ "$status" -ne 0 ]; then
    echo
    echo "demo: FAILED (status $status); the whole console is in $log" >&2
    grep '^boot.sh:' "$log" >&2 || true
    exit "$status"
fi
echo
echo "demo: done; the whole console is in $log"
