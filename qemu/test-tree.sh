#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Makes one directory of the cache, $CACHE_DIR/test-tree, hold exactly this checkout's files
# (tracked, and untracked but not ignored), so that `make test` in any clone builds at the same
# path. A file whose bytes and execute bit are unchanged is left alone, keeping its
# modification time, so cargo finds the crates built from it fresh; a changed file is written
# anew and rebuilds what uses it; a file the checkout lacks is removed.
#
# Why one path: cargo's fingerprints are relative to the workspace, but a binary keeps the
# absolute paths it was compiled with (env!("CARGO_MANIFEST_DIR"), CARGO_BIN_EXE_*), which
# cargo does not track. A second clone that only kept the first clone's modification times
# would reuse test binaries that read the first clone's files.
#
# The tree's `build` is a symlink to the checkout's build/, so results land in the checkout;
# its `.git` is a file naming the checkout's repository, so `git rev-parse HEAD` and
# `git log` answer for the checkout. The caller holds $CACHE_DIR/test-tree.lock (one run in
# the tree at a time). Prints the tree's path.
#
# Usage: qemu/test-tree.sh
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=qemu/env.sh
source "$root/qemu/env.sh"
tree="$CACHE_DIR/test-tree"
mkdir -p "$tree"
cd "$root"

declare -A wanted
while IFS= read -r -d '' path; do
    # A tracked file deleted in the checkout is not part of it.
    [ -e "$path" ] || [ -L "$path" ] || continue
    wanted["$path"]=1
    copy="$tree/$path"
    if [ -L "$path" ]; then
        [ -L "$copy" ] && [ "$(readlink "$path")" = "$(readlink "$copy")" ] && continue
    elif [ -f "$copy" ] && [ ! -L "$copy" ] && cmp -s "$path" "$copy"; then
        [ -x "$path" ] && [ -x "$copy" ] && continue
        [ ! -x "$path" ] && [ ! -x "$copy" ] && continue
    fi
    mkdir -p "$(dirname "$copy")"
    rm -rf "$copy"
    cp -P --preserve=mode "$path" "$copy"
done < <(git ls-files -z --cached --others --exclude-standard)

# What the checkout no longer has; cargo's target links and build/ are the harness's own.
while IFS= read -r -d '' path; do
    path="${path#./}"
    [ -n "${wanted[$path]:-}" ] || rm -f "$tree/$path"
done < <(cd "$tree" && find . \( -name target -o -path ./build -o -path ./.git \) -prune -o \
    \( -type f -o -type l \) -print0)
find "$tree" -mindepth 1 -type d -empty -delete

mkdir -p "$root/build"
ln -sfn "$root/build" "$tree/build"
printf 'gitdir: %s\n' "$(git rev-parse --absolute-git-dir)" >"$tree/.git"
echo "$tree"
