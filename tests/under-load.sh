#!/usr/bin/env bash
# `make test-under-load`: proof that the suites do not depend on the machine's speed. The guest
# passes of every supported release (KUnit and the guest integration tests, booted side by side
# as `make test` boots them) and the host tests run while a CPU hog keeps every core busy,
# UNDER_LOAD_RUNS times in a row (default 3). Not part of `make test`: a run takes several times
# as long as the same steps on idle cores. Prints one line per run and a total; exits non-zero if
# any test failed in any run. Results: build/test-under-load/run-N/.
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
unset KVER
# shellcheck source=qemu/env.sh
source qemu/env.sh
runs="${UNDER_LOAD_RUNS:-3}"
mkdir -p build && exec 8>build/.harness.lock && flock 8
top="$root/build/test-under-load"
rm -rf "$top" && mkdir -p "$top"

passed=0 failed=0
# shellcheck source=tests/tally.sh
source tests/tally.sh
# shellcheck source=tests/guest-pass.sh
source tests/guest-pass.sh

step "set-up, on idle cores: dependencies, kernels, modules, the guest tests, the host tests"
make -s deps || exit 1
for release in "${KERNEL_RELEASES[@]}"; do
    make -s kernel VARIANT=base KVER="$release" && make -s module VARIANT=base KVER="$release" KUNIT=1 || exit 1
done
work="$top/guest-work"
bash tests/guest/build.sh "$work" >"$top/guest-build.log" 2>&1 || {
    tail -n 20 "$top/guest-build.log"
    exit 1
}
(cd userspace && cargo test --workspace --no-run --color never) >"$top/host-build.log" 2>&1 || {
    tail -n 20 "$top/host-build.log"
    exit 1
}

# The hog: one busy loop per core, at the same priority as everything else.
hog=()
start_hog() {
    local core
    for core in $(seq "$(nproc)"); do
        bash -c 'while :; do :; done' &
        hog+=($!)
    done
}
stop_hog() {
    [ "${#hog[@]}" -eq 0 ] && return
    kill "${hog[@]}" 2>/dev/null
    wait "${hog[@]}" 2>/dev/null
    hog=()
}
trap stop_hog EXIT
export QEMU_TIMEOUT="${QEMU_TIMEOUT:-3600}"

summary=()
for run in $(seq "$runs"); do
    results="$top/run-$run"
    mkdir -p "$results"
    step "run $run of $runs: guest passes of Linux ${KERNEL_RELEASES[*]} and the host tests, beside a hog of $(nproc) busy loops"
    run_passed=$passed run_failed=$failed started=$SECONDS
    start_hog
    guests=()
    for release in "${KERNEL_RELEASES[@]}"; do
        dir="$results/linux-$release"
        mkdir -p "$dir" && cp -a "$work" "$dir/work"
        guest_boot "$release" base "$dir" "$dir/work" >"$dir/boot.log" 2>&1 &
        guests+=($!)
    done
    (cd userspace && python3 ../tests/host_tests.py --lanes 2 2>&1) >"$results/host.log"
    host_status=$?
    wait "${guests[@]}"
    stop_hog
    read -r p f < <(libtest_totals "$results/host.log")
    [ "$host_status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    count "$p" "$f" "host tests"
    grep -E '^test .* FAILED$|^error: ' "$results/host.log" | head -n 20
    for release in "${KERNEL_RELEASES[@]}"; do
        grep '^boot.sh:' "$results/linux-$release/boot.log"
        guest_counts "$release" "$results/linux-$release"
        grep -E '^test .* FAILED$' "$results/linux-$release/console.log" | head -n 20
    done
    line="run $run: $((passed - run_passed)) passed, $((failed - run_failed)) failed in $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
    summary+=("$line")
    echo "$line"
done

printf '\n%s\n' "${summary[@]}"
printf '\n%d runs under load: %d passed, %d failed\n' "$runs" "$passed" "$failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
