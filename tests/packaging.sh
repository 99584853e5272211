#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Packaging tests, run by tests/run.sh after the module build: the kernel-tree checks of
# qemu/kbuild.sh, modinfo of the built module, `make install DESTDIR=`, DKMS (a real
# `dkms add/build/status` with private trees against the cached kernel), the tools' Debian
# package, `make install-tools` and install.rst. Prints one TAP line per test ("ok N - ..."
# or "not ok N - ...", then "1..N"); exits non-zero if any failed.
#
# Usage: tests/packaging.sh base|debug
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
variant="${1:-base}"
cd "$root" || exit 1
# shellcheck source=qemu/env.sh
source qemu/env.sh

kdir="$(bash qemu/kernel.sh --dir "$variant")"
release="$(cat "$kdir/include/config/kernel.release")"
# The other supported releases' trees, by release (7.2 -> the cached base build of 7.2).
declare -A other_kdirs=()
for kver in "${KERNEL_RELEASES[@]}"; do
    [ "$kver" = "$KVER" ] || other_kdirs[$kver]="$(KVER="$kver" bash qemu/kernel.sh --dir base)"
done
module="build/module-$variant/rust/neuron_ds.ko"
version="$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' userspace/packaging/dkms.conf)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/tap.sh
source tests/tap.sh
# contains <file> <text>: the file holds the text (fixed string).
contains() { grep -qF -- "$2" "$1" || fail "$1 does not contain: $2"; }

# --- qemu/kbuild.sh: which kernel trees can build the module

# A copy of the tree's small files, like a headers package that has no Rust artifacts.
fake_tree() {
    local dir="$1"
    mkdir -p "$dir/include/config" "$dir/scripts"
    cp "$kdir/Makefile" "$kdir/Module.symvers" "$dir/"
    cp "$kdir/include/config/auto.conf" "$dir/include/config/"
    cp "$kdir/scripts/target.json" "$dir/scripts/"
}

kbuild_accepts_the_cached_tree() {
    local vars
    vars="$(bash qemu/kbuild.sh --check "$kdir")" || return 1
    [ "$vars" = "LLVM=$LLVM_SUFFIX" ] || fail "variables: '$vars', expected LLVM=$LLVM_SUFFIX"
}

kbuild_explains_a_tree_without_rust_metadata() {
    fake_tree "$tmp/headers"
    if bash qemu/kbuild.sh --check "$tmp/headers" 2>"$tmp/err"; then
        fail "accepted a tree without rust/"
    fi
    cat "$tmp/err"
    contains "$tmp/err" "the Rust artifacts of the kernel build are missing" &&
        contains "$tmp/err" "rust/libkernel.rmeta" &&
        contains "$tmp/err" "rust/libmacros.so" &&
        contains "$tmp/err" "install-extmod-build" &&
        contains "$tmp/err" "Documentation/install.rst"
}

kbuild_explains_a_kernel_without_rust() {
    fake_tree "$tmp/norust"
    sed -i '/^CONFIG_RUST=/d' "$tmp/norust/include/config/auto.conf"
    if bash qemu/kbuild.sh --check "$tmp/norust" 2>"$tmp/err"; then
        fail "accepted a kernel without CONFIG_RUST"
    fi
    cat "$tmp/err"
    contains "$tmp/err" "CONFIG_RUST is not set"
}

kbuild_explains_another_rustc() {
    printf '#!/bin/sh\necho "rustc 1.0.0 (00000000 2015-05-15)"\n' >"$tmp/rustc"
    chmod +x "$tmp/rustc"
    if RUSTC="$tmp/rustc" bash qemu/kbuild.sh --check "$kdir" 2>"$tmp/err"; then
        fail "accepted another rustc"
    fi
    cat "$tmp/err"
    contains "$tmp/err" "rustc differs from the one that built the kernel" &&
        contains "$tmp/err" "rustc 1.0.0"
}

kbuild_accepts_the_other_releases_trees() {
    local kver vars
    for kver in "${!other_kdirs[@]}"; do
        vars="$(bash qemu/kbuild.sh --check "${other_kdirs[$kver]}")" || return 1
        [ "$vars" = "LLVM=$LLVM_SUFFIX" ] || fail "Linux $kver: variables '$vars'" || return 1
    done
}

kbuild_supports_the_harness_releases() {
    local listed
    listed="$(sed -n 's/^supported_releases=(\(.*\))$/\1/p' qemu/kbuild.sh)"
    # kbuild.sh lists them oldest first, qemu/env.sh newest first.
    [ "$listed" = "$(printf '%s\n' "${KERNEL_RELEASES[@]}" | tac | paste -sd' ')" ] ||
        fail "kbuild.sh supports '$listed', qemu/env.sh has '${KERNEL_RELEASES[*]}'"
}

# A copy of the oldest supported release's complete tree (symbolic links to its files) that
# claims the release before it, as a kernel of that release would: everything else in it is
# fine, so the release is the only thing to refuse.
older_than_supported_tree() {
    local oldest="${KERNEL_RELEASES[-1]}" tree="$tmp/older-tree"
    local source_tree="${other_kdirs[$oldest]:-$kdir}"
    rm -rf "$tree" && cp -as "$source_tree/." "$tree/"
    rm "$tree/include/config/kernel.release"
    echo "${oldest%.*}.$((${oldest#*.} - 1)).9" >"$tree/include/config/kernel.release"
    echo "$tree"
}

kbuild_refuses_a_release_older_than_supported() {
    local tree oldest="${KERNEL_RELEASES[-1]}"
    local older="${oldest%.*}.$((${oldest#*.} - 1))"
    tree="$(older_than_supported_tree)"
    if bash qemu/kbuild.sh --check "$tree" 2>"$tmp/err"; then
        fail "accepted Linux $older"
    fi
    cat "$tmp/err"
    contains "$tmp/err" "Linux $older ($older.9) is older than the oldest release neuron_ds supports, $oldest" &&
        contains "$tmp/err" "Use Linux $oldest or newer" || return 1
    [ "$(grep -c '^  - ' "$tmp/err")" -eq 1 ] || fail "more than the release was refused"
    # The build itself stops there too, before kbuild compiles anything.
    if bash qemu/kbuild.sh "$tree" MO="$tmp/older-out" modules >"$tmp/build.log" 2>&1; then
        fail "built for Linux $older"
    fi
    contains "$tmp/build.log" "is older than the oldest release neuron_ds supports" || return 1
    ! grep -E 'RUSTC|error\[E|^error' "$tmp/build.log" || fail "the compiler ran" || return 1
    [ ! -e "$tmp/older-out" ] || fail "kbuild wrote $tmp/older-out"
}

kbuild_notes_another_bindgen() {
    local vars
    printf '#!/bin/sh\necho "bindgen 0.1.0"\n' >"$tmp/bindgen"
    chmod +x "$tmp/bindgen"
    vars="$(BINDGEN="$tmp/bindgen" bash qemu/kbuild.sh --check "$kdir" 2>"$tmp/err")" ||
        fail "refused: $(cat "$tmp/err")" || return 1
    cat "$tmp/err"
    [ "$vars" = "LLVM=$LLVM_SUFFIX" ] &&
        contains "$tmp/err" "bindgen differs from the one that generated the kernel's bindings" &&
        contains "$tmp/err" "the kernel has '$(sed -n 's/^CONFIG_BINDGEN_VERSION_TEXT="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$kdir/include/config/auto.conf")'" &&
        contains "$tmp/err" "PATH has 'bindgen 0.1.0'"
}

kbuild_explains_a_missing_tree() {
    if bash qemu/kbuild.sh --check "$tmp/nothing" 2>"$tmp/err"; then
        fail "accepted a missing directory"
    fi
    contains "$tmp/err" "there is no such directory"
}

# --- modinfo of the built module

# Parameters the sources declare: module! params, and hand-made parmtype= records.
declared_parameters() {
    {
        sed -n '/^module! {/,/^}/p' rust/neuron_ds.rs |
            sed -n '/^    params: {/,/^    },/p' | sed -n 's/^        \([a-z_][a-z0-9_]*\): .* {$/\1/p'
        # module_param!(VALUE: kind, "name", ...) in the crate root.
        awk '/^module_param!\($/ { getline; getline; gsub(/[ ",]/, ""); print }' rust/neuron_ds.rs
    } | sort -u
}

modinfo_describes_every_parameter() {
    local declared listed name description
    declared="$(declared_parameters)"
    [ -n "$declared" ] || fail "no parameters found in rust/"
    listed="$(modinfo -F parm "$module" | sed 's/:.*//' | sort -u)"
    modinfo "$module"
    [ "$declared" = "$listed" ] ||
        fail "declared: $(tr '\n' ' ' <<<"$declared"), modinfo: $(tr '\n' ' ' <<<"$listed")" || return 1
    while IFS= read -r line; do
        name="${line%%:*}"
        description="${line#*:}"
        # modinfo appends " (type)"; a parameter without a description shows only that.
        [[ "$description" =~ ^(.*)\([a-z0-9]+\)$ ]] && description="${BASH_REMATCH[1]}"
        [ -n "${description// /}" ] || fail "parameter $name has no description" || return 1
    done < <(modinfo -F parm "$module")
}

modinfo_has_description_author_license() {
    local field
    for field in description author license; do
        [ -n "$(modinfo -F "$field" "$module")" ] || fail "no $field" || return 1
    done
    [ "$(modinfo -F license "$module")" = GPL ] || fail "license is not GPL"
    [ "$(modinfo -F name "$module")" = neuron_ds ] || fail "name is not neuron_ds"
    modinfo -F vermagic "$module" | grep -q "^$release " || fail "vermagic is not for $release"
}

modprobe_example_names_every_parameter() {
    local name
    for name in $(modinfo -F parm "$module" | sed 's/:.*//'); do
        contains userspace/packaging/neuron_ds.conf "#options neuron_ds $name=" || return 1
    done
    # Commented out, so that installing it changes nothing.
    ! grep -q '^options' userspace/packaging/neuron_ds.conf || fail "an option is active"
}

# --- make install DESTDIR=

install_lays_out_module_rule_and_example() {
    local dest="$tmp/install" files expected
    make -s install KDIR="$kdir" DESTDIR="$dest" VARIANT="$variant" >"$tmp/out" 2>&1
    local status=$?
    cat "$tmp/out"
    [ "$status" -eq 0 ] || return 1
    ! grep -qi warning "$tmp/out" || fail "make install warned" || return 1
    files="$(cd "$dest" && find . -type f | sed 's|^\./||' | sort)"
    expected="$(printf '%s\n' etc/modprobe.d/neuron_ds.conf "lib/modules/$release/updates/rust/neuron_ds.ko" \
        usr/lib/udev/rules.d/60-neuron-ds.rules | sort)"
    [ "$files" = "$expected" ] || fail "installed:" "$files" || return 1
    cmp "$dest/usr/lib/udev/rules.d/60-neuron-ds.rules" userspace/packaging/60-neuron-ds.rules &&
        cmp "$dest/etc/modprobe.d/neuron_ds.conf" userspace/packaging/neuron_ds.conf &&
        cmp "$dest/lib/modules/$release/updates/rust/neuron_ds.ko" "$module"
}

depmod_indexes_the_staged_module() {
    local dest="$tmp/install"
    depmod -b "$dest" "$release" || return 1
    contains "$dest/lib/modules/$release/modules.dep" "updates/rust/neuron_ds.ko:" &&
        # modinfo and modprobe find the module by name through depmod's index.
        [ "$(modinfo -b "$dest" -k "$release" -F name neuron_ds)" = neuron_ds ] &&
        modprobe -d "$dest" -S "$release" --show-depends neuron_ds | grep -q "updates/rust/neuron_ds.ko"
}

install_keeps_an_edited_modprobe_file() {
    local dest="$tmp/install"
    echo "options neuron_ds devices=4" >"$dest/etc/modprobe.d/neuron_ds.conf"
    make -s install-files DESTDIR="$dest" | grep -q keeping &&
        [ "$(cat "$dest/etc/modprobe.d/neuron_ds.conf")" = "options neuron_ds devices=4" ]
}

install_mod_path_alone_stages_the_module() {
    local dest="$tmp/modpath"
    make -s install-module KDIR="$kdir" INSTALL_MOD_PATH="$dest" VARIANT="$variant" &&
        [ -f "$dest/lib/modules/$release/updates/rust/neuron_ds.ko" ]
}

udev_rule_is_well_formed() {
    local rules line
    rules="$(grep -v '^#' userspace/packaging/60-neuron-ds.rules | grep -v '^$')"
    [ "$(wc -l <<<"$rules")" -eq 1 ] || fail "expected one rule: $rules" || return 1
    line="$rules"
    # Every key: a known key, a match (==) or assignment (=) operator, a quoted value.
    IFS=',' read -ra pairs <<<"$line"
    for pair in "${pairs[@]}"; do
        pair="${pair# }"
        [[ "$pair" =~ ^(KERNEL|SUBSYSTEM)==\"[^\"]+\"$ || "$pair" =~ ^(GROUP|MODE)=\"[^\"]+\"$ ]] ||
            fail "malformed: $pair" || return 1
    done
    [[ "$line" == *'KERNEL=="neuron[0-9]*"'* && "$line" == *'SUBSYSTEM=="misc"'* ]] &&
        [[ "$line" == *'GROUP="neuron"'* && "$line" == *'MODE="0660"'* ]]
}

# --- DKMS

dkms_conf_matches_the_project() {
    local workspace_version
    workspace_version="$(sed -n 's/^version = "\(.*\)"$/\1/p' userspace/Cargo.toml | head -n1)"
    [ "$version" = "$workspace_version" ] ||
        fail "dkms.conf has $version, the Cargo workspace $workspace_version" || return 1
    # Sourced the way dkms reads it, with the variables it provides.
    (
        kernel_source_dir="$kdir"
        # shellcheck disable=SC1091
        source userspace/packaging/dkms.conf
        [ "$PACKAGE_NAME" = neuron-ds ] && [ "${BUILT_MODULE_NAME[0]}" = neuron_ds ] &&
            [ "${BUILT_MODULE_LOCATION[0]}" = rust/ ] &&
            [ "${MAKE[0]}" = "bash packaging/kbuild.sh '$kdir' modules" ] &&
            [ "$BUILD_EXCLUSIVE_CONFIG" = CONFIG_RUST ]
    )
}

dkms=(dkms --dkmstree "$tmp/dkms" --sourcetree "$tmp/dkms-root/usr/src")

dkms_source_tree_is_complete() {
    local src="$tmp/dkms-root/usr/src/neuron-ds-$version"
    make -s dkms-source DESTDIR="$tmp/dkms-root" || return 1
    [ -f "$src/dkms.conf" ] && [ -f "$src/Kbuild" ] && [ -x "$src/packaging/kbuild.sh" ] &&
        cmp "$src/rust/neuron_ds.rs" rust/neuron_ds.rs &&
        cmp "$src/rust/shim/exec_state_layout.c" rust/shim/exec_state_layout.c &&
        cmp "$src/userspace/nds-abi/src/layout.rs" userspace/nds-abi/src/layout.rs
}

dkms_adds_and_builds_against_the_kernel_tree() {
    mkdir -p "$tmp/dkms"
    "${dkms[@]}" add -m neuron-ds -v "$version" || return 1
    "${dkms[@]}" build -m neuron-ds -v "$version" -k "$release" --kernelsourcedir "$kdir" || {
        cat "$tmp/dkms/neuron-ds/$version/build/make.log"
        return 1
    }
    local built="$tmp/dkms/neuron-ds/$version/$release/x86_64/module/neuron_ds.ko"
    [ -f "$built" ] || fail "no $built" || return 1
    modinfo -F vermagic "$built" | grep -q "^$release " || fail "vermagic"
}

# What DKMS installs carries no KUnit suite (a CONFIG_KUNIT kernel would run it at every load
# and count itself tainted by a test); the same sources built as the harness builds them
# (NEURON_DS_KUNIT=1) do, so the check can see one (readelf -W: without it, readelf cuts long
# section names and the check would find none in either).
dkms_builds_without_the_kunit_suites() {
    local built="$tmp/dkms/neuron-ds/$version/$release/x86_64/module/neuron_ds.ko"
    local kunit="$tmp/kunit-build"
    readelf -SW "$built" >"$tmp/dkms-sections" || return 1
    ! grep -q kunit_test_suites "$tmp/dkms-sections" || fail "the DKMS build has KUnit suites" || return 1
    mkdir -p "$kunit"
    MAKE=make bash qemu/kbuild.sh "$kdir" MO="$kunit" NEURON_DS_KUNIT=1 modules \
        >"$tmp/kunit-build.log" 2>&1 || { cat "$tmp/kunit-build.log"; return 1; }
    readelf -SW "$kunit/rust/neuron_ds.ko" | grep -q kunit_test_suites || fail "the test build has none"
}

dkms_status_reports_built() {
    "${dkms[@]}" status -m neuron-ds -v "$version" | tee "$tmp/status"
    contains "$tmp/status" "neuron-ds/$version, $release, x86_64: built"
}

dkms_builds_against_the_other_releases_trees() {
    local kver tree other built
    for kver in "${!other_kdirs[@]}"; do
        tree="${other_kdirs[$kver]}"
        other="$(cat "$tree/include/config/kernel.release")"
        "${dkms[@]}" build -m neuron-ds -v "$version" -k "$other" --kernelsourcedir "$tree" || {
            cat "$tmp/dkms/neuron-ds/$version/build/make.log"
            return 1
        }
        built="$tmp/dkms/neuron-ds/$version/$other/x86_64/module/neuron_ds.ko"
        modinfo -F vermagic "$built" | grep -q "^$other " || fail "vermagic of $built" || return 1
        "${dkms[@]}" status -m neuron-ds -v "$version" -k "$other" |
            grep -qx "neuron-ds/$version, $other, x86_64: built" || fail "dkms status for $other" || return 1
    done
}

dkms_refuses_a_release_older_than_supported() {
    local tree older
    tree="$(older_than_supported_tree)"
    older="$(cat "$tree/include/config/kernel.release")"
    if "${dkms[@]}" build -m neuron-ds -v "$version" -k "$older" --kernelsourcedir "$tree" >"$tmp/out" 2>&1; then
        fail "dkms built for $older"
    fi
    local log="$tmp/dkms/neuron-ds/$version/build/make.log"
    cat "$log"
    contains "$log" "is older than the oldest release neuron_ds supports" || return 1
    ! grep -E 'RUSTC|error\[E' "$log" || fail "the compiler ran"
}

dkms_skips_a_kernel_without_rust() {
    local tree="$tmp/norust-tree"
    fake_tree "$tree"
    grep -v '^CONFIG_RUST=' "$kdir/.config" >"$tree/.config"
    echo "$release-norust" >"$tree/include/config/kernel.release"
    "${dkms[@]}" build -m neuron-ds -v "$version" -k "$release-norust" --kernelsourcedir "$tree" \
        >"$tmp/out" 2>&1
    local status=$?
    cat "$tmp/out"
    # 77: dkms's "skipped" status; nothing may have been built.
    [ "$status" -eq 77 ] && contains "$tmp/out" "BUILD_EXCLUSIVE" &&
        [ ! -e "$tmp/dkms/neuron-ds/$version/$release-norust/x86_64/module" ]
}

# --- installing into the running system, inside a private mount namespace whose /etc, /usr
# and /var are throw-away overlays: the machine itself is never touched. The kernel counts
# as installed: /lib/modules/<release>/build points to the cached tree.

live() {
    cat >"$tmp/sandbox.sh" <<'SANDBOX'
set -e
upper="$1"
shift
for dir in etc usr var; do
    mkdir -p "$upper/$dir/upper" "$upper/$dir/work"
    mount -t overlay overlay -o "lowerdir=/$dir,upperdir=$upper/$dir/upper,workdir=$upper/$dir/work" "/$dir"
done
mkdir -p "/lib/modules/$RELEASE"
ln -sfn "$KDIR" "/lib/modules/$RELEASE/build"
# What the kernel's own modules_install leaves there, for depmod.
cp "$KDIR"/modules.order "$KDIR"/modules.builtin "$KDIR"/modules.builtin.modinfo "/lib/modules/$RELEASE/"
"$@"
SANDBOX
    local upper
    upper="$(mktemp -d "$tmp/live.XXXX")"
    RELEASE="$release" KDIR="$kdir" unshare --mount --propagation private \
        bash "$tmp/sandbox.sh" "$upper" "$@"
}

live_install_checks() {
    make -s install KDIR="$kdir" VARIANT="$variant" >"$tmp/live-install.log" 2>&1 ||
        { cat "$tmp/live-install.log"; false; }
    ! grep -i warning "$tmp/live-install.log"
    [ "$(modinfo -k "$release" -F filename neuron_ds)" = "/lib/modules/$release/updates/rust/neuron_ds.ko" ]
    getent group neuron
    cmp /usr/lib/udev/rules.d/60-neuron-ds.rules userspace/packaging/60-neuron-ds.rules
    cmp /etc/modprobe.d/neuron_ds.conf userspace/packaging/neuron_ds.conf
}

live_dkms_install_checks() {
    make -s dkms-install KDIR="$kdir"
    dkms status neuron-ds | grep -x "neuron-ds/$version, $release, x86_64: installed"
    [ "$(modinfo -k "$release" -F filename neuron_ds)" = "/lib/modules/$release/updates/dkms/neuron_ds.ko" ]
    getent group neuron
    [ -f "/usr/src/neuron-ds-$version/dkms.conf" ]
    # Again: the earlier registration is replaced.
    make -s dkms-install KDIR="$kdir"
    [ "$(dkms status neuron-ds | wc -l)" -eq 1 ]
}

live_install_works() {
    export -f live_install_checks
    export kdir variant release tmp
    live bash -c 'set -e; live_install_checks'
}

live_dkms_install_works() {
    export -f live_dkms_install_checks
    export kdir release version
    live bash -c 'set -e; live_dkms_install_checks'
}

# --- the tools' Debian package

deb=""
deb_builds() {
    bash userspace/packaging/deb.sh --profile dev --fast --output "$tmp/deb" || return 1
    deb="$(ls "$tmp/deb"/neuron-ds-tools_*.deb)" && [ -f "$deb" ]
}

deb_control_fields() {
    [ -n "$deb" ] || fail "no package" || return 1
    dpkg-deb -f "$deb" >"$tmp/control"
    cat "$tmp/control"
    contains "$tmp/control" "Package: neuron-ds-tools" &&
        contains "$tmp/control" "Version: $version-1" &&
        contains "$tmp/control" "Architecture: amd64" || return 1
    grep -q '^Depends:.*libc6' "$tmp/control" || fail "no libc6 dependency"
}

# The package's files, without directories, as "mode path".
deb_files() {
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\.\//, "", $6); print $1, $6 }' | sort -k2
}

deb_ships_binaries_pages_completions_rule() {
    [ -n "$deb" ] || fail "no package" || return 1
    deb_files >"$tmp/files"
    local tool page
    cat "$tmp/files"
    for tool in nrt-status nds-loadgen nds-metrics nds-monitor nds-top nds-ls; do
        contains "$tmp/files" "-rwxr-xr-x usr/bin/$tool" &&
            contains "$tmp/files" "usr/share/man/man1/$tool.1.gz" &&
            contains "$tmp/files" "usr/share/bash-completion/completions/$tool" &&
            contains "$tmp/files" "usr/share/zsh/vendor-completions/_$tool" &&
            contains "$tmp/files" "usr/share/fish/vendor_completions.d/$tool.fish" || return 1
    done
    for page in nds-loadgen-run nds-loadgen-baseline nds-loadgen-compare nds-monitor-serve; do
        contains "$tmp/files" "usr/share/man/man1/$page.1.gz" || return 1
    done
    contains "$tmp/files" "-rw-r--r-- usr/lib/udev/rules.d/60-neuron-ds.rules" &&
        contains "$tmp/files" "usr/share/doc/neuron-ds-tools/examples/modprobe.d/neuron_ds.conf" &&
        contains "$tmp/files" "usr/share/doc/neuron-ds-tools/copyright" || return 1
    # Only the six tools are programs.
    [ "$(grep -c ' usr/bin/' "$tmp/files")" -eq 6 ] || fail "usr/bin holds more than the tools"
}

deb_contents_work() {
    [ -n "$deb" ] || fail "no package" || return 1
    local tree="$tmp/deb-tree" tool
    dpkg-deb -x "$deb" "$tree"
    cmp "$tree/usr/lib/udev/rules.d/60-neuron-ds.rules" userspace/packaging/60-neuron-ds.rules || return 1
    for tool in nrt-status nds-loadgen nds-metrics nds-monitor nds-top nds-ls; do
        "$tree/usr/bin/$tool" --version | grep -qx "$tool $version" || fail "$tool --version" || return 1
        MANWIDTH=80 man -l "$tree/usr/share/man/man1/$tool.1.gz" >"$tmp/page" 2>"$tmp/man.err" ||
            fail "man $tool: $(cat "$tmp/man.err")" || return 1
        contains "$tmp/page" "SYNOPSIS" && contains "$tmp/page" "--help" || return 1
    done
    bash -n "$tree/usr/share/bash-completion/completions/nds-monitor"
}

live_deb_install_checks() {
    ! getent group neuron
    dpkg -i "$deb"
    dpkg -s neuron-ds-tools | grep -x "Status: install ok installed"
    getent group neuron
    nds-top --version | grep -x "nds-top $version"
    [ "$(man -w nds-loadgen-run)" = /usr/share/man/man1/nds-loadgen-run.1.gz ]
    cmp /usr/lib/udev/rules.d/60-neuron-ds.rules userspace/packaging/60-neuron-ds.rules
    dpkg -r neuron-ds-tools
    [ ! -e /usr/bin/nds-top ] && [ ! -e /usr/lib/udev/rules.d/60-neuron-ds.rules ]
}

live_deb_install_works() {
    [ -n "$deb" ] || fail "no package" || return 1
    export -f live_deb_install_checks
    export deb version
    live bash -c 'set -e; live_deb_install_checks'
}

deb_postinst_creates_the_group() {
    [ -n "$deb" ] || fail "no package" || return 1
    dpkg-deb -e "$deb" "$tmp/deb-control"
    [ -x "$tmp/deb-control/postinst" ] && sh -n "$tmp/deb-control/postinst" &&
        contains "$tmp/deb-control/postinst" "groupadd --system neuron" || return 1
    ! grep -q '#DEBHELPER#' "$tmp/deb-control/postinst" || fail "#DEBHELPER# left in postinst"
}

# --- cargo install, and the documentation

install_tools_lays_out_binaries_pages_completions() {
    local dest="$tmp/tools" tool
    make -s install-tools DESTDIR="$dest" PREFIX=/usr/local CARGO_INSTALL_ARGS=--debug || return 1
    for tool in nrt-status nds-loadgen nds-metrics nds-monitor nds-top nds-ls; do
        "$dest/usr/local/bin/$tool" --version | grep -qx "$tool $version" &&
            [ -f "$dest/usr/local/share/man/man1/$tool.1" ] &&
            [ -f "$dest/usr/local/share/bash-completion/completions/$tool" ] &&
            [ -f "$dest/usr/local/share/zsh/site-functions/_$tool" ] &&
            [ -f "$dest/usr/local/share/fish/vendor_completions.d/$tool.fish" ] ||
            fail "incomplete install of $tool" || return 1
    done
    # --no-track: no cargo bookkeeping files in the prefix.
    [ ! -e "$dest/usr/local/.crates.toml" ] || fail "cargo's .crates.toml in the prefix"
}

install_rst_is_valid_restructuredtext() { rst_is_valid Documentation/install.rst; }

# --- the functions rust/ declares by hand (extern "C"), which bindgen does not check

# Each: the Rust declaration as rust/ writes it, TAB, the header, TAB, the C prototype.
hand_declared_functions() {
    cat <<'DECLARED'
fn init_pseudo(fc: *mut bindings::fs_context, magic: c_ulong) -> *mut c_void;	include/linux/pseudo_fs.h	struct pseudo_fs_context *init_pseudo(struct fs_context *fc, unsigned long magic);
fn kcov_common_handle() -> bindings::kcov_common_handle_id;	include/linux/kcov.h	struct kcov_common_handle_id kcov_common_handle(void);
fn kcov_remote_start(handle: u64);	include/linux/kcov.h	void kcov_remote_start(u64 handle);
fn kcov_remote_stop();	include/linux/kcov.h	void kcov_remote_stop(void);
DECLARED
}

# One line per C declaration of the header, ending in ';': comments and preprocessor lines
# dropped, whitespace squeezed.
c_declarations() {
    python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
text = re.sub(r"//[^\n]*", " ", text)
text = text.replace("\\\n", " ")
text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
for piece in re.split(r"[;{}]", text):
    piece = re.sub(r"\s+", " ", piece).strip()
    piece = piece.replace("( ", "(").replace(" )", ")")
    if piece:
        print(piece + ";")
PY
}

hand_declared_functions_match_every_release_header() {
    local rust header prototype tree declared listed
    declared="$(grep -rhA12 'extern "C" {' rust | sed -n 's/^ *\(fn [a-z_]*(.*;\)$/\1/p' | sort)"
    listed="$(hand_declared_functions | cut -f1 | sort)"
    [ "$declared" = "$listed" ] ||
        fail "rust/ declares by hand: $declared; checked here: $listed" || return 1
    while IFS=$'\t' read -r rust header prototype; do
        for tree in "$kdir" "${other_kdirs[@]}"; do
            # Through a file: grep -q stops reading at the first match, which under pipefail
            # would fail the pipeline on the writer's broken pipe.
            c_declarations "$tree/source/$header" >"$tmp/declarations" || return 1
            grep -qxF -- "$prototype" "$tmp/declarations" ||
                fail "$tree/source/$header does not declare: $prototype (rust/: $rust)" || return 1
        done
    done < <(hand_declared_functions)
}

check "kbuild.sh accepts the cached kernel tree and picks its clang" kbuild_accepts_the_cached_tree
check "kbuild.sh explains a tree without the Rust metadata (headers package)" kbuild_explains_a_tree_without_rust_metadata
check "kbuild.sh explains a kernel without CONFIG_RUST" kbuild_explains_a_kernel_without_rust
check "kbuild.sh explains a rustc other than the kernel's" kbuild_explains_another_rustc
check "kbuild.sh explains a missing tree" kbuild_explains_a_missing_tree
check "kbuild.sh accepts the other supported releases' trees" kbuild_accepts_the_other_releases_trees
check "kbuild.sh supports the releases the harness builds" kbuild_supports_the_harness_releases
check "kbuild.sh refuses a release older than the oldest supported, before compiling" kbuild_refuses_a_release_older_than_supported
check "kbuild.sh notes a bindgen other than the kernel's, naming both, and goes on" kbuild_notes_another_bindgen
check "modinfo lists every declared parameter, each with a description" modinfo_describes_every_parameter
check "modinfo has description, author, license, name, vermagic" modinfo_has_description_author_license
check "the modprobe.d example names every parameter, all commented out" modprobe_example_names_every_parameter
check "make install DESTDIR= lays out the module, udev rule and modprobe.d example" install_lays_out_module_rule_and_example
check "depmod indexes the staged module; modinfo/modprobe find it by name" depmod_indexes_the_staged_module
check "make install keeps an edited modprobe.d file" install_keeps_an_edited_modprobe_file
check "make install-module INSTALL_MOD_PATH= stages the module" install_mod_path_alone_stages_the_module
check "the udev rule is well formed (0660, group neuron, misc neuron[0-9]*)" udev_rule_is_well_formed
check "dkms.conf parses as dkms sources it and matches the project" dkms_conf_matches_the_project
check "make dkms-source stages a complete DKMS tree" dkms_source_tree_is_complete
check "dkms add + build against the kernel tree" dkms_adds_and_builds_against_the_kernel_tree
check "the DKMS build carries no KUnit suite, the harness's does" dkms_builds_without_the_kunit_suites
check "dkms status reports the module built" dkms_status_reports_built
check "dkms build against the other supported releases' trees" dkms_builds_against_the_other_releases_trees
check "dkms build refuses a release older than the oldest supported (make.log says why)" dkms_refuses_a_release_older_than_supported
check "dkms skips a kernel without CONFIG_RUST" dkms_skips_a_kernel_without_rust
check "make install on the live system (sandboxed): module, depmod, group, udev rule" live_install_works
check "make dkms-install on the live system (sandboxed): installed, and again" live_dkms_install_works
check "userspace/packaging/deb.sh builds the .deb" deb_builds
check ".deb control fields" deb_control_fields
check ".deb ships binaries, man pages, completions, udev rule" deb_ships_binaries_pages_completions_rule
check ".deb binaries run, pages render, rule is the project's" deb_contents_work
check ".deb postinst creates the neuron group" deb_postinst_creates_the_group
check ".deb installs and removes with dpkg on the live system (sandboxed)" live_deb_install_works
check "make install-tools DESTDIR= installs binaries, pages, completions" install_tools_lays_out_binaries_pages_completions
check "Documentation/install.rst is valid reStructuredText" install_rst_is_valid_restructuredtext
check "every function rust/ declares by hand has that signature in every supported release's header" hand_declared_functions_match_every_release_header
echo "1..$number"
[ "$failures" -eq 0 ]
