#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The Kubernetes manifests (userspace/packaging/kubernetes/): the chart renders (helm template where
# helm is installed, userspace/packaging/kubernetes/render-chart.py always), the plain YAML is the
# chart's rendering, every object validates offline against the API schemas of two Kubernetes
# releases (kubernetes-validate, strict), and checkov's policy checks pass: no privileged
# container, no host PID or network, a read-only root filesystem, capabilities dropped. Prints
# one TAP line per test; exits non-zero if any failed.
#
# Usage: tests/manifests.sh
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
# shellcheck source=qemu/env.sh
source qemu/env.sh

k8s="$root/userspace/packaging/kubernetes"
chart="$k8s/chart/nds-monitor"
python="$K8S_VENV/bin/python3"
# Two releases the bundled schemas cover: the newest and an older one still supported.
KUBERNETES_VERSIONS=(1.35.0 1.37.0)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/tap.sh
source tests/tap.sh

render() { "$python" "$k8s/render-chart.py" "$chart" "$@"; }

# The objects of one or more multi-document YAML files, semantically, in a canonical order.
canonical() {
    "$python" - "$@" <<'EOF'
import json, sys, yaml
objects = []
for path in sys.argv[1:]:
    with open(path) as f:
        objects += [d for d in yaml.safe_load_all(f) if d is not None]
objects.sort(key=lambda o: (o["kind"], o["metadata"]["name"]))
print(json.dumps(objects, indent=1, sort_keys=True))
EOF
}

plain_yaml_is_the_chart_rendered() {
    mkdir -p "$tmp/plain"
    "$python" "$k8s/render-chart.py" "$chart" --write-plain "$tmp/plain" || return 1
    local name
    for name in nds-monitor.yaml nds-monitor-servicemonitor.yaml; do
        diff -u "$k8s/$name" "$tmp/plain/$name" ||
            fail "$name differs from the chart: run userspace/packaging/kubernetes/render-chart.py chart/nds-monitor --write-plain ." ||
            return 1
    done
    # And as objects, from a separate rendering of the same values.
    render --set createNamespace=true --api-versions monitoring.coreos.com/v1 >"$tmp/rendered.yaml" &&
        diff <(canonical "$k8s/nds-monitor.yaml" "$k8s/nds-monitor-servicemonitor.yaml") \
            <(canonical "$tmp/rendered.yaml")
}

# helm, where installed, renders the chart to the same objects.
helm_renders_the_same_objects() {
    helm template nds-monitor "$chart" --namespace neuron-monitor --set createNamespace=true \
        --api-versions monitoring.coreos.com/v1 >"$tmp/helm.yaml" || return 1
    diff <(canonical "$k8s/nds-monitor.yaml" "$k8s/nds-monitor-servicemonitor.yaml") \
        <(canonical "$tmp/helm.yaml")
}

the_servicemonitor_appears_only_with_the_prometheus_operator() {
    render >"$tmp/without.yaml" || return 1
    ! grep -q '^kind: ServiceMonitor' "$tmp/without.yaml" || fail "rendered without the API" || return 1
    render --api-versions monitoring.coreos.com/v1 --set serviceMonitor.enabled=false >"$tmp/off.yaml" &&
        ! grep -q '^kind: ServiceMonitor' "$tmp/off.yaml" || fail "rendered though disabled" || return 1
    render --api-versions monitoring.coreos.com/v1 | grep -q '^kind: ServiceMonitor'
}

# The value combinations that change the DaemonSet, each rendered for the checks below.
variants=(
    "defaults:"
    "tls:--set tlsSecret=nds-monitor-tls"
    "cdi:--set cdiDevice=neuron-ds.dev/device=all --set deviceGroup=994"
    "digest:--set image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    "hostpid:--set hostPID=true"
)
render_variants() {
    local variant name args
    for variant in "${variants[@]}"; do
        name="${variant%%:*}" args="${variant#*:}"
        # shellcheck disable=SC2086 # one word per option
        render --set createNamespace=true --api-versions monitoring.coreos.com/v1 $args \
            >"$tmp/variant-$name.yaml" || return 1
    done
}

tls_turns_on_https_for_serve_the_probes_and_the_scrapes() {
    "$python" - "$tmp/variant-tls.yaml" <<'EOF'
import sys, yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
container = docs["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]
args = container["args"]
assert args[args.index("--cert-file") + 1] == "/etc/nds-monitor-tls/tls.crt", args
assert args[args.index("--key-file") + 1] == "/etc/nds-monitor-tls/tls.key", args
for probe in ("livenessProbe", "readinessProbe"):
    assert container[probe]["httpGet"]["scheme"] == "HTTPS", container[probe]
volumes = docs["DaemonSet"]["spec"]["template"]["spec"]["volumes"]
assert {"name": "tls", "secret": {"secretName": "nds-monitor-tls"}} in volumes, volumes
assert docs["ServiceMonitor"]["spec"]["endpoints"][0]["scheme"] == "https"
print("TLS: --cert-file/--key-file, HTTPS probes and scrapes")
EOF
}

every_object_validates_against_the_kubernetes_schemas() {
    local version variant name
    for version in "${KUBERNETES_VERSIONS[@]}"; do
        for variant in "${variants[@]}"; do
            name="${variant%%:*}"
            # The ServiceMonitor is the Prometheus Operator's kind: no bundled schema.
            "$python" - "$tmp/variant-$name.yaml" "$tmp/core-$name.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] != "ServiceMonitor"]
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
EOF
            "$K8S_VENV/bin/kubernetes-validate" --strict --quiet -k "$version" "$tmp/core-$name.yaml" ||
                fail "$name does not validate against Kubernetes $version" || return 1
            echo "RESULT kubernetes $version: $name: $(grep -c '^kind:' "$tmp/core-$name.yaml") objects valid (strict)"
        done
    done
}

# The validator is not vacuous: a misspelled field and a wrong type fail.
the_validator_rejects_a_broken_daemonset() {
    sed 's/readOnlyRootFilesystem: true/readOnlyRootFilesytem: true/' "$k8s/nds-monitor.yaml" >"$tmp/typo.yaml"
    sed 's/runAsUser: 65532/runAsUser: nobody/' "$k8s/nds-monitor.yaml" >"$tmp/type.yaml"
    local file
    for file in "$tmp/typo.yaml" "$tmp/type.yaml"; do
        if "$K8S_VENV/bin/kubernetes-validate" --strict --quiet -k "${KUBERNETES_VERSIONS[-1]}" "$file"; then
            fail "accepted $(basename "$file")" || return 1
        fi
    done
}

# checkov_failed <file>: the ids of the checks that failed, one per line.
checkov_report() {
    "$K8S_VENV/bin/checkov" --framework kubernetes --skip-download --output json \
        --file "$1" >"$tmp/checkov.json" 2>"$tmp/checkov.err"
    # checkov exits 1 when a check fails: the report says which.
    "$python" - "$tmp/checkov.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
reports = report if isinstance(report, list) else [report]
for r in reports:
    for c in r["results"]["failed_checks"]:
        print("failed", c["check_id"], c["resource"])
    for c in r["results"]["passed_checks"]:
        print("passed", c["check_id"], c["resource"])
EOF
}

# The checks the issue names, and those of the other permissions the pod does without.
REQUIRED_PASSES=(
    "CKV_K8S_16 no privileged container"
    "CKV_K8S_17 no host PID"
    "CKV_K8S_19 no host network"
    "CKV_K8S_18 no host IPC"
    "CKV_K8S_22 read-only root filesystem"
    "CKV_K8S_20 no privilege escalation"
    "CKV_K8S_23 not root"
    "CKV_K8S_28 NET_RAW dropped"
    "CKV_K8S_37 capabilities dropped"
    "CKV_K8S_38 no service account token"
    "CKV_K8S_39 no SYS_ADMIN"
)

# checkov_expect <variant> <expected failed ids...>: exactly those fail on the DaemonSet, and
# every required check passes unless it is expected to fail.
checkov_expect() {
    local name="$1" id passes failed
    shift
    checkov_report "$tmp/variant-$name.yaml" >"$tmp/checkov-$name.txt" || return 1
    failed="$(awk '$1 == "failed" { print $2 }' "$tmp/checkov-$name.txt" | sort -u | paste -sd' ')"
    [ "$failed" = "$(printf '%s\n' "$@" | sort -u | paste -sd' ')" ] ||
        fail "$name: checkov failed [$failed], expected [$*]" || return 1
    for required in "${REQUIRED_PASSES[@]}"; do
        id="${required%% *}"
        case " $* " in *" $id "*) continue ;; esac
        grep -q "^passed $id DaemonSet" "$tmp/checkov-$name.txt" || fail "$name: $required did not pass" || return 1
    done
    passes="$(grep -c '^passed' "$tmp/checkov-$name.txt")"
    echo "RESULT checkov $name: $passes passed, failed: ${failed:-none}"
}

checkov_finds_only_the_perfmon_capability_and_the_tag() {
    # CKV_K8S_25: the PERFMON capability, on purpose; CKV_K8S_43: an image by tag.
    checkov_expect defaults CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect tls CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect cdi CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect digest CKV_K8S_25
}

# The one documented feature that needs a host namespace is visible as exactly that finding.
checkov_flags_host_pid_when_per_process_reports_ask_for_it() {
    checkov_expect hostpid CKV_K8S_17 CKV_K8S_25 CKV_K8S_43
}

# The node side (install.rst): KMM's Module and its Dockerfile, and the CDI specification.
# The Module and CDI kinds have no bundled schema: their fields are checked here, the
# ConfigMap against the Kubernetes schemas.
the_node_side_manifests_hold_together() {
    "$python" - "$k8s/kmm/neuron-ds-module.yaml" "$k8s/kmm/neuron-ds-cdi.yaml" "$tmp/kmm-configmap.yaml" <<'EOF'
import re, sys, yaml
module_file, cdi_file, configmap_out = sys.argv[1:4]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(module_file)) if d}
module, configmap = docs["Module"], docs["ConfigMap"]
assert module["apiVersion"] == "kmm.sigs.x-k8s.io/v1beta1"
container = module["spec"]["moduleLoader"]["container"]
assert container["modprobe"]["moduleName"] == "neuron_ds"
mapping = container["kernelMappings"][0]
assert re.match(mapping["regexp"], "7.3.0-1-amd64") and re.match(mapping["regexp"], "7.2.5")
assert not re.match(mapping["regexp"], "7.1.9") and not re.match(mapping["regexp"], "6.12.0")
assert mapping["build"]["dockerfileConfigMap"]["name"] == configmap["metadata"]["name"]
assert configmap["metadata"]["namespace"] == module["metadata"]["namespace"]
dockerfile = configmap["data"]["dockerfile"]
assert "make -C /neuron-ds module KDIR=/lib/modules/${KERNEL_FULL_VERSION}/build" in dockerfile
assert "/opt/lib/modules/${KERNEL_FULL_VERSION}" in dockerfile
assert module["spec"]["selector"] == {"neuron.amazonaws.com/present": "true"}
cdi = yaml.safe_load(open(cdi_file))
assert cdi["kind"] == "neuron-ds.dev/device"
nodes = cdi["devices"][0]["containerEdits"]["deviceNodes"]
assert all(re.fullmatch(r"/dev/neuron[0-9]+", n["path"]) and n["permissions"] == "r" for n in nodes)
yaml.safe_dump(configmap, open(configmap_out, "w"))
EOF
    grep -q '^module:' Makefile || fail "the Dockerfile's make module has no target" || return 1
    "$K8S_VENV/bin/kubernetes-validate" --strict --quiet -k "${KUBERNETES_VERSIONS[-1]}" "$tmp/kmm-configmap.yaml"
}

kubernetes_rst_is_valid() { rst_is_valid "$root/Documentation/kubernetes.rst"; }

if [ ! -x "$python" ] || [ ! -x "$K8S_VENV/bin/checkov" ]; then
    echo "not ok 1 - the manifest checkers are installed ($K8S_VENV: run make deps)"
    echo "1..1"
    exit 1
fi
check "the plain YAML is the chart rendered with its defaults" plain_yaml_is_the_chart_rendered
if command -v helm >/dev/null; then
    check "helm template renders the same objects" helm_renders_the_same_objects
else
    echo "# helm is not installed (Debian 12 has no package): the chart rendered with render-chart.py only"
fi
check "the ServiceMonitor is rendered only where the Prometheus Operator's API exists" \
    the_servicemonitor_appears_only_with_the_prometheus_operator
check "the chart renders every value combination" render_variants
check "tlsSecret: serve, probes and ServiceMonitor over HTTPS" tls_turns_on_https_for_serve_the_probes_and_the_scrapes
check "every object validates (strict) against Kubernetes ${KUBERNETES_VERSIONS[*]}" \
    every_object_validates_against_the_kubernetes_schemas
check "the validator rejects a misspelled field and a wrong type" the_validator_rejects_a_broken_daemonset
check "checkov: no privileged container, host PID/network, writable root; only PERFMON and the tag flagged" \
    checkov_finds_only_the_perfmon_capability_and_the_tag
check "checkov: hostPID=true is flagged (CKV_K8S_17) and nothing else new" \
    checkov_flags_host_pid_when_per_process_reports_ask_for_it
check "the node side: KMM Module and Dockerfile, CDI specification" the_node_side_manifests_hold_together
check "Documentation/kubernetes.rst is valid reStructuredText" kubernetes_rst_is_valid
echo "1..$number"
[ "$failures" -eq 0 ]
