#!/usr/bin/env bash
# `make test` / `make test-debug`: host tests, the module build, the packaging tests
# (tests/packaging.sh), the container image and Kubernetes manifest tests (tests/image.sh,
# tests/manifests.sh), then one QEMU boot that loads the module (its KUnit suites run at
# insmod) and runs the guest integration tests, on the newest kernel release. The module is
# also built with clippy on every older supported release (qemu/env.sh), whose tree the
# packaging tests give to DKMS too; `make test` gives each a guest pass of its own (KUnit,
# guest tests, console scan) on its base kernel, booted while the host tests run.
# Ends with one line "N passed, N failed" summing them all; exits non-zero if anything failed.
#
# Usage: tests/run.sh base|debug
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
variant="${1:-base}"
cd "$root" || exit 1
unset KVER
# shellcheck source=qemu/env.sh
source qemu/env.sh
# The release of the full run; the older ones get the module build, the packaging tests' DKMS
# build and (make test only) a guest pass, all on their base kernel.
newest="${KERNEL_RELEASES[0]}"
older=("${KERNEL_RELEASES[@]:1}")

# The run builds and tests in the cache's test tree (qemu/test-tree.sh): one path for every
# clone, so that a second clone rebuilds only the crates whose files changed. Its cargo
# targets are its own (CARGO_TARGETS_PREFIX), written by no build at another path. The lock
# makes runs of two clones take turns; NDS_TEST_IN_PLACE=1 tests the checkout where it lies.
if [ -z "${NDS_TEST_TREE:-}" ] && [ "${NDS_TEST_IN_PLACE:-0}" != 1 ]; then
    mkdir -p "$CACHE_DIR" && exec 9>"$CACHE_DIR/test-tree.lock" && flock 9
    tree="$(bash qemu/test-tree.sh)" || exit 1
    echo "testing $root in $tree"
    NDS_TEST_TREE="$tree" CARGO_TARGETS_PREFIX=test-tree- exec bash "$tree/tests/run.sh" "$@"
fi

passed=0 failed=0
# One harness run at a time: runs share build/ and the two cores.
mkdir -p "$root/build" && exec 8>"$root/build/.harness.lock" && flock 8
results="$root/build/test-$variant"
rm -rf "$results" && mkdir -p "$results"

# shellcheck source=tests/tally.sh
source tests/tally.sh
finish() {
    printf '\n%d passed, %d failed\n' "$passed" "$failed"
    [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
    exit $?
}

step "dependencies and the kernels: $variant on Linux $newest${older:+, base on Linux ${older[*]}}"
setup_ok=true
make -s deps && make -s kernel VARIANT="$variant" || setup_ok=false
for release in "${older[@]}"; do
    $setup_ok && make -s kernel VARIANT=base KVER="$release" || setup_ok=false
done
if ! $setup_ok; then
    count 0 1 "setup"
    finish
fi

# shellcheck source=tests/guest-pass.sh
source tests/guest-pass.sh

# module_build <release> <variant>: the module with clippy; its warnings count as a failure.
module_build() {
    local release="$1" build_variant="$2" log="$results/module-$1.log"
    step "module build with clippy ($build_variant, Linux $release)"
    # Always recompile, with clippy, so that its warnings count as build warnings below.
    rm -f "build/module-$build_variant$(release_suffix "$release")/rust/neuron_ds.o"
    if ! make -s module VARIANT="$build_variant" KVER="$release" CLIPPY=1 KUNIT=1 2>&1 | tee "$log"; then
        count 0 1 "module build (Linux $release)"
        return 1
    fi
    if grep -q 'warning' "$log"; then
        echo "the module build printed warnings"
        count 0 1 "module build without warnings (Linux $release)"
    else
        count 1 0 "module build without warnings (Linux $release)"
    fi
}

module_build "$newest" "$variant" || finish
built=()
for release in "${older[@]}"; do
    module_build "$release" base && built+=("$release")
done
second_passes=()
[ "$variant" = base ] && second_passes=("${built[@]}")

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

# The guest passes run in the background, all at once, while the host tests, the lints, the
# packaging, image and manifest tests run beside them. Each guest spends most of its time in
# one test thread, so one pass after another left a core idle for minutes: 7 min 20 s for a
# second clone, 4 min 46 s with the passes side by side, the same tests passing. The older
# releases' results go to build/test-base/linux-<release>/; the newest release's stay at the
# top of build/test-<variant>/.
# A guest's time limit only catches a hang: a pass takes about 4 min on two idle cores, and
# several times that on a new machine still building beside it. The debug kernel (KASAN,
# lockdep, delayed kobject release) runs the same tests several times slower again: 600 s ran
# out in the unload tests, after 49 tests had passed in about 11 min; at c73d993, 2400 s ran
# out in the short fault campaign (every insmod runs the 60 KUnit tests), after KUnit and all
# 115 guest tests had passed, with the cores shared with a soak.
if [ "$variant" = debug ]; then
    export QEMU_TIMEOUT="${QEMU_TIMEOUT:-5400}"
else
    export QEMU_TIMEOUT="${QEMU_TIMEOUT:-1800}"
fi
(
    for release in "${second_passes[@]}"; do
        dir="$results/linux-$release"
        mkdir -p "$dir" && cp -a "$work" "$dir/work"
        guest_boot "$release" base "$dir" "$dir/work" >"$dir/boot.log" 2>&1 &
    done
    guest_boot "$newest" "$variant" "$results" "$work" >"$results/boot.log" 2>&1 &
    wait
) &
guest_passes=$!

step "host tests (userspace workspace, test binaries in two lanes, longest first)"
# As `cargo test --workspace --no-fail-fast`, but the long waiting binaries (the Prometheus
# pair, serve) run beside the rest instead of before or after them (tests/host_tests.py).
if (cd userspace && python3 ../tests/host_tests.py --lanes 2 \
    --times "$CACHE_DIR/host-test-times.json" 2>&1) | tee "$results/host.log"; then
    host_status=0
else
    host_status=1
fi
read -r p f < <(libtest_totals "$results/host.log")
[ "$host_status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
count "$p" "$f" "host tests"

step "host: the tools' input tests against their static release binaries (NDS_TOOLS_BIN_DIR)"
# The release build of a tool has only its own features: dev-dependencies turn features on
# for the test builds (a regex built without unicode-case passed every debug test). These are
# the binaries the image ships and the guest runs (userspace/packaging/static-tools.sh), built
# already for the guest: one release build instead of one per use.
if (static="$(bash userspace/packaging/static-tools.sh)" && cd userspace &&
    NDS_TOOLS_BIN_DIR="$static" cargo test -p nds-monitor -p nds-top --test inputs --color never 2>&1) |
    tee "$results/release-inputs.log"; then
    release_status=0
else
    release_status=1
fi
read -r p f < <(libtest_totals "$results/release-inputs.log")
[ "$release_status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
count "$p" "$f" "input tests of the release binaries"

step "host: the seqlock reader under loom (memory orderings)"
# Its own target directory: --cfg loom rebuilds the crate graph, which must not evict the
# workspace's normal build.
if (cd userspace && RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p nds --lib --color never loom 2>&1) | tee "$results/loom.log"; then
    loom_status=0
else
    loom_status=1
fi
read -r p f < <(libtest_totals "$results/loom.log")
[ "$loom_status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
count "$p" "$f" "loom model"

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
lint "module layers (imports go down, unsafe and kernel-version cfg only in rust/shim)" \
    python3 tests/module-layers.py rust
# Frames nest under the loader's or a system call's, and a kernel stack of 16 KiB that they
# overflow is reported by a double fault only (DeviceState::new once reached 14 KiB).
lint "module stack frames (every function outside the KUnit tests at most 4 KiB)" \
    python3 tests/module-frames.py "llvm-objdump$LLVM_SUFFIX" "build/module-$variant/rust/neuron_ds.ko"
# The check above would let a version conditional in the domain code through if it missed one.
layers_refuse_a_version_conditional_outside_the_shim() {
    local copy
    copy="$(mktemp -d)" && cp -r rust "$copy/" &&
        printf '\n#[cfg(kernel_version = "7.2")]\nconst PLANTED: () = ();\n' >>"$copy/rust/state/mod.rs" &&
        ! python3 tests/module-layers.py "$copy/rust" >"$copy/out" &&
        grep -q "rust/state/mod.rs: kernel-version conditional outside rust/shim/" "$copy/out"
    local status=$?
    rm -rf "$copy"
    return "$status"
}
lint "module layers refuse a kernel-version cfg planted in rust/state" \
    layers_refuse_a_version_conditional_outside_the_shim
lint "userspace layers (crates on floors, modules bottom up, the crate drawing in userspace.rst)" \
    python3 tests/userspace-layers.py --check-doc Documentation/userspace.rst
# The check above would let an import that points back up through if it missed one: a crate
# of floor 0 depending on one of floor 1, and nds-exporter's lowest module using its highest.
userspace_layers_refuse_imports_that_point_up() {
    local copy
    copy="$(mktemp -d)" && mkdir "$copy/userspace" &&
        tar -C userspace --exclude=./target -cf - . | tar -C "$copy/userspace" -xf - &&
        printf '\n[target.'"'cfg(unix)'"'.dependencies]\nnds-sysfs = { path = "../nds-sysfs" }\n' \
            >>"$copy/userspace/nds-terminal/Cargo.toml" &&
        printf '\n#[allow(unused_imports)]\nuse crate::prometheus::CONTENT_TYPE;\n' \
            >>"$copy/userspace/nds-exporter/src/counters.rs" &&
        ! python3 tests/userspace-layers.py --workspace "$copy/userspace" >"$copy/out" &&
        grep -q "^nds-terminal (floor 0): normal dependency on nds-sysfs (floor 1)" "$copy/out" &&
        grep -q "nds-exporter/src/counters.rs: module counters uses prometheus" "$copy/out"
    local status=$?
    rm -rf "$copy"
    return "$status"
}
lint "userspace layers refuse a crate and a module importing upwards" \
    userspace_layers_refuse_imports_that_point_up

# The test tree keeps an unchanged file's modification time (cargo then finds its crates
# fresh), writes a changed file anew, follows an execute bit, takes an untracked file, drops
# what the checkout lost, and answers git for the checkout.
test_tree_follows_the_checkout() {
    local scratch tree old status
    scratch="$(mktemp -d)" && mkdir -p "$scratch/repo/qemu" &&
        cp qemu/test-tree.sh qemu/env.sh "$scratch/repo/qemu/" &&
        printf 'same\n' >"$scratch/repo/kept" && printf 'old\n' >"$scratch/repo/changed" &&
        printf 'x\n' >"$scratch/repo/mode" && printf 'lost\n' >"$scratch/repo/lost" &&
        git -C "$scratch/repo" init -q && git -C "$scratch/repo" add . &&
        tree="$(NEURON_DS_CACHE="$scratch/cache" bash "$scratch/repo/qemu/test-tree.sh")" &&
        old="$(date -d 2001-01-01 +%s)" && touch -d @"$old" "$tree/kept" "$tree/changed" &&
        printf 'new\n' >"$scratch/repo/changed" && chmod +x "$scratch/repo/mode" &&
        git -C "$scratch/repo" rm -qf lost && printf 'n\n' >"$scratch/repo/untracked" &&
        NEURON_DS_CACHE="$scratch/cache" bash "$scratch/repo/qemu/test-tree.sh" >/dev/null &&
        [ "$(stat -c %Y "$tree/kept")" = "$old" ] && [ "$(cat "$tree/changed")" = new ] &&
        [ "$(stat -c %Y "$tree/changed")" != "$old" ] && [ -x "$tree/mode" ] &&
        [ ! -e "$tree/lost" ] && [ -f "$tree/untracked" ] && [ -L "$tree/build" ] &&
        [ "$(git -C "$tree" rev-parse --absolute-git-dir)" = "$scratch/repo/.git" ]
    status=$?
    rm -rf "$scratch"
    return "$status"
}
lint "the test tree follows the checkout, keeping what did not change" test_tree_follows_the_checkout

# The host test runner runs every test binary and the doc tests, reports a failing one, and
# starts the longest of the last run first (one lane: output order is start order).
host_test_runner_runs_everything_longest_first() {
    local scratch status
    scratch="$(mktemp -d)" && mkdir -p "$scratch/src" "$scratch/tests" &&
        printf '[package]\nname = "scratch"\nversion = "0.1.0"\nedition = "2021"\n' \
            >"$scratch/Cargo.toml" &&
        printf '/// ```\n/// assert_eq!(scratch::one(), 1);\n/// ```\npub fn one() -> u32 { 1 }\n#[test]\nfn unit() {}\n' \
            >"$scratch/src/lib.rs" &&
        printf '#[test]\nfn passes() { assert_eq!(std::env::var("CARGO_PKG_NAME").unwrap(), "scratch") }\n' \
            >"$scratch/tests/short.rs" &&
        printf '#[test]\nfn fails() { panic!("planted") }\n' >"$scratch/tests/long.rs" &&
        printf '{"scratch:test:long": 50, "scratch:test:short": 1}\n' >"$scratch/times.json" &&
        ! (cd "$scratch" && CARGO_TARGET_DIR="$scratch/target" python3 "$root/tests/host_tests.py" \
            --lanes 1 --times "$scratch/times.json" >"$scratch/out" 2>&1) &&
        [ "$(grep -c '^test result:' "$scratch/out")" = 4 ] &&
        grep -q "^error: scratch:test:long exited with status 101" "$scratch/out" &&
        [ "$(grep -m1 -o 'Running tests/[a-z]*' "$scratch/out")" = "Running tests/long" ] &&
        python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); assert t["scratch:test:long"] < 50 and "doc-tests" in t' \
            "$scratch/times.json"
    status=$?
    [ "$status" -eq 0 ] || cat "$scratch/out"
    rm -rf "$scratch"
    return "$status"
}
lint "the host test runner runs every binary, reports a failure, starts the longest first" \
    host_test_runner_runs_everything_longest_first

step "packaging tests ($variant): kbuild checks, modinfo, make install, DKMS, .deb"
bash tests/packaging.sh "$variant" 2>&1 | tee "$results/packaging.log"
packaging_status=${PIPESTATUS[0]}
read -r pp pf < <(awk '/^ok [0-9]+ / { p++ } /^not ok [0-9]+ / { f++ } END { printf "%d %d\n", p, f }' \
    "$results/packaging.log")
grep -q '^1\.\.[0-9]' "$results/packaging.log" || pf=$((pf + 1)) # the suite did not finish
[ "$packaging_status" -ne 0 ] && [ "$pf" -eq 0 ] && pf=1
count "$pp" "$pf" "packaging tests"

# tap_suite <name> <script> <log>: one TAP suite, counted like the packaging tests.
tap_suite() {
    local name="$1" script="$2" log="$3" status p f
    bash "$script" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    read -r p f < <(awk '/^ok [0-9]+ / { p++ } /^not ok [0-9]+ / { f++ } END { printf "%d %d\n", p, f }' "$log")
    grep -q '^1\.\.[0-9]' "$log" || f=$((f + 1)) # the suite did not finish
    [ "$status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    count "$p" "$f" "$name"
}

step "container image: two builds, its files and labels, podman + Prometheus (tests/image.sh)"
tap_suite "container image tests" tests/image.sh "$results/image.log"
step "Kubernetes manifests: chart = plain YAML, API schemas, checkov (tests/manifests.sh)"
tap_suite "Kubernetes manifest tests" tests/manifests.sh "$results/manifests.log"

step "QEMU: insmod + KUnit + guest tests ($variant, Linux $newest), booted beside the host tests"
wait "$guest_passes"
cat "$results/boot.log"
guest_counts "$newest" "$results"
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
for release in "${second_passes[@]}"; do
    step "QEMU: insmod + KUnit + guest tests (base, Linux $release), booted beside the host tests"
    # What boot.sh printed (the console without the final kernel log dump).
    cat "$results/linux-$release/boot.log"
    guest_counts "$release" "$results/linux-$release"
done
finish
