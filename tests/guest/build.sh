#!/usr/bin/env bash
# Builds the guest integration tests as static musl binaries and lays out a guest work
# directory: tests/ with one binary per test file, and run.sh that runs them one after
# another between markers that tests/run.sh parses.
#
# Usage: tests/guest/build.sh WORKDIR
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=qemu/env.sh
source "$here/../../qemu/env.sh"
work="$1"
rm -rf "$work" && mkdir -p "$work/tests" "$work/bin"

cd "$here"
cargo test --release --no-run --bins --tests --target "$GUEST_TARGET" --message-format=json-render-diagnostics |
    python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        kind = "tests" if msg["profile"]["test"] else "bin"
        print(kind, msg["executable"])
' | while read -r kind exe; do
    cp "$exe" "$work/$kind/$(basename "$exe" | sed 's/-[0-9a-f]*$//')"
done
[ -n "$(ls "$work/tests")" ] || {
    echo "build.sh: no guest test binaries were built" >&2
    exit 1
}

# The userspace tools the guest tests run, and the SDK-only C program
# (tests/c/nds_sdk_program.c) linked statically against the C API library, which
# tests/sdk_program.rs runs: the static release build the image ships too. The library's
# unwinder comes from the Rust target's own libunwind.a (the C compiler's would need glibc).
static="$(bash "$here/../../userspace/packaging/static-tools.sh")"
for tool in nds-loadgen nds-monitor nds-top nds-metrics nds-ls; do
    cp "$static/$tool" "$work/bin/$tool"
done
musl-gcc -std=c11 -Wall -Wextra -Werror -static -I "$here/../../userspace/nds-capi/include" \
    -o "$work/bin/nds-sdk-program" "$here/../c/nds_sdk_program.c" "$static/libnds_capi.a" \
    "$(rustc --print sysroot)/lib/rustlib/$GUEST_TARGET/lib/self-contained/libunwind.a"

cat >"$work/run.sh" <<'RUN'
#!/bin/sh
# Runs every guest test binary; single-threaded because they share the device's slabs.
echo "NEURON-DS-GUEST-TESTS-BEGIN"
rc=0
for test in /work/tests/*; do
    echo "guest test binary: ${test##*/}"
    "$test" --test-threads=1 --show-output || rc=1
done
echo "NEURON-DS-GUEST-TESTS-END"
# Whatever the harness adds after the tests (the fault campaign's short form on the debug
# kernel) runs in the same boot.
if [ -x /work/after-tests.sh ]; then
    /work/after-tests.sh || rc=1
fi
exit $rc
RUN
chmod +x "$work/run.sh"
