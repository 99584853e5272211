# The guest pass of a kernel release, shared by tests/run.sh and tests/under-load.sh (sourced,
# from the repository's root, after qemu/env.sh): one QEMU boot that loads that release's
# module (its KUnit suites run at insmod) and runs the guest integration tests, then the
# counting of its results. The caller defines `count <passed> <failed> <what>`.

# The suffix of a release's build directories: none for the newest release.
release_suffix() { [ "$1" = "${KERNEL_RELEASES[0]}" ] || echo "-$1"; }

# guest_boot <release> <variant> <dir> <work>: the initramfs with that release's module, its
# twin and the guest work directory <work>, and one boot; the console goes to <dir>/console.log,
# the verdict to <dir>/boot.status.
guest_boot() {
    local release="$1" boot_variant="$2" dir="$3" boot_work="$4" status=0
    # A second copy of the module under another name, for the coexistence test.
    if ! KVER="$release" bash tests/twin-module.sh "$boot_variant" "$boot_work/neuron_ds_twin.ko"; then
        echo "twin module build failed" >"$dir/console.log"
        echo 1 >"$dir/boot.status"
        return
    fi
    # A short metrics period so that the metrics test sees several periods; two devices for the
    # stress and fuzz campaigns (the other tests use neuron0 only).
    bash qemu/initramfs.sh "$dir/initramfs.cpio.gz" \
        "build/module-$boot_variant$(release_suffix "$release")/rust/neuron_ds.ko" "$boot_work" \
        metrics_period_ms=400 devices=2 cores_per_device=2
    bash qemu/boot.sh "$(KVER="$release" bash qemu/kernel.sh --dir "$boot_variant")" \
        "$dir/initramfs.cpio.gz" "$dir/console.log" || status=$?
    echo "$status" >"$dir/boot.status"
}

# guest_counts <release> <dir>: KUnit, guest tests and the run's verdict from a guest_boot.
guest_counts() {
    local release="$1" dir="$2" kp kf gp gf
    # KUnit: every test case line inside our suites' KTAP blocks.
    read -r kp kf < <(awk '/^NEURON-DS-KTAP-BEGIN/ { on = 1; next } /^NEURON-DS-KTAP-END/ { on = 0 }
        on && /^[ \t]+ok [0-9]+ / { p++ } on && /^[ \t]+not ok [0-9]+ / { f++ }
        END { printf "%d %d\n", p, f }' "$dir/console.log")
    if [ "$kp" -eq 0 ] && [ "$kf" -eq 0 ]; then
        echo "no KUnit results came back from the Linux $release guest"
        kf=1
    fi
    count "$kp" "$kf" "KUnit (neuron_ds suites, Linux $release)"

    sed -n '/^NEURON-DS-GUEST-TESTS-BEGIN/,/^NEURON-DS-GUEST-TESTS-END/p' "$dir/console.log" >"$dir/guest.log"
    read -r gp gf < <(libtest_totals "$dir/guest.log")
    grep -q '^NEURON-DS-GUEST-TESTS-END' "$dir/guest.log" || gf=$((gf + 1))
    count "$gp" "$gf" "guest tests (Linux $release)"
    if [ "$(cat "$dir/boot.status")" -ne 0 ]; then
        count 0 1 "guest run verdict (console scan, exit marker; Linux $release)"
    else
        count 1 0 "guest run verdict (console scan, exit marker; Linux $release)"
    fi
}

