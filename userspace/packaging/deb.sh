#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the neuron-ds-tools Debian package: the tools (cargo build), their manual pages and
# shell completions (nds-dist, into <target>/<profile>/dist/, where the package description
# in userspace/nds-dist/Cargo.toml takes them from), then cargo-deb. Prints the package's path.
#
# Usage: userspace/packaging/deb.sh [--profile PROFILE] [--output DIR] [--fast]
#   --profile   cargo profile to package (default release; the tests use dev, whose build
#               `cargo test` has already made, and cargo-deb warns that it is not a release)
#   --output    directory for the .deb (default: userspace/target/debian)
#   --fast      lighter compression
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=qemu/env.sh
source "$root/qemu/env.sh"

profile=release
deb_args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --profile)
        profile="$2"
        shift 2
        ;;
    --output)
        mkdir -p "$2"
        deb_args+=(--output "$(cd "$2" && pwd)")
        shift 2
        ;;
    --fast)
        deb_args+=(--fast)
        shift
        ;;
    *)
        echo "usage: $0 [--profile PROFILE] [--output DIR] [--fast]" >&2
        exit 2
        ;;
    esac
done

if [ ! -x "$CARGO_DEB" ]; then
    echo "deb.sh: cargo-deb $CARGO_DEB_VERSION is not installed; run 'bash qemu/deps.sh --deb'" >&2
    exit 1
fi

cd "$root/userspace"
# The binaries the package ships, as its description lists them.
mapfile -t tools < <(sed -n 's|^ *\["target/release/\([^/"]*\)".*|\1|p' nds-dist/Cargo.toml)
packages=()
for tool in "${tools[@]}"; do
    packages+=(-p "$tool")
done
cargo build --locked --profile "$profile" --bins "${packages[@]}"

target_dir="$(cargo metadata --locked --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
profile_dir="$profile"
[ "$profile" = dev ] && profile_dir=debug
dist="$target_dir/$profile_dir/dist"
rm -rf "$dist"
# Reproducible page dates: the last commit's time when there is one.
if epoch="$(git -C "$root" log -1 --format=%ct 2>/dev/null)"; then
    export SOURCE_DATE_EPOCH="$epoch"
fi
cargo run --locked --quiet -p nds-dist -- "$dist"
# Debian policy: compressed pages, reproducibly (no name, no time stamp).
gzip -9n "$dist"/man/man1/*.1

"$CARGO_DEB" deb --locked --no-build -p nds-dist --profile "$profile" "${deb_args[@]}"
