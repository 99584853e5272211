#!/usr/bin/env bash
# Builds the Rust-enabled guest kernel of one release (KVER, qemu/env.sh: 7.3 by default,
# or 7.2) and one variant into the cache, keyed by kernel version, config fragments and
# toolchain versions, and prints the build directory. Every release gets the same fragments
# and the same checks. A second call with the same key returns at once. Variants:
#   base   qemu/kernel.config
#   debug  + qemu/kernel-faults.config + qemu/kernel-debug.config (KASAN, lockdep, kmemleak,
#          failure injection, delayed kobject release)
#   cov    + qemu/kernel-faults.config + qemu/kernel-cov.config (KCOV, failure injection,
#          kmemleak)
#
# Usage: [KVER=7.2|7.3] qemu/kernel.sh base|debug|cov          build if needed, print the build dir
#        [KVER=7.2|7.3] qemu/kernel.sh --dir base|debug|cov    print the build dir without building
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=qemu/env.sh
source "$here/env.sh"

print_only=false
if [ "${1:-}" = "--dir" ]; then
    print_only=true
    shift
fi
variant="${1:-base}"
case "$variant" in
base) fragments=("$here/kernel.config") ;;
debug) fragments=("$here/kernel.config" "$here/kernel-faults.config" "$here/kernel-debug.config") ;;
cov) fragments=("$here/kernel.config" "$here/kernel-faults.config" "$here/kernel-cov.config") ;;
*)
    echo "kernel.sh: unknown variant '$variant' (base, debug or cov)" >&2
    exit 2
    ;;
esac

log() { printf 'kernel[%s %s]: %s\n' "$KVER" "$variant" "$*" >&2; }

# Later fragments override earlier ones option by option.
merged_fragment() {
    grep -h '^CONFIG_' "${fragments[@]}" |
        awk -F= '{ value[$1] = $0; if (!($1 in seen)) { order[n++] = $1; seen[$1] = 1 } }
                 END { for (i = 0; i < n; i++) print value[order[i]] }'
}

cache_key() {
    {
        make -s -C "$KERNEL_SRC" kernelversion
        merged_fragment
        rustc --version
        "clang$LLVM_SUFFIX" --version | head -n1
        "ld.lld$LLVM_SUFFIX" --version | head -n1
        "$BINDGEN" --version
    } | sha256sum | cut -c1-12
}

[ -f "$KERNEL_SRC/Makefile" ] || {
    echo "kernel.sh: no Linux $KVER source at $KERNEL_SRC; run 'make deps' first" >&2
    exit 1
}
out="$CACHE_DIR/build/$(make -s -C "$KERNEL_SRC" kernelversion)-$variant-$(cache_key)"
if $print_only; then
    echo "$out"
    exit 0
fi

kmake() {
    make -C "$KERNEL_SRC" O="$out" ARCH=x86_64 LLVM="$LLVM_SUFFIX" BINDGEN="$BINDGEN" "$@"
}

# Every option of the fragment must be in .config exactly as written.
check_config() {
    local line missing=0
    while IFS= read -r line; do
        if ! grep -qxF "$line" "$out/.config"; then
            log "option not set in .config: $line (an unmet dependency?)"
            missing=1
        fi
    done < <(merged_fragment)
    if [ "$missing" -ne 0 ]; then
        kmake rustavailable >&2 || true
        exit 1
    fi
}

if [ ! -f "$out/.neuron-ds-complete" ]; then
    mkdir -p "$CACHE_DIR/build"
    exec 9>"$CACHE_DIR/kernel-build.lock"
    log "waiting for the kernel build lock" && flock 9
    if [ ! -f "$out/.neuron-ds-complete" ]; then
        mkdir -p "$out"
        merged_fragment >"$out/neuron-ds.fragment"
        start=$(date +%s)
        kmake KCONFIG_ALLCONFIG="$out/neuron-ds.fragment" allnoconfig >&2
        check_config
        log "building in $out"
        kmake -j"${KERNEL_JOBS:-3}" all >&2
        touch "$out/.neuron-ds-complete"
        log "built in $(($(date +%s) - start)) s"
    fi
fi
echo "$out"
