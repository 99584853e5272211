# SPDX-License-Identifier: GPL-2.0
#
# neuron-ds top-level entry points. Kbuild reads ./Kbuild, never this file, so this
# Makefile only drives the host side:
#
#   make              build rust/neuron_ds.ko against the cached guest kernel (or KDIR=...)
#   make CLIPPY=1     the same, with clippy
#   make KUNIT=1      the same, with the KUnit suites compiled in (they run at insmod on a
#                     CONFIG_KUNIT kernel, which then counts as tainted by a test; the harness
#                     builds this way, installs and DKMS never do)
#   make deps         install every dependency (Debian packages, rust-src, bindgen, kernel source)
#   make test         host tests + KUnit in QEMU + guest integration tests on Linux 7.3, and
#                     KUnit + guest tests on Linux 7.2 too; one summary line
#   make test-debug   the same on the debug kernel (KASAN, lockdep, Rust debug assertions)
#   make stress       full stress campaign in the guest (CYCLES=, PROCESSES=, VARIANT=debug)
#   make fuzz-ioctl   full syscall fuzzer in the guest (CALLS=, SEED=, VARIANT=debug)
#   make faults       fault campaign (every failure point of the module, kmemleak) and unload
#                     under load, on the cov kernel (VARIANT=debug: under KASAN and lockdep,
#                     where loading alone takes hours; FAULTS_SHORT=1: the short form)
#   make coverage     the campaigns on the cov kernel (KCOV): module PCs reached, per campaign
#   make demo         the main job: boot the guest, load the module, show it working
#   make test-under-load  the guest passes of every release and the host tests while a CPU hog
#                     keeps every core busy, UNDER_LOAD_RUNS times (default 3; not part of make test)
#   make bench        host + guest benchmarks as one table (not part of make test)
#   make soak         nds-monitor serve under a day of a busy host, compressed (SOAK_DURATION=
#                     seconds, default 600; not part of make test; tests/soak.py)
#   make qemu-run EXTRA=<dir> CMD='<command>'   run your own program against the module
#   KVER=7.2|7.3      the kernel release of make, make kernel, make qemu-run, make demo ...
#                     (default: the newest, 7.3; qemu/env.sh lists the supported ones)
#   make rustfmt / make rustfmtcheck            format / check the module's Rust sources
#
# Installing on a host (Documentation/install.rst); KDIR defaults to the running kernel's
# build tree there, and DESTDIR/INSTALL_MOD_PATH stage everything under a directory:
#   make install          the module (modules_install, depmod), udev rule, modprobe.d example
#   make dkms-install     the module through DKMS (rebuilt for every new kernel)
#   make dkms-source      only stage the DKMS source tree (/usr/src/neuron-ds-<version>)
#   make deb              the tools as a Debian package (target/debian/ of userspace/)
#   make install-tools    the tools with cargo install, plus their man pages and completions
#
# Kubernetes (Documentation/kubernetes.rst):
#   make image            the container image, reproducibly, as an OCI archive:
#                         build/nds-monitor-image.tar (userspace/packaging/image.sh)

SHELL := /bin/bash
ROOT := $(CURDIR)
VARIANT ?= base
KERNEL_STAMP_DEPS := qemu/kernel.config qemu/kernel-faults.config qemu/kernel-debug.config \
	qemu/kernel-cov.config qemu/kernel.sh qemu/env.sh

# KDIR given on the command line wins; otherwise the cached build of $(VARIANT).
ifeq ($(origin KDIR),undefined)
KDIR_FROM_CACHE := 1
endif

# build/module-<variant> for the newest release, build/module-<variant>-<release> for another.
MODULE_OUT := $(ROOT)/build/module-$(VARIANT)$(shell KVER='$(KVER)' bash -c 'source qemu/env.sh && echo "$$KVER_SUFFIX"')
MODULE = $(MODULE_OUT)/rust/neuron_ds.ko

.PHONY: all module deps kernel test test-debug test-under-load stress fuzz-ioctl faults coverage demo bench qemu-run rustfmt rustfmtcheck clean \
	install install-module install-files dkms-source dkms-install dkms-preflight deb install-tools image

all: module

# DEPS_SCOPE=--demo (qemu/deps.sh): only what the demo needs, for make demo's module build.
deps:
	bash qemu/deps.sh $(DEPS_SCOPE)
	bash qemu/cargo-targets.sh

kernel: deps
	bash qemu/kernel.sh $(VARIANT) >/dev/null

# The cov variant instruments the module for KCOV, with line tables (which leave the code as
# it is) so that tests/coverage_sites.py can name each point's source line.
COV_FLAGS := KCOV_INSTRUMENT=y KRUSTFLAGS=-Cdebuginfo=line-tables-only

# qemu/kbuild.sh checks that the tree can build a Rust module and picks its toolchain.
module: $(if $(KDIR_FROM_CACHE),kernel)
	@kdir="$(if $(KDIR_FROM_CACHE),$$(bash qemu/kernel.sh --dir $(VARIANT)),$(KDIR))"; \
	mkdir -p "$(MODULE_OUT)"; \
	source qemu/env.sh; \
	MAKE="$(MAKE)" bash qemu/kbuild.sh "$$kdir" MO="$(MODULE_OUT)" \
		$(if $(CLIPPY),CLIPPY=1) $(if $(filter 1,$(KUNIT)),NEURON_DS_KUNIT=1) \
		$(if $(filter cov,$(VARIANT)),$(COV_FLAGS)) modules

rustfmt rustfmtcheck: kernel
	@source qemu/env.sh; \
	rustfmt --edition 2021 $(if $(filter rustfmtcheck,$@),--check) rust/*.rs rust/*/*.rs

test:
	bash tests/run.sh base

test-debug:
	bash tests/run.sh debug

test-under-load:
	bash tests/under-load.sh

stress:
	VARIANT=$(VARIANT) bash tests/campaign.sh stress

fuzz-ioctl:
	VARIANT=$(VARIANT) bash tests/campaign.sh fuzz

faults:
	VARIANT=$(if $(filter base,$(VARIANT)),cov,$(VARIANT)) bash tests/campaign.sh faults

coverage:
	bash tests/coverage.sh

demo:
	bash qemu/demo.sh

bench:
	bash tests/bench.sh

# The release tools, as shipped; tests/soak.py reads SOAK_* from the environment.
.PHONY: soak
soak:
	cd userspace && cargo build --release -p nds-monitor -p nds-loadgen
	python3 tests/soak.py

qemu-run:
	bash qemu/qemu-run.sh "$(VARIANT)" "$(EXTRA)" "$(CMD)"

clean:
	rm -rf build

# --- installing on a host --------------------------------------------------------------

# The build tree of the kernel to install for: KDIR, else the running kernel's.
INSTALL_KDIR = $(if $(KDIR_FROM_CACHE),/lib/modules/$(shell uname -r)/build,$(KDIR))
UDEV_RULES_DIR ?= /usr/lib/udev/rules.d
MODPROBE_DIR ?= /etc/modprobe.d
PREFIX ?= /usr/local
DKMS_NAME := neuron-ds
DKMS_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"$$/\1/p' userspace/packaging/dkms.conf)
DKMS_TREE = $(DESTDIR)/usr/src/$(DKMS_NAME)-$(DKMS_VERSION)
# Installing into the running system (not staging under DESTDIR or INSTALL_MOD_PATH).
LIVE = $(if $(DESTDIR)$(INSTALL_MOD_PATH),,1)
# The tools, as the Debian package lists them (their crates are named the same).
TOOLS := $(shell sed -n 's|^ *\["target/release/\([^/"]*\)".*|\1|p' userspace/nds-dist/Cargo.toml)

install: install-module install-files

# modules_install puts the module in <INSTALL_MOD_PATH>/lib/modules/<release>/updates/rust/.
# A live install runs depmod; a staged one leaves the index to whoever installs the files
# (kbuild's own depmod run would index a staging tree that lacks the kernel's modules).
install-module:
	@$(MAKE) --no-print-directory module KDIR="$(INSTALL_KDIR)"
	@source qemu/env.sh; \
	$(if $(LIVE),,DEPMOD=true) MAKE="$(MAKE)" bash qemu/kbuild.sh "$(INSTALL_KDIR)" \
		MO="$(MODULE_OUT)" INSTALL_MOD_PATH="$(DESTDIR)$(INSTALL_MOD_PATH)" modules_install
	$(if $(LIVE),depmod -a "$$(cat "$(INSTALL_KDIR)/include/config/kernel.release")")

# The udev rule and the modprobe.d example (an existing one is the administrator's: kept);
# live, also the rule's "neuron" group, and the rule applied to existing nodes.
install-files:
	install -D -m 644 userspace/packaging/60-neuron-ds.rules "$(DESTDIR)$(UDEV_RULES_DIR)/60-neuron-ds.rules"
	@if [ -e "$(DESTDIR)$(MODPROBE_DIR)/neuron_ds.conf" ]; then \
		echo "keeping $(DESTDIR)$(MODPROBE_DIR)/neuron_ds.conf"; \
	else \
		install -D -m 644 userspace/packaging/neuron_ds.conf "$(DESTDIR)$(MODPROBE_DIR)/neuron_ds.conf"; \
	fi
ifneq ($(LIVE),)
	getent group neuron >/dev/null || groupadd --system neuron
	@if [ -d /run/udev ] && command -v udevadm >/dev/null; then \
		udevadm control --reload-rules && \
		udevadm trigger --subsystem-match=misc --sysname-match='neuron[0-9]*'; \
	fi
endif

# What DKMS builds from: dkms.conf at the top, the module's sources, the shared wire-format
# files it compiles, and the build wrapper.
dkms-source:
	rm -rf "$(DKMS_TREE)"
	install -D -m 644 userspace/packaging/dkms.conf "$(DKMS_TREE)/dkms.conf"
	install -m 644 Kbuild "$(DKMS_TREE)/Kbuild"
	install -D -m 644 -t "$(DKMS_TREE)/rust" rust/*.rs
	for dir in rust/*/; do install -D -m 644 -t "$(DKMS_TREE)/$$dir" "$$dir"*.rs; done
	install -m 644 -t "$(DKMS_TREE)/rust/shim" rust/shim/*.c
	install -D -m 644 -t "$(DKMS_TREE)/userspace/nds-abi/src" userspace/nds-abi/src/*.rs
	install -D -m 755 -t "$(DKMS_TREE)/packaging" qemu/kbuild.sh

# Registers, builds and installs the module with DKMS for the running kernel (or KDIR's),
# replacing an earlier registration of the same version.
dkms-install: dkms-preflight
	@$(MAKE) --no-print-directory dkms-source
	@release="$$(cat "$(INSTALL_KDIR)/include/config/kernel.release" 2>/dev/null || uname -r)"; \
	if dkms status -m $(DKMS_NAME) -v $(DKMS_VERSION) | grep -q .; then \
		dkms remove -m $(DKMS_NAME) -v $(DKMS_VERSION) --all; \
	fi; \
	dkms add -m $(DKMS_NAME) -v $(DKMS_VERSION) && \
	dkms build -m $(DKMS_NAME) -v $(DKMS_VERSION) -k "$$release" --kernelsourcedir "$(INSTALL_KDIR)" && \
	dkms install -m $(DKMS_NAME) -v $(DKMS_VERSION) -k "$$release"
	@$(MAKE) --no-print-directory install-files

dkms-preflight:
	@[ -z "$(DESTDIR)" ] || { echo "dkms-install works on this system; stage with 'make dkms-source DESTDIR=...'" >&2; exit 1; }
	@command -v dkms >/dev/null || { echo "dkms is not installed (apt-get install dkms)" >&2; exit 1; }
	@bash qemu/kbuild.sh --check "$(INSTALL_KDIR)" >/dev/null

# The pinned cargo-deb first; DEB_PROFILE=<cargo profile> packages another profile's build.
deb:
	bash qemu/deps.sh --deb
	bash userspace/packaging/deb.sh $(if $(DEB_PROFILE),--profile $(DEB_PROFILE))

# cargo install of every tool into $(DESTDIR)$(PREFIX)/bin (reusing userspace/target), and the
# man pages and completions where man and the shells look under that prefix.
# CARGO_INSTALL_ARGS adds cargo install options (the tests use --debug).
install-tools:
	@source qemu/env.sh; set -e; \
	for tool in $(TOOLS); do \
		CARGO_TARGET_DIR="$(ROOT)/userspace/target" cargo install --locked --no-track --force \
			$(CARGO_INSTALL_ARGS) --path "userspace/$$tool" --root "$(DESTDIR)$(PREFIX)"; \
	done; \
	assets="$$(mktemp -d)"; trap 'rm -rf "$$assets"' EXIT; \
	(cd userspace && cargo run --quiet --locked -p nds-dist -- "$$assets"); \
	share="$(DESTDIR)$(PREFIX)/share"; \
	install -D -m 644 -t "$$share/man/man1" "$$assets"/man/man1/*; \
	install -D -m 644 -t "$$share/bash-completion/completions" "$$assets"/completions/bash/*; \
	install -D -m 644 -t "$$share/zsh/site-functions" "$$assets"/completions/zsh/*; \
	install -D -m 644 -t "$$share/fish/vendor_completions.d" "$$assets"/completions/fish/*

# --- the container image ---------------------------------------------------------------

image:
	bash qemu/deps.sh --image
	bash userspace/packaging/image.sh
