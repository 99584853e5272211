#!/usr/bin/env bash
# `make coverage`: the campaigns on the cov kernel (KCOV, only the module instrumented), each
# collecting the module code its processes reached, and the code the module's workers ran for
# them (remote coverage, ds-kcov-remote), then how much of the module that is: per campaign
# and combined, out of the module's instrumentation points outside KUnit tests, with the
# functions never reached and why (tests/coverage-unreached.tsv). Ends with
# "coverage: N of M module PCs (P%)", after a kmemleak scan of the whole boot.
#
# Env: CALLS (the fuzzer, default 20000), SEED, CYCLES and PROCESSES (stress, default 4000
#      and 64), UNLOAD_CYCLES (default 3), FAULTS_SHORT (1: the fault campaign's short form;
#      by default the full form, about 6 min on this kernel), QEMU_TIMEOUT (default 7200 s)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=qemu/env.sh
source qemu/env.sh

make -s module VARIANT=cov KUNIT=1
work="$root/build/coverage"
bash tests/guest/build.sh "$work" >/dev/null
python3 tests/coverage_sites.py "llvm-objdump$LLVM_SUFFIX" "llvm-symbolizer$LLVM_SUFFIX" \
    build/module-cov/rust/neuron_ds.ko >"$work/cov-sites.tsv"
cp tests/coverage-unreached.tsv "$work/"

calls="${CALLS:-20000}" seed="${SEED:-7}"
# The guest test suites whose threads collect too (those that exercise the entry points, and
# the module's parameters, some of which they reload it with).
SUITES="acquire release mmap revoke tenure ledger inherited events metrics parameters"
faults_short="${FAULTS_SHORT:-}"
cat >"$work/coverage.sh" <<RUN
#!/bin/sh
# Each campaign's processes write the points they reached under /tmp/cov/<campaign>, and
# ds-kcov-remote the points the module's workers reached on their behalf.
campaign() {
    name="\$1"; shift
    mkdir -p "/tmp/cov/\$name"
    NEURON_DS_KCOV_DIR="/tmp/cov/\$name" /work/bin/ds-kcov-remote workers "\$@"
    echo "coverage: campaign \$name exited \$?"
}
campaign fuzz /work/bin/ds-fuzz --calls $calls --seed $seed
campaign stress /work/bin/ds-stress --cycles ${CYCLES:-4000} --processes ${PROCESSES:-64}
campaign unload /work/bin/ds-unload --cycles ${UNLOAD_CYCLES:-3}
# The permission matrix: its probes switch to other users, who must be able to write there.
mkdir -p /tmp/cov/permissions && chmod 1777 /tmp/cov/permissions
campaign permissions /work/tests/permissions --test-threads=1
# The guest test suites of the entry points: every thread that opens a device or issues an
# ioctl collects (kcov::follow_thread), the tests' actors too, some of them other users, who
# need KCOV's file (root's only by default) and a directory they can write.
chmod 755 /sys/kernel/debug && chmod 666 /sys/kernel/debug/kcov
suites="$SUITES"
for suite in \$suites; do
    mkdir -p "/tmp/cov/\$suite" && chmod 1777 "/tmp/cov/\$suite"
    export NEURON_DS_KCOV_THREADS="/tmp/cov/\$suite"
    # A second instance of the module is not this module, and the production build
    # (which make test loads first) is not in this boot: their tests stay out.
    skip=""; [ "\$suite" = parameters ] &&
        skip="--skip a_second_instance --skip a_production_build_runs_no_test"
    campaign "\$suite" "/work/tests/\$suite" --test-threads=1 \$skip
    unset NEURON_DS_KCOV_THREADS
done
campaign faults /work/bin/ds-faults${faults_short:+ --short}
/work/bin/ds-coverage /work/cov-sites.tsv /work/coverage-unreached.tsv fuzz=/tmp/cov/fuzz \\
    stress=/tmp/cov/stress unload=/tmp/cov/unload \\
    permissions=/tmp/cov/permissions faults=/tmp/cov/faults \\
    \$(for suite in \$suites; do printf '%s=/tmp/cov/%s ' "\$suite" "\$suite"; done)
rc=\$?
# Every campaign ran in this one boot: nothing the module allocated may be left unreferenced.
/work/bin/ds-kmemleak || rc=1
exit \$rc
RUN
chmod +x "$work/coverage.sh"
status=0
MODULE_PARAMS="devices=2 cores_per_device=2 metrics_period_ms=400" \
    QEMU_TIMEOUT="${QEMU_TIMEOUT:-7200}" \
    bash qemu/qemu-run.sh cov "$work" /work/coverage.sh || status=$?
# The summary line last, after the harness's own lines.
grep -h '^coverage: [0-9]* of [0-9]* module PCs' build/qemu-run-cov/console.log | tail -n1
exit "$status"
