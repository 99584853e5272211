#!/usr/bin/env bash
# `make test` / `make test-debug`: host tests, the module build, the packaging tests
# (tests/packaging.sh), then one QEMU boot that loads the module (its KUnit suites run at
# insmod) and runs the guest integration tests. Ends with one line "N passed, N failed"
# summing them all; exits non-zero if anything failed.
#
# Usage: tests/run.sh base|debug
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
variant="${1:-base}"
cd "$root" || exit 1
# shellcheck source=qemu/env.sh
source qemu/env.sh

passed=0 failed=0
# One harness run at a time: runs share build/ and the two cores.
mkdir -p "$root/build" && exec 8>"$root/build/.harness.lock" && flock 8
results="$root/build/test-$variant"
rm -rf "$results" && mkdir -p "$results"

step() { printf '\n=== %s\n' "$*"; }
count() { # count <passed> <failed> <what>
    passed=$((passed + $1)) failed=$((failed + $2))
    printf -- '--- %s: %d passed, %d failed\n' "$3" "$1" "$2"
}
# Sums libtest's "test result:" lines of a log into "passed failed".
libtest_totals() {
    awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
         END { printf "%d %d\n", p, f }' "$1"
}
finish() {
    printf '\n%d passed, %d failed\n' "$passed" "$failed"
    [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
    exit $?
}

step "dependencies and the $variant kernel"
if ! make -s deps || ! make -s kernel VARIANT="$variant"; then
    count 0 1 "setup"
    finish
fi

step "host tests (userspace workspace)"
if (cd userspace && cargo test --workspace --no-fail-fast --color never 2>&1) | tee "$results/host.log"; then
    host_status=0
else
    host_status=1
fi
read -r p f < <(libtest_totals "$results/host.log")
[ "$host_status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
count "$p" "$f" "host tests"

step "lint: rustfmt and clippy"
# lint <name> <command...>: one check, counted like a test.
lint() {
    local log="$results/lint-${1//[ \/]/-}.log"
    if "${@:2}" >"$log" 2>&1; then
        count 1 0 "lint: $1"
    else
        tail -n 30 "$log"
        count 0 1 "lint: $1"
    fi
}
lint "userspace rustfmt" bash -c 'cd userspace && cargo fmt --all --check'
lint "userspace clippy" bash -c 'cd userspace && cargo clippy --workspace --all-targets -- -D warnings'
for crate in tests/guest tests/bench-guest; do
    lint "$crate rustfmt" bash -c "cd $crate && cargo fmt --check"
    lint "$crate clippy" bash -c "cd $crate && cargo clippy --all-targets --target $GUEST_TARGET -- -D warnings"
done
lint "module rustfmt" make -s rustfmtcheck VARIANT="$variant"

step "module build with clippy ($variant)"
# Always recompile, with clippy, so that its warnings count as build warnings below.
rm -f "build/module-$variant/rust/neuron_ds.o"
if ! make -s module VARIANT="$variant" CLIPPY=1 2>&1 | tee "$results/module.log"; then
    count 0 1 "module build"
    finish
fi
if grep -q 'warning' "$results/module.log"; then
    echo "the module build printed warnings"
    count 0 1 "module build without warnings"
else
    count 1 0 "module build without warnings"
fi

step "packaging tests ($variant): kbuild checks, modinfo, make install, DKMS, .deb"
bash tests/packaging.sh "$variant" 2>&1 | tee "$results/packaging.log"
packaging_status=${PIPESTATUS[0]}
read -r pp pf < <(awk '/^ok [0-9]+ / { p++ } /^not ok [0-9]+ / { f++ } END { printf "%d %d\n", p, f }' \
    "$results/packaging.log")
grep -q '^1\.\.[0-9]' "$results/packaging.log" || pf=$((pf + 1)) # the suite did not finish
[ "$packaging_status" -ne 0 ] && [ "$pf" -eq 0 ] && pf=1
count "$pp" "$pf" "packaging tests"

step "guest tests build"
work="$results/guest-work"
if ! bash tests/guest/build.sh "$work" 2>&1 | tail -n 20; then
    count 0 1 "guest tests build"
    finish
fi

if [ "$variant" = debug ]; then
    # The fault campaign's short form, after the guest tests (it reloads the module its own way).
    cat >"$work/after-tests.sh" <<'AFTER'
#!/bin/sh
echo "NEURON-DS-FAULTS-BEGIN"
/work/bin/ds-faults --short
rc=$?
echo "NEURON-DS-FAULTS-END"
exit $rc
AFTER
    chmod +x "$work/after-tests.sh"
fi

step "QEMU: insmod + KUnit + guest tests ($variant)"
kdir="$(bash qemu/kernel.sh --dir "$variant")"
# A short metrics period so that the metrics test sees several periods; two devices for the
# stress and fuzz campaigns (the other tests use neuron0 only).
bash qemu/initramfs.sh "$results/initramfs.cpio.gz" "build/module-$variant/rust/neuron_ds.ko" "$work" \
    metrics_period_ms=400 devices=2 cores_per_device=2
boot_status=0
bash qemu/boot.sh "$kdir" "$results/initramfs.cpio.gz" "$results/console.log" || boot_status=$?

# KUnit: every test case line inside our suites' KTAP blocks.
read -r kp kf < <(awk '/^NEURON-DS-KTAP-BEGIN/ { on = 1; next } /^NEURON-DS-KTAP-END/ { on = 0 }
    on && /^[ \t]+ok [0-9]+ / { p++ } on && /^[ \t]+not ok [0-9]+ / { f++ }
    END { printf "%d %d\n", p, f }' "$results/console.log")
if [ "$kp" -eq 0 ] && [ "$kf" -eq 0 ]; then
    echo "no KUnit results came back from the guest"
    kf=1
fi
count "$kp" "$kf" "KUnit (neuron_ds suites)"

sed -n '/^NEURON-DS-GUEST-TESTS-BEGIN/,/^NEURON-DS-GUEST-TESTS-END/p' "$results/console.log" >"$results/guest.log"
read -r gp gf < <(libtest_totals "$results/guest.log")
grep -q '^NEURON-DS-GUEST-TESTS-END' "$results/guest.log" || gf=$((gf + 1))
count "$gp" "$gf" "guest tests"
if [ "$variant" = debug ]; then
    # Every failure point reached is one check; a leak, or a campaign that did not finish, fails.
    summary="$(sed -n 's/^faults: \([0-9]*\) injection points reached, \([0-9]*\) failed, \([0-9]*\) leaks$/\1 \2 \3/p' \
        "$results/console.log" | tail -n1)"
    if [ -z "$summary" ]; then
        echo "the fault campaign did not finish"
        count 0 1 "fault campaign (short form)"
    else
        read -r fp ff fk <<<"$summary"
        count "$((fp > ff ? fp - ff : 0))" "$((ff + fk))" "fault campaign (short form): $fp points, $fk leaks"
    fi
fi
if [ "$boot_status" -ne 0 ]; then
    count 0 1 "guest run verdict (console scan, exit marker)"
else
    count 1 0 "guest run verdict (console scan, exit marker)"
fi
finish
