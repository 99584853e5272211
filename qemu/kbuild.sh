#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs kbuild for the neuron_ds module against a kernel build tree, after checking that the
# tree can build an out-of-tree *Rust* module at all and explaining what is missing when it
# cannot. The top-level Makefile (make, make install) and DKMS (dkms.conf) both come here.
#
# Usage: qemu/kbuild.sh --check KDIR          check only; print the make variables
#        qemu/kbuild.sh KDIR [ARGS...]        make -C KDIR M=<source> <variables> ARGS...
#
# The variables are the kernel's own toolchain: LLVM=1 or LLVM=-<major> for a kernel built
# by clang (chosen so that the compiler matches CONFIG_CC_VERSION_TEXT), nothing for GCC.
# CC=/LD= arguments are dropped for a clang-built kernel: DKMS appends "CC=clang LD=ld.lld"
# when it sees one, which would pick an unversioned clang that may not be the kernel's.
set -euo pipefail

# The kernel releases whose Rust API the module is written against, oldest first (rust/shim/
# absorbs their differences). An older release is refused before anything compiles; a newer
# one is tried with the newest release's API.
supported_releases=(7.2 7.3)

src="$(cd "$(dirname "$0")/.." && pwd)"
check_only=false
if [ "${1:-}" = "--check" ]; then
    check_only=true
    shift
fi
[ $# -ge 1 ] || {
    echo "usage: $0 [--check] KDIR [make arguments...]" >&2
    exit 2
}
kdir="$1"
shift

problems=()
problem() { problems+=("$*"); }
explain_and_exit() {
    local releases="${supported_releases[*]}"
    {
        echo "neuron_ds: cannot build against the kernel tree $kdir:"
        printf '  - %s\n' "${problems[@]}"
        echo "neuron_ds is a Rust kernel module for Linux ${releases// / and }. Building it out of tree"
        echo "needs the *complete* build directory of a kernel configured with CONFIG_RUST=y:"
        echo "Module.symvers, include/config, scripts/ and the Rust metadata of that build"
        echo "(rust/*.rmeta, rust/libmacros.so, ...), and the very rustc that built the kernel."
        echo "Distribution linux-headers packages are made like the kernel's own 'make bindeb-pkg'"
        echo "headers (scripts/package/install-extmod-build), which copies no Rust artifacts, so they"
        echo "usually cannot build Rust modules unless the distribution ships that metadata in a"
        echo "package of its own. See Documentation/install.rst, 'What the kernel must provide'."
    } >&2
    exit 1
}

# Value of a CONFIG_ option in auto.conf, without quotes; empty when unset.
config() {
    sed -n "s/^$1=//p" "$kdir/include/config/auto.conf" | sed 's/^"\(.*\)"$/\1/'
}

# --- the tree itself
if [ ! -d "$kdir" ]; then
    problem "there is no such directory (install your kernel's build tree, or pass KDIR=<dir>)"
    explain_and_exit
fi
[ -f "$kdir/Makefile" ] || problem "no Makefile: not a kernel build directory"
if [ ! -f "$kdir/include/config/auto.conf" ]; then
    problem "no include/config/auto.conf: the tree is not configured and prepared"
    explain_and_exit
fi
# The release as kbuild states it (VERSION.PATCHLEVEL, the prefix of the kernel release).
release_file="$kdir/include/config/kernel.release"
if ! kernel_release="$(cat "$release_file" 2>/dev/null)" ||
    ! [[ "$kernel_release" =~ ^([0-9]+)\.([0-9]+) ]]; then
    problem "no kernel release in include/config/kernel.release: the tree is not prepared"
else
    version="${BASH_REMATCH[1]}" patchlevel="${BASH_REMATCH[2]}"
    oldest="${supported_releases[0]}" newest="${supported_releases[-1]}"
    release_number() { echo $((${1%%.*} * 1000 + ${1#*.})); }
    if [ "$(release_number "$version.$patchlevel")" -lt "$(release_number "$oldest")" ]; then
        problem "Linux $version.$patchlevel ($kernel_release) is older than the oldest release neuron_ds supports, $oldest: its kernel crate lacks the Rust API the module is written against. Use Linux $oldest or newer"
    elif [ "$(release_number "$version.$patchlevel")" -gt "$(release_number "$newest")" ]; then
        echo "neuron_ds: note: Linux $version.$patchlevel is newer than the newest release the module was tested with ($newest); building with $newest's kernel API" >&2
    fi
fi
if [ "$(config CONFIG_RUST)" != "y" ]; then
    problem "the kernel is built without Rust support (CONFIG_RUST is not set): it cannot load a Rust module"
    explain_and_exit
fi
[ -f "$kdir/Module.symvers" ] ||
    problem "no Module.symvers: the kernel was not built in this tree ('make modules_prepare' is not enough)"

# --- the Rust metadata of the kernel's crates, as Linux 7.3 lays them out
missing=()
for crate in core compiler_builtins ffi bindings uapi build_error pin_init kernel zerocopy; do
    [ -f "$kdir/rust/lib$crate.rmeta" ] || missing+=("rust/lib$crate.rmeta")
done
for proc_macro in macros pin_init_internal zerocopy_derive; do
    [ -f "$kdir/rust/lib$proc_macro.so" ] || missing+=("rust/lib$proc_macro.so")
done
if [ "$(config CONFIG_X86_64)" = "y" ] && [ ! -f "$kdir/scripts/target.json" ]; then
    missing+=("scripts/target.json")
fi
[ "${#missing[@]}" -eq 0 ] ||
    problem "the Rust artifacts of the kernel build are missing: ${missing[*]}"

# --- the same rustc: crate metadata only loads into the compiler that wrote it
if ! command -v "${RUSTC:-rustc}" >/dev/null && [ -x "$HOME/.cargo/bin/rustc" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
want_rustc="$(config CONFIG_RUSTC_VERSION_TEXT)"
if ! have_rustc="$("${RUSTC:-rustc}" --version 2>/dev/null | tr -d '#')"; then
    problem "no rustc on PATH; the module needs the kernel's rustc: $want_rustc"
elif [ "$have_rustc" != "$want_rustc" ]; then
    problem "rustc differs from the one that built the kernel: the kernel has '$want_rustc', PATH has '$have_rustc'"
fi

# --- bindgen: an out-of-tree build uses the kernel's generated bindings (rust/libbindings.rmeta)
# and runs no bindgen, so another one is only worth a note: it matters to whoever regenerates
# the kernel's bindings, and its layouts are the ones the module was compiled against.
want_bindgen="$(config CONFIG_BINDGEN_VERSION_TEXT)"
if [ -n "$want_bindgen" ] && have_bindgen="$("${BINDGEN:-bindgen}" --version 2>/dev/null | head -n1)" &&
    [ -n "$have_bindgen" ] && [ "$have_bindgen" != "$want_bindgen" ]; then
    echo "neuron_ds: note: bindgen differs from the one that generated the kernel's bindings: the kernel has '$want_bindgen', PATH has '$have_bindgen'. The module build runs no bindgen (it compiles against the kernel's generated bindings), so it goes on." >&2
fi

# --- the kernel's C toolchain
make_vars=()
cc_text="$(config CONFIG_CC_VERSION_TEXT)"
if [ "$(config CONFIG_CC_IS_CLANG)" = "y" ]; then
    major="$(sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' <<<"$cc_text")"
    llvm=""
    for suffix in "" "-$major"; do
        if [ "$("clang$suffix" --version 2>/dev/null | head -n1)" = "$cc_text" ]; then
            llvm="${suffix:-1}"
            break
        fi
    done
    if [ -z "$llvm" ] && [ -n "$major" ] && command -v "clang-$major" >/dev/null; then
        llvm="-$major" # the same major version: kbuild notes the difference and goes on
    fi
    if [ -z "$llvm" ]; then
        problem "the kernel was built by '$cc_text'; install that clang (clang-$major, lld-$major, llvm-$major)"
    elif [ "$(config CONFIG_LD_IS_LLD)" = "y" ] && ! command -v "ld.lld${llvm#1}" >/dev/null; then
        problem "the kernel was linked by ld.lld; install lld-$major (ld.lld${llvm#1})"
    fi
    make_vars+=("LLVM=$llvm")
elif ! command -v "${CC:-gcc}" >/dev/null; then
    problem "the kernel was built by '$cc_text', and there is no gcc on PATH"
fi

[ "${#problems[@]}" -eq 0 ] || explain_and_exit

if $check_only; then
    echo "${make_vars[*]}"
    exit 0
fi

args=()
for arg in "$@"; do
    case "$arg" in
    CC=* | LD=*)
        if [ "${#make_vars[@]}" -gt 0 ]; then
            echo "kbuild.sh: dropping $arg (${make_vars[*]} selects the kernel's own toolchain)" >&2
            continue
        fi
        ;;
    esac
    args+=("$arg")
done
exec make -C "$kdir" M="$src" "${make_vars[@]}" "${args[@]}"
