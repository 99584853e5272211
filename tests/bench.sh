#!/usr/bin/env bash
# `make bench`: the host benchmarks (criterion, userspace/nds-bench) and the guest timing
# binary (tests/bench-guest, inside QEMU through qemu/qemu-run.sh), then one table from
# nds-bench-report: name, ours, reference, ratio, goal, pass/miss.
#
# Every ratio divides two numbers taken in this one run on this machine. Nothing here fails
# on a timing: the exit status is non-zero only when something could not be built or run.
# Results stay in build/bench/ (host.log, guest.log, criterion/, table.txt).
#
# Usage: tests/bench.sh
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
# shellcheck source=qemu/env.sh
source qemu/env.sh

out="$root/build/bench"
rm -rf "$out" && mkdir -p "$out/guest-work"
started=$SECONDS
step() { printf '\n=== [+%ds] %s\n' "$((SECONDS - started))" "$*"; }
fail() {
    echo "bench: $*" >&2
    exit 1
}

step "setup: PCP's MMV library (Debian libpcp-mmv1-dev) and the rest of the toolchain"
if ! dpkg-query -W -f='${Status}' libpcp-mmv1-dev 2>/dev/null | grep -q "install ok installed"; then
    # Retry once on a stale package list: a fresh machine has never run 'update'.
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpcp-mmv1-dev ||
        { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpcp-mmv1-dev; } ||
        fail "cannot install libpcp-mmv1-dev"
fi
make -s deps || fail "make deps failed"

step "build: host benches, report, guest timing binary"
(cd userspace && cargo bench -p nds-bench --features mmv --bench host --no-run &&
    cargo build --release -p nds-bench --bin nds-bench-report) || fail "host build failed"
(cd tests/bench-guest && cargo build --release --target "$GUEST_TARGET") || fail "guest build failed"
cp "tests/bench-guest/target/$GUEST_TARGET/release/nds-bench-guest" "$out/guest-work/"

step "host: criterion benches (about 90 s, after any QEMU run that holds the harness lock)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
(
    # Hold the harness lock so that no guest boots on the two cores while the host measures.
    exec 8>"$root/build/.harness.lock" && flock 8
    cd userspace && CRITERION_HOME="$out/criterion" \
        cargo bench -p nds-bench --features mmv --bench host -- --noplot
) >"$out/host.log" 2>&1 || fail "host benches failed; see $out/host.log"
grep -E '^nds-bench:' "$out/host.log"

step "guest: kernel paths (QEMU, boot included)"
guest_status=0
# A 50 ms metrics period gives the post wakeup row a post to wait for every 50 ms (the guest
# binary is told the period too: module parameters are not readable); the worker's runs in
# between touch the other rows' two sides alike (they alternate).
period_ms=50
MODULE_PARAMS="metrics_period_ms=$period_ms" QEMU_TIMEOUT="${QEMU_TIMEOUT:-300}" \
    bash qemu/qemu-run.sh base "$out/guest-work" "./nds-bench-guest $period_ms" \
    >"$out/guest.log" 2>&1 || guest_status=$?
accel="$(sed -n 's/^boot.sh: accel=\([a-z]*\).*/\1/p' "$out/guest.log" | tail -n1)"
echo "ACCEL ${accel:-unknown}" >>"$out/guest.log"
grep -E '^(BENCH|PHASE) ' "$out/guest.log" || echo "bench: the guest printed no results (status $guest_status); see $out/guest.log"

step "results"
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "host: $cpu, $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)," \
    "load average before the host benches: $load_before; guest: ${accel:-unknown}, ${QEMU_SMP:-2} vCPUs"
echo "host numbers: criterion medians; guest numbers: medians of 11 alternating batches; one run"
echo "load average after the guest run: $(cut -d' ' -f1-3 /proc/loadavg) (a rise means other work shared the cores)"
echo
"userspace/target/release/nds-bench-report" "$out/criterion" "$out/guest.log" | tee "$out/table.txt"
echo
echo "bench: done in $((SECONDS - started)) s; results in ${out#"$root"/}/"
[ "$guest_status" -eq 0 ] || fail "the guest run failed (status $guest_status); see $out/guest.log"
