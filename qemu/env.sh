# Shared settings for the qemu/ scripts; sourced, never run.
# Everything built or downloaded lives outside the repository, under CACHE_DIR.
CACHE_DIR="${NEURON_DS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/neuron-ds}"
KERNEL_PACKAGE=linux-source-7.3
KERNEL_SRC="$CACHE_DIR/src/$KERNEL_PACKAGE"
TOOLS_DIR="$CACHE_DIR/tools"
BINDGEN_VERSION=0.72.1
BINDGEN="$TOOLS_DIR/bin/bindgen"
# cargo-deb builds the tools' Debian package (make deb, the packaging tests).
CARGO_DEB_VERSION=3.8.0
CARGO_DEB="$TOOLS_DIR/bin/cargo-deb"
LLVM_SUFFIX=-19
GUEST_TARGET=x86_64-unknown-linux-musl
export PATH="$TOOLS_DIR/bin:$HOME/.cargo/bin:$PATH"
