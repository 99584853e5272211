#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Points each cargo workspace's target directory at the cache, keyed as the kernel builds are:
# <workspace>/target becomes a symlink to $CACHE_DIR/cargo/<workspace>-<key>, where the key
# hashes the toolchain (`rustc -vV`) and the workspace's Cargo.lock. Inside, cargo's own layout
# keeps target triples (x86_64-unknown-linux-musl/...) and profiles (debug, release) apart.
# A second clone on the same machine then builds only its workspace's own crates (their
# identity includes their path); every dependency comes built. A target that is a directory of
# its own (made by hand, or before this script) is left as it is. Of each workspace's keys the
# newest KEEP (default 3) stay; older ones are removed. CARGO_TARGETS_PREFIX starts the names
# (tests/run.sh's test tree has targets of its own, test-tree-<workspace>-<key>).
#
# Usage: qemu/cargo-targets.sh   (make deps runs it)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=qemu/env.sh
source "$root/qemu/env.sh"
keep="${KEEP:-3}"
cache="$CACHE_DIR/cargo"
mkdir -p "$cache"

for workspace in userspace tests/guest tests/bench-guest; do
    dir="$root/$workspace"
    [ -f "$dir/Cargo.lock" ] || continue
    key="$({ (cd "$dir" && rustc -vV) && cat "$dir/Cargo.lock"; } | sha256sum | cut -c1-12)"
    name="${CARGO_TARGETS_PREFIX:-}${workspace//\//-}"
    target="$cache/$name-$key"
    link="$dir/target"
    mkdir -p "$target"
    # Its modification time says when a clone last used it, for the pruning below.
    touch "$target"
    if [ -L "$link" ]; then
        [ "$(readlink "$link")" = "$target" ] || ln -sfn "$target" "$link"
    elif [ -e "$link" ]; then
        echo "cargo-targets: $link is a directory of its own, left as it is" >&2
        continue
    else
        ln -s "$target" "$link"
    fi
    # The newest first; everything past the KEEP newest goes.
    find "$cache" -mindepth 1 -maxdepth 1 -type d -name "$name-*" -printf '%T@ %p\n' |
        sort -rn | tail -n +"$((keep + 1))" | cut -d' ' -f2- | xargs -r rm -rf
done
