#!/usr/bin/env bash
# `make stress` / `make fuzz-ioctl` / `make faults`: the full forms of the reliability
# campaigns (the short forms run inside `make test` and `make test-debug`). Builds the guest
# binaries, boots the guest with two devices and runs one campaign; its figures are printed,
# and its status (or a kernel complaint on the console) is the exit status.
#
# Usage: tests/campaign.sh stress|fuzz|faults
# Env:   VARIANT (base|debug|cov), CYCLES, PROCESSES, READERS (stress), CALLS, SEED (fuzz;
#        default: a fresh random seed, printed), FAULTS_SHORT=1 and UNLOAD_CYCLES (faults,
#        default 100), QEMU_SMP, QEMU_TIMEOUT (default 7200 s)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
campaign="${1:-}"
variant="${VARIANT:-base}"
params="devices=2 cores_per_device=2"
cd "$root"

case "$campaign" in
stress)
    cmd="/work/bin/ds-stress --cycles ${CYCLES:-1000000} --processes ${PROCESSES:-1024} --readers ${READERS:-2}"
    ;;
fuzz)
    seed="${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
    cmd="/work/bin/ds-fuzz --calls ${CALLS:-1000000} --seed $seed"
    ;;
faults)
    # Every failure point of the module, then unloading under load; both run, both count.
    # The metrics period is stepped too: it must end every few hundred milliseconds, not at
    # the default 150 s.
    params="$params metrics_period_ms=400"
    cmd="/work/bin/ds-faults${FAULTS_SHORT:+ --short}; faults=\$?; /work/bin/ds-unload --cycles ${UNLOAD_CYCLES:-100}; unload=\$?; [ \$faults -eq 0 ] && [ \$unload -eq 0 ]"
    ;;
*)
    echo "usage: tests/campaign.sh stress|fuzz|faults" >&2
    exit 2
    ;;
esac

if [ "$variant" != base ]; then
    # The debug and cov kernels have kmemleak: nothing the module allocated may be left
    # unreferenced.
    cmd="$cmd; rc=\$?; /work/bin/ds-kmemleak || rc=1; exit \$rc"
fi

work="$root/build/campaign-$variant"
bash tests/guest/build.sh "$work" >/dev/null
echo "campaign: $cmd ($variant kernel)"
status=0
MODULE_PARAMS="$params" QEMU_TIMEOUT="${QEMU_TIMEOUT:-7200}" \
    bash qemu/qemu-run.sh "$variant" "$work" "$cmd" || status=$?
if [ "$status" -ne 0 ] && [ "$campaign" = fuzz ]; then
    echo "campaign: FAIL with seed $seed (reproduce: make fuzz-ioctl SEED=$seed CALLS=${CALLS:-1000000})" >&2
fi
exit "$status"
