#!/usr/bin/env bash
# Boots a guest kernel with an initramfs under QEMU, streams the console, and judges the
# run: it passes only when the guest printed its exit marker with rc=0 and the console
# holds no kernel complaint (BUG, WARNING, Oops, KASAN, lockdep, panic), whatever the
# tests said. KVM is used when a short probe boot shows it works here; TCG otherwise.
#
# Usage: qemu/boot.sh KERNEL_BUILD_DIR INITRAMFS LOGFILE
# Env:   NEURON_DS_ACCEL=kvm|tcg (skip the probe), QEMU_SMP (2), QEMU_MEM (1G),
#        QEMU_TIMEOUT seconds (600)
#
# The guest's clock: under KVM, kvm-clock. Under TCG the guest kernel cannot calibrate its TSC
# (the PIT calibration fails under emulation, and without ACPI there is no HPET or PM timer to
# calibrate against), so it would fall back to jiffies, and every time it measures would move
# in 4 ms ticks. QEMU's TCG guest reads the host's TSC, so the harness measures the host's rate
# (qemu/tsc-khz.c) and gives it to the guest (tsc_early_khz=), with tsc=reliable: the counter is
# the host's, constant-rate and the same for every vCPU, and the only watchdog the guest has
# would be jiffies, which lag under emulation. A run whose guest ends on a jiffies clocksource
# fails.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=qemu/env.sh
source "$here/env.sh"

kdir="$1" initramfs="$2" log="$3"
kernel="$kdir/arch/x86/boot/bzImage"
[ -f "$kernel" ] || {
    echo "boot.sh: no kernel image at $kernel" >&2
    exit 2
}

# Runs QEMU once; the console goes to $2. Returns QEMU's (or timeout's) status.
run_qemu() {
    local accel="$1" console="$2" limit="$3" initrd="$4"
    # Only the module's KUnit suites run: the kernel crate's own (kernel::fmt, net::netlink,
    # the spinlock's) are built into every CONFIG_KUNIT kernel and would run at boot, marking
    # the kernel tainted by a test before the module is loaded (a guest test checks that the
    # module's production build adds no such taint).
    local cpu=(-cpu max,-la57)
    local append="console=ttyS0 loglevel=5 panic=-1 oops=panic kunit.filter_glob=neuron_ds*"
    # 5-level paging under TCG makes early KASAN reports appear at random: keep it off.
    if [ "$accel" = kvm ]; then
        cpu=(-cpu host)
    else
        local khz
        khz="$(host_tsc_khz)" || {
            echo "boot.sh: the host's TSC rate could not be measured (qemu/tsc-khz.c)" >&2
            return 1
        }
        append+=" tsc_early_khz=$khz tsc=reliable"
    fi
    timeout --foreground -k 10 "$limit" qemu-system-x86_64 \
        -accel "$accel" "${cpu[@]}" -smp "${QEMU_SMP:-2}" -m "${QEMU_MEM:-1G}" \
        -bios qboot.rom -kernel "$kernel" -initrd "$initrd" \
        -append "$append" \
        -nic none -nographic -serial stdio -monitor none -no-reboot </dev/null >"$console" 2>&1
}

# The host's TSC rate in kHz (qemu/tsc-khz.c), measured once per host boot: the program is
# compiled into the cache, keyed by its source, and its answer kept like the KVM probe's.
host_tsc_khz() {
    local source="$here/tsc-khz.c" program answer
    program="$CACHE_DIR/tsc-khz-$(sha256sum "$source" | cut -c1-16)"
    answer="$CACHE_DIR/tsc-khz.$(cat /proc/sys/kernel/random/boot_id)"
    if [ ! -s "$answer" ]; then
        if [ ! -x "$program" ]; then
            gcc -O2 -Wall -o "$program.$$" "$source" && mv -f "$program.$$" "$program"
        fi
        # Whole or not at all: two guests booting side by side may measure at once.
        "$program" >"$answer.$$" && mv "$answer.$$" "$answer" || {
            rm -f "$answer.$$"
            return 1
        }
    fi
    cat "$answer"
}

# The probe boots the same kernel with an empty initramfs; its answer is kept for the
# lifetime of this host boot.
choose_accel() {
    if [ -n "${NEURON_DS_ACCEL:-}" ]; then
        echo "$NEURON_DS_ACCEL"
        return
    fi
    if [ ! -w /dev/kvm ]; then
        echo tcg
        return
    fi
    local cache
    cache="$CACHE_DIR/accel-probe.$(cat /proc/sys/kernel/random/boot_id)"
    if [ ! -f "$cache" ]; then
        local probe_dir
        probe_dir="$(mktemp -d)"
        "$here/initramfs.sh" "$probe_dir/probe.cpio.gz" - -
        if run_qemu kvm "$probe_dir/console" 60 "$probe_dir/probe.cpio.gz" &&
            grep -q '^NEURON-DS-GUEST-EXIT rc=0' "$probe_dir/console"; then
            echo kvm >"$cache.$$"
        else
            echo "boot.sh: KVM probe failed; using TCG ($(grep -m1 -i error "$probe_dir/console" || true))" >&2
            echo tcg >"$cache.$$"
        fi
        # Whole or not at all: the guest passes boot side by side and may probe at once.
        mv "$cache.$$" "$cache"
        rm -rf "$probe_dir"
    fi
    cat "$cache"
}

accel="$(choose_accel)"
echo "boot.sh: booting $(basename "$kdir") with $accel" >&2
status=0
run_qemu "$accel" "$log" "${QEMU_TIMEOUT:-600}" "$initramfs" || status=$?
tr -d '\r' <"$log" >"$log.tmp" && mv "$log.tmp" "$log"
# Show the console without the final dmesg dump (it only repeats the kernel log) and
# without the firmware's terminal escapes.
sed -e '/^NEURON-DS-DMESG-BEGIN/,/^NEURON-DS-DMESG-END/d' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' "$log"

failed=0
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "boot.sh: FAIL: the guest did not finish within ${QEMU_TIMEOUT:-600} s" >&2
    failed=1
fi
# A failure forced by fault injection (the fault campaign) is reported with a stack dump
# whose frames go through should_fail_ex: such a call trace is not a complaint. Every other
# line is scanned, so a real complaint (its "BUG:", "WARNING:" ... line) is still caught. The
# dump is recognised by its frames, not by the report's first line, which the console does
# not show (a notice) and the end of the kernel log may have lost.
without_injection_reports() {
    awk 'function flush(keep_trace) {
             for (i = 1; i <= n; i++) if (keep_trace || i > 1) print held[i]
             n = 0
         }
         { line = $0; sub(/^\[ *[0-9]+\.[0-9]+\] /, "", line) }
         line ~ /^Call Trace:/ { flush(1); held[++n] = $0; next }
         n > 0 {
             held[++n] = $0
             if (line ~ /should_fail_ex\+0x/) injected = 1
             if (line ~ /^ *<\/TASK>$/) { flush(!injected); injected = 0 }
             next
         }
         { print }
         END { flush(!injected) }' "$1"
}
complaints="$(without_injection_reports "$log" |
    grep -nE 'BUG:|WARNING:|Oops|KASAN:|circular locking|Invalid wait context|Call Trace|Kernel panic|UBSAN:|kernel BUG' || true)"
if [ -n "$complaints" ]; then
    echo "boot.sh: FAIL: the kernel complained:" >&2
    printf '%s\n' "$complaints" | head -n 40 >&2
    failed=1
fi
# The guest names its clocksource when it boots and when its commands are done: a guest that
# fell back to jiffies measured every time in ticks, which no test of timing can trust.
clocksources="$(sed -n 's/^NEURON-DS-GUEST clocksource \(at [a-z]*\): \(.*\)$/\1 \2/p' "$log")"
if [ -z "$clocksources" ]; then
    echo "boot.sh: FAIL: the guest never named its clocksource" >&2
    failed=1
elif grep -q 'jiffies' <<<"$clocksources"; then
    echo "boot.sh: FAIL: the guest ran on a jiffies clocksource ($(tr '\n' ' ' <<<"$clocksources"))" >&2
    failed=1
fi
guest_rc="$(sed -n 's/^NEURON-DS-GUEST-EXIT rc=\([0-9]*\)$/\1/p' "$log" | tail -n1)"
if [ -z "$guest_rc" ]; then
    echo "boot.sh: FAIL: the guest never reported its exit status (crash or hang)" >&2
    failed=1
elif [ "$guest_rc" -ne 0 ]; then
    echo "boot.sh: FAIL: the guest's commands exited with $guest_rc" >&2
    failed=1
fi
echo "boot.sh: accel=$accel clocksource=$(tail -n1 <<<"$clocksources" | sed 's/^at [a-z]* //') guest_rc=${guest_rc:-none}" >&2
exit "$failed"
