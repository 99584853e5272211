#!/bin/sh
# The guest half of `make demo` (runs as /work/demo.sh after insmod devices=2): load
# generator, monitor, top, then the kernel's totals next to what the producers reported.
set -e
bin=/work/bin
banner() { printf '\n===== %s\n' "$*"; }

banner "neuron_ds loaded: $(ls /dev | grep -c '^neuron') devices, $(ls -d /sys/class/neuron_device/neuron0/neuron_core* | wc -l) NeuronCores each"
$bin/nds-loadgen baseline >/tmp/baseline.json

banner "nds-loadgen: 3 producers per device for 8 s, ~300 executions/s each; the last one crashes (SIGKILL) halfway"
$bin/nds-loadgen run --procs-per-device 3 --duration 8s --rate 300 --crash 1 \
    --report-dir /tmp/reports --summary /tmp/summary.json &
loadgen=$!
sleep 1
echo "slot table of /dev/neuron0 (slot pid clear_tick generation):"
grep -v ' 0 0 0$' /sys/class/neuron_device/neuron0/datastore/slots

banner "nds-monitor: one report over 1 s (JSON, first runtime entry shown, abbreviated)"
$bin/nds-monitor --period 1s --count 1 --pretty >/tmp/monitor.json
sed -n '/"neuron_runtime_data"/,/"memory_used"/p' /tmp/monitor.json | head -n 60
echo "  ... ($(wc -l </tmp/monitor.json) lines in all; the schema is Documentation/monitor.schema.json)"

banner "nds-monitor --format prometheus (successes per process and core)"
$bin/nds-monitor --period 500ms --count 1 --format prometheus | grep 'status="success"' | head -n 14

banner "nds-top --once (one 80x24 frame of the 'all' tab)"
$bin/nds-top --once --period 1s

banner "nds-top --once --keys 2x (the first process's tab, models unfolded)"
$bin/nds-top --once --period 1s --keys 2x

banner "waiting for the producers to finish"
wait $loadgen
echo "slabs still owned on neuron0: $(awk 'NR > 1 && $2 != 0' /sys/class/neuron_device/neuron0/datastore/slots | wc -l)"

banner "kernel sysfs totals (minus the baseline) next to the producers' reports"
$bin/nds-loadgen compare --summary /tmp/summary.json --baseline /tmp/baseline.json
