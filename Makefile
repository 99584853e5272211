# SPDX-License-Identifier: GPL-2.0
#
# neuron-ds top-level entry points. Kbuild reads ./Kbuild, never this file, so this
# Makefile only drives the host side:
#
#   make              build rust/neuron_ds.ko against the cached guest kernel (or KDIR=...)
#   make CLIPPY=1     the same, with clippy
#   make deps         install every dependency (Debian packages, rust-src, bindgen, kernel source)
#   make test         host tests + KUnit in QEMU + guest integration tests, one summary line
#   make test-debug   the same on the debug kernel (KASAN, lockdep, Rust debug assertions)
#   make demo         the main job: boot the guest, load the module, show it working
#   make qemu-run EXTRA=<dir> CMD='<command>'   run your own program against the module
#   make rustfmt / make rustfmtcheck            format / check the module's Rust sources

SHELL := /bin/bash
ROOT := $(CURDIR)
VARIANT ?= base
LLVM_SUFFIX := -19
KERNEL_STAMP_DEPS := qemu/kernel.config qemu/kernel-debug.config qemu/kernel.sh qemu/env.sh

# KDIR given on the command line wins; otherwise the cached build of $(VARIANT).
ifeq ($(origin KDIR),undefined)
KDIR_FROM_CACHE := 1
endif

MODULE_OUT = $(ROOT)/build/module-$(VARIANT)
MODULE = $(MODULE_OUT)/rust/neuron_ds.ko

.PHONY: all module deps kernel test test-debug demo qemu-run rustfmt rustfmtcheck clean

all: module

deps:
	bash qemu/deps.sh

kernel: deps
	bash qemu/kernel.sh $(VARIANT) >/dev/null

module: $(if $(KDIR_FROM_CACHE),kernel)
	@kdir="$(if $(KDIR_FROM_CACHE),$$(bash qemu/kernel.sh --dir $(VARIANT)),$(KDIR))"; \
	mkdir -p "$(MODULE_OUT)"; \
	source qemu/env.sh; \
	$(MAKE) -C "$$kdir" M="$(ROOT)" MO="$(MODULE_OUT)" LLVM=$(LLVM_SUFFIX) \
		$(if $(CLIPPY),CLIPPY=1) modules

rustfmt rustfmtcheck: kernel
	@source qemu/env.sh; \
	rustfmt --edition 2021 $(if $(filter rustfmtcheck,$@),--check) rust/*.rs

test:
	bash tests/run.sh base

test-debug:
	bash tests/run.sh debug

demo:
	bash qemu/demo.sh

qemu-run:
	bash qemu/qemu-run.sh "$(VARIANT)" "$(EXTRA)" "$(CMD)"

clean:
	rm -rf build
