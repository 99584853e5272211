#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the tools as the release binaries everyone runs: static (musl), stripped, with the
# paths of this tree, cargo, the toolchain and the target directory remapped, so that where
# they lie does not change a byte. One build serves the container image (image.sh), the guest
# (tests/guest/build.sh, qemu/demo.sh) and the input tests of the release binaries
# (tests/run.sh). It always builds the same packages in one cargo invocation: the features of
# shared dependencies are then the same whoever asks, so no caller rebuilds what another
# built. Also the C API as a static library (libnds_capi.a), for the guest's SDK program.
#
# The build goes to STATIC_TOOLS_TARGET (default userspace/target/static, inside the cargo
# cache of qemu/cargo-targets.sh when make deps set it up): a target directory of its own,
# since the remapping flags differ from every other build's and would otherwise rebuild theirs.
#
# Usage: userspace/packaging/static-tools.sh   (prints the directory that holds the binaries)
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=qemu/env.sh
source "$root/qemu/env.sh"

tools=(nds-loadgen nds-monitor nds-top nds-metrics nds-ls nds-entrypoint)
target="${STATIC_TOOLS_TARGET:-$root/userspace/target/static}"
sysroot="$(rustc --print sysroot)"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
mkdir -p "$target"
# The target comes last: it may lie inside the tree (rustc takes the last prefix that
# matches), and it holds the build scripts' output that sources include.
remaps=("$root=/neuron-ds" "$cargo_home=/cargo" "$sysroot=/rust" "$target=/target"
    "$(realpath "$target")=/target")
(
    cd "$root/userspace"
    # Not the commit's time: ring's build script reruns when SOURCE_DATE_EPOCH changes, which
    # recompiled ring and every crate above it at each commit; the binaries take no time from it.
    unset SOURCE_DATE_EPOCH
    export CARGO_TARGET_DIR="$target" CARGO_PROFILE_RELEASE_STRIP=symbols
    RUSTFLAGS="$(printf -- '--remap-path-prefix=%s ' "${remaps[@]}")"
    export RUSTFLAGS
    cargo build --release --locked --quiet --target "$GUEST_TARGET" $(printf -- '-p %s ' "${tools[@]}")
    # Only the static library: the guest links no shared one.
    cargo rustc --release --locked --quiet --target "$GUEST_TARGET" -p nds-capi --lib \
        --crate-type staticlib
) >&2
echo "$target/$GUEST_TARGET/release"
