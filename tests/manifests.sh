#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The Kubernetes manifests (userspace/packaging/kubernetes/): helm (the pinned release binary
# make deps installs, qemu/env.sh's HELM) lints the chart clean and renders it, its values
# schema refuses wrong values, the plain YAML is the chart's rendering, every object of every
# value combination validates offline against the API schemas of two Kubernetes releases
# (kubernetes-validate, strict), checkov's policy checks pass (no privileged container, no host
# PID or network, a read-only root filesystem, capabilities dropped), and the namespace's Pod
# Security label is the level the pod meets. Prints one TAP line per test; exits non-zero if
# any failed.
#
# Usage: tests/manifests.sh
#        tests/manifests.sh --write-plain    (writes the plain YAML from the chart, tests nothing)
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
MONITORING_API=monitoring.coreos.com/v1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# helm keeps its caches and settings here, and no kubeconfig names a cluster.
export HELM_CACHE_HOME="$tmp/helm/cache" HELM_CONFIG_HOME="$tmp/helm/config" \
    HELM_DATA_HOME="$tmp/helm/data" KUBECONFIG="$tmp/no-kubeconfig"

# shellcheck source=tests/tap.sh
source tests/tap.sh

# helm_template [helm template options...]: the chart as release nds-monitor in namespace
# neuron-monitor, the names the plain YAML and AWS's DaemonSet use.
helm_template() {
    "$HELM" template nds-monitor "$chart" --namespace neuron-monitor "$@"
}

# The plain YAML: each file is a header, then what `helm template` prints for it.
plain_files=(nds-monitor.yaml nds-monitor-servicemonitor.yaml)
plain_header() {
    case "$1" in
    nds-monitor.yaml)
        cat <<'EOF'
# SPDX-License-Identifier: GPL-2.0
# nds-monitor as a DaemonSet: kubectl apply -f nds-monitor.yaml
# The chart chart/nds-monitor with its default values, as
#   helm template nds-monitor chart/nds-monitor --namespace neuron-monitor --set createNamespace=true
# prints it (tests/manifests.sh checks that it still is): edit the chart, then run
# tests/manifests.sh --write-plain.
EOF
        ;;
    nds-monitor-servicemonitor.yaml)
        cat <<'EOF'
# SPDX-License-Identifier: GPL-2.0
# Its ServiceMonitor, where the Prometheus Operator runs: kubectl apply -f nds-monitor-servicemonitor.yaml
# The chart's ServiceMonitor with its default values, as
#   helm template nds-monitor chart/nds-monitor --namespace neuron-monitor --set createNamespace=true \
#       --api-versions monitoring.coreos.com/v1 --show-only templates/servicemonitor.yaml
# prints it (tests/manifests.sh checks that it still is): edit the chart, then run
# tests/manifests.sh --write-plain.
EOF
        ;;
    esac
}
plain_rendering() {
    case "$1" in
    nds-monitor.yaml) helm_template --set createNamespace=true ;;
    nds-monitor-servicemonitor.yaml)
        helm_template --set createNamespace=true --api-versions "$MONITORING_API" \
            --show-only templates/servicemonitor.yaml
        ;;
    esac
}
# write_plain DIR: the plain YAML files, written into DIR.
write_plain() {
    local name
    for name in "${plain_files[@]}"; do
        { plain_header "$name" && plain_rendering "$name"; } >"$1/$name.new" || return 1
        mv "$1/$name.new" "$1/$name"
    done
}

if [ ! -x "$HELM" ]; then
    echo "not ok 1 - helm is installed ($HELM: run make deps)"
    echo "1..1"
    exit 1
fi
if [ "${1:-}" = --write-plain ]; then
    write_plain "$k8s" && echo "wrote ${plain_files[*]} in $k8s"
    exit
fi

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

helm_and_kubectl_are_the_pinned_releases() {
    local helm_version kubectl_version
    helm_version="$("$HELM" version --template '{{.Version}}')" || return 1
    [ "$helm_version" = "$HELM_VERSION" ] || fail "helm $helm_version, pinned $HELM_VERSION" || return 1
    kubectl_version="$("$KUBECTL" version --client -o json | "$python" -c \
        'import json, sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')" || return 1
    [ "$kubectl_version" = "$KUBECTL_VERSION" ] || fail "kubectl $kubectl_version, pinned $KUBECTL_VERSION" || return 1
    echo "RESULT helm $helm_version, kubectl $kubectl_version (qemu/env.sh)"
}

# helm lint --strict fails on a warning; the output must also hold no warning or error line
# (only "[INFO]" ones, which are printed).
helm_lint_is_clean() {
    local values
    for values in "" "$chart/ci/all-options-values.yaml" "$chart/ci/restricted-values.yaml" \
        "$chart/ci/container-insights-values.yaml"; do
        # The Container Insights values belong in the agent's namespace.
        "$HELM" lint --strict "$chart" ${values:+--values "$values"} \
            --namespace "$(case "$values" in *container-insights*) echo amazon-cloudwatch ;; *) echo default ;; esac)" \
            >"$tmp/lint.out" 2>&1 ||
            { cat "$tmp/lint.out"; fail "helm lint ${values:+-f $(basename "$values")} failed"; } || return 1
        if grep -E '^\[(WARNING|ERROR)\]' "$tmp/lint.out"; then
            fail "helm lint ${values:+-f $(basename "$values")} warns" || return 1
        fi
        grep -q '0 chart(s) failed' "$tmp/lint.out" || { cat "$tmp/lint.out"; return 1; }
    done
    echo "RESULT helm lint --strict: defaults, all-options, restricted, container-insights: 0 failed;" \
        "$(grep '^\[INFO\]' "$tmp/lint.out" | paste -sd';' || echo 'no INFO')"
}

plain_yaml_is_the_chart_rendered() {
    mkdir -p "$tmp/plain"
    write_plain "$tmp/plain" || return 1
    local name
    for name in "${plain_files[@]}"; do
        diff -u "$k8s/$name" "$tmp/plain/$name" ||
            fail "$name differs from the chart: run tests/manifests.sh --write-plain" || return 1
    done
    # The two files together hold every object of one rendering with the operator's API.
    helm_template --set createNamespace=true --api-versions "$MONITORING_API" >"$tmp/rendered.yaml" &&
        diff <(canonical "$k8s/nds-monitor.yaml" "$k8s/nds-monitor-servicemonitor.yaml") \
            <(canonical "$tmp/rendered.yaml")
}

# kinds FILE: the kinds of a rendering, one line each.
kinds() { sed -n 's/^kind: //p' "$1"; }

the_monitors_appear_only_with_the_prometheus_operator() {
    local both=(--set serviceMonitor.enabled=true --set podMonitor.enabled=true)
    helm_template "${both[@]}" >"$tmp/without.yaml" || return 1
    ! kinds "$tmp/without.yaml" | grep -qx 'ServiceMonitor\|PodMonitor' || fail "rendered without the API" || return 1
    helm_template --api-versions "$MONITORING_API" --set serviceMonitor.enabled=false >"$tmp/off.yaml" &&
        ! kinds "$tmp/off.yaml" | grep -qx 'ServiceMonitor\|PodMonitor' || fail "rendered though disabled" || return 1
    helm_template --api-versions "$MONITORING_API" >"$tmp/default.yaml" || return 1
    [ "$(kinds "$tmp/default.yaml" | grep -x 'ServiceMonitor\|PodMonitor' | paste -sd' ')" = ServiceMonitor ] ||
        fail "defaults with the API: not the ServiceMonitor alone" || return 1
    helm_template --api-versions "$MONITORING_API" "${both[@]}" >"$tmp/both.yaml" || return 1
    [ "$(kinds "$tmp/both.yaml" | grep -x 'ServiceMonitor\|PodMonitor' | sort | paste -sd' ')" = "PodMonitor ServiceMonitor" ] ||
        fail "podMonitor.enabled: no PodMonitor" || return 1
}

# The value combinations, each rendered with the Prometheus Operator's API for the checks below.
variants=(
    "defaults:"
    "tls:--set tlsSecret=nds-monitor-tls"
    "cdi:--set cdiDevice=neuron-ds.dev/device=all --set deviceGroup=994"
    "digest:--set image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    "hostpid:--set hostPID=true"
    "hostsysfs:--set hostSysfs=true"
    "root:--set runAsUser=0"
    "restricted:--values $chart/ci/restricted-values.yaml"
    "baseline:--values $chart/ci/restricted-values.yaml --set runAsUser=0"
    "all:--values $chart/ci/all-options-values.yaml"
    "npd:--set nodeProblemDetector.enabled=true"
    "insights:--namespace amazon-cloudwatch --values $chart/ci/container-insights-values.yaml"
)
render_variants() {
    local variant name args
    for variant in "${variants[@]}"; do
        name="${variant%%:*}" args="${variant#*:}"
        # shellcheck disable=SC2086 # one word per option
        helm_template --set createNamespace=true --api-versions "$MONITORING_API" $args \
            >"$tmp/variant-$name.yaml" || return 1
    done
}

# check_rendering VARIANT: the Python that follows on standard input runs with the variant's
# objects by kind (docs), its DaemonSet's pod spec (pod) and container (container), and the
# nds-monitor options after the entrypoint's "--" (monitor_args).
check_rendering() {
    local name="$1"
    {
        cat <<'EOF'
import sys, yaml
every = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
# The node-problem-detector's ConfigMap apart (npd), so that docs has one object per kind.
def is_npd(d):
    return d["metadata"]["name"].endswith("-node-problem-detector")
docs = {d["kind"]: d for d in every if not is_npd(d)}
npd = next((d for d in every if is_npd(d)), None)
pod = docs["DaemonSet"]["spec"]["template"]["spec"]
container = pod["containers"][0]
args = container["args"]
monitor_args = args[args.index("--") + 1:] if "--" in args else []
volumes = {v["name"]: v for v in pod.get("volumes", [])}
mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
def option(args, name):
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]
EOF
        cat
    } >"$tmp/check.py"
    "$python" "$tmp/check.py" "$tmp/variant-$name.yaml"
}

tls_turns_on_https_for_serve_the_probes_and_the_scrapes() {
    check_rendering tls <<'EOF' || return 1
assert option(args, "--cert-file") == "/etc/nds-monitor-tls/tls.crt", args
assert option(args, "--key-file") == "/etc/nds-monitor-tls/tls.key", args
for probe in ("livenessProbe", "readinessProbe"):
    assert container[probe]["httpGet"]["scheme"] == "HTTPS", container[probe]
assert volumes["tls"] == {"name": "tls", "secret": {"secretName": "nds-monitor-tls"}}, volumes
endpoint = docs["ServiceMonitor"]["spec"]["endpoints"][0]
assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}, endpoint
print("RESULT tls: --cert-file/--key-file, HTTPS probes, ServiceMonitor https, insecureSkipVerify true")
EOF
    # insecureSkipVerify false, with the CA and server name, in both monitors.
    check_rendering all <<'EOF' || return 1
want = {"insecureSkipVerify": False, "serverName": "nds-monitor.neuron-monitor.svc",
        "ca": {"secret": {"name": "nds-monitor-ca", "key": "ca.crt"}}}
for kind, field in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
    endpoint = docs[kind]["spec"][field][0]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == want, (kind, endpoint)
    assert endpoint["port"] == "metrics" and endpoint["interval"] == "30s", endpoint
print("RESULT all: ServiceMonitor and PodMonitor https, insecureSkipVerify false, CA and serverName")
EOF
    check_rendering defaults <<'EOF'
endpoint = docs["ServiceMonitor"]["spec"]["endpoints"][0]
assert endpoint["scheme"] == "http" and "tlsConfig" not in endpoint, endpoint
assert not any(v.get("secret") for v in volumes.values()) and "--cert-file" not in args
EOF
}

# No variant mounts a single sysfs directory (a bind mount of kernfs keeps the nodes of the
# module loaded at pod start); hostSysfs mounts the whole /sys at /host/sys and points the
# monitor there.
sysfs_is_the_containers_own_or_the_hosts_whole() {
    local name
    for name in defaults hostsysfs all restricted; do
        check_rendering "$name" <<'EOF' || return 1
host_paths = [v["hostPath"]["path"] for v in volumes.values() if "hostPath" in v]
assert not [p for p in host_paths if p.startswith("/sys/")], host_paths
assert not [m for m in mounts if m == "/sys" or m.startswith("/sys/")], mounts
EOF
    done
    check_rendering defaults <<'EOF' || return 1
assert not [v for v in volumes.values() if v.get("hostPath", {}).get("path") == "/sys"], volumes
for flag in ("--sysfs-root", "--module-dir", "--hardware-sysfs-root"):
    assert flag not in args, args
EOF
    check_rendering hostsysfs <<'EOF'
sys_volume = [v for v in volumes.values() if v.get("hostPath", {}).get("path") == "/sys"]
assert len(sys_volume) == 1 and sys_volume[0]["hostPath"]["type"] == "Directory", volumes
mount = mounts["/host/sys"]
assert mount["name"] == sys_volume[0]["name"] and mount["readOnly"] is True, mount
assert option(monitor_args, "--sysfs-root") == "/host/sys/class/neuron_device", monitor_args
assert option(monitor_args, "--module-dir") == "/host/sys/module/neuron_ds", monitor_args
assert option(monitor_args, "--hardware-sysfs-root") == "/host/sys/devices/virtual/neuron_device", monitor_args
print("RESULT hostSysfs: the host's /sys read-only at /host/sys, monitor args", " ".join(monitor_args))
EOF
}

pod_resources_mounts_the_kubelets_socket_read_only() {
    check_rendering defaults <<'EOF' || return 1
mount = mounts["/var/lib/kubelet/pod-resources"]
assert mount["readOnly"] is True, mount
volume = volumes[mount["name"]]
assert volume["hostPath"] == {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}, volume
socket = option(monitor_args, "--pod-resources-socket")
assert socket == "/var/lib/kubelet/pod-resources/kubelet.sock", monitor_args
# auto, the default, is the monitor's default too: no option.
assert "--pod-resources-allocator" not in args, args
print("RESULT podResources: hostPath /var/lib/kubelet/pod-resources read-only, --pod-resources-socket", socket)
EOF
    check_rendering restricted <<'EOF'
assert "--pod-resources-socket" not in args, args
assert "/var/lib/kubelet/pod-resources" not in mounts, mounts
EOF
}

# The values of the all-options file reach the objects, and every object carries the chart's
# labels from _helpers.tpl.
every_value_reaches_the_objects() {
    check_rendering all <<'EOF' || return 1
for d in every:
    labels = d["metadata"]["labels"]
    assert labels["helm.sh/chart"].startswith("nds-monitor-"), labels
    assert labels["app.kubernetes.io/name"] == "neuron-exporter", labels
    assert labels["app.kubernetes.io/instance"] == "nds-monitor", labels
    assert labels["app.kubernetes.io/managed-by"] == "Helm", labels
    assert "app.kubernetes.io/version" in labels, labels
    if d["kind"] != "Namespace":
        name = "nds-monitor-all-node-problem-detector" if is_npd(d) else "nds-monitor-all"
        assert d["metadata"]["name"] == name, d["metadata"]
selector = {"app.kubernetes.io/name": "neuron-exporter", "app.kubernetes.io/instance": "nds-monitor"}
assert docs["DaemonSet"]["spec"]["selector"]["matchLabels"] == selector
assert docs["Service"]["spec"]["selector"] == selector
assert docs["PodMonitor"]["spec"]["selector"]["matchLabels"] == selector
assert docs["ServiceMonitor"]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
assert docs["PodMonitor"]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
template = docs["DaemonSet"]["spec"]["template"]
assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "neuron-exporter"
annotations = template["metadata"]["annotations"]
assert annotations["example.com/team"] == "inference", annotations
assert annotations["cdi.k8s.io/nds-monitor"] == "neuron-ds.dev/device=all", annotations
assert len(annotations["checksum/config"]) == 64, annotations
assert pod["priorityClassName"] == "system-node-critical"
assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
assert pod["hostPID"] is True and pod["securityContext"]["supplementalGroups"] == [994, 0]
assert container["image"].endswith("@sha256:" + "0123456789abcdef" * 4), container["image"]
assert container["imagePullPolicy"] == "IfNotPresent"
assert option(args, "--port") == "9400" and container["ports"][0]["containerPort"] == 9400
assert monitor_args[-2:] == ["--verbose", "1"], monitor_args
assert option(monitor_args, "--pod-resources-allocator") == "dra", monitor_args
assert option(args, "--otlp-endpoint") == "http://adot-collector.observability.svc:4318/v1/metrics", args
assert option(args, "--otlp-period") == "30s", args
assert args.index("--otlp-endpoint") < args.index("--"), "an entrypoint option, not the monitor's"
node_name = [e for e in container["env"] if e["name"] == "NODE_NAME"]
assert node_name == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}], container["env"]
assert "--dev-dir" not in args, args
assert docs["ConfigMap"]["data"]["monitor.json"].startswith('{"neuron_runtimes":[{"metrics"')
print("RESULT all:", len(every), "objects named nds-monitor-all, labelled neuron-exporter;",
      "monitor args:", " ".join(monitor_args))
EOF
    # The image's tag defaults to the chart's appVersion.
    CHART="$chart" check_rendering defaults <<'EOF'
import os
chart = yaml.safe_load(open(os.environ["CHART"] + "/Chart.yaml"))
assert container["image"] == "nds-monitor:" + chart["appVersion"], container["image"]
assert "priorityClassName" not in pod and "imagePullSecrets" not in pod and "affinity" not in pod
assert not any(arg.startswith("--otlp") for arg in container["args"]), container["args"]
assert "env" not in container, "no push, no node name"
EOF
}

# checksum_of [helm template options...]: the pod template's checksum/config annotation.
checksum_of() {
    helm_template --show-only templates/daemonset.yaml "$@" | "$python" -c '
import sys, yaml
print(yaml.safe_load(sys.stdin)["spec"]["template"]["metadata"]["annotations"]["checksum/config"])'
}

monitor_config_changes_roll_the_pods() {
    local base again changed other port
    base="$(checksum_of)" && again="$(checksum_of)" || return 1
    changed="$(checksum_of --set monitorConfig.period=10s)" || return 1
    other="$(checksum_of --set-json 'monitorConfig.system_metrics=[{"type":"vcpu_usage"}]')" || return 1
    port="$(checksum_of --set port=9000)" || return 1
    [ "$base" = "$again" ] || fail "the checksum differs between two renderings" || return 1
    [ "$changed" != "$base" ] || fail "monitorConfig.period changed, the checksum did not" || return 1
    [ "$other" != "$base" ] && [ "$other" != "$changed" ] || fail "system_metrics changed, the checksum did not" || return 1
    # It is the ConfigMap's: a value the ConfigMap does not hold leaves it alone.
    [ "$port" = "$base" ] || fail "port changed the config checksum" || return 1
    echo "RESULT checksum/config ${base:0:12}…, period 10s ${changed:0:12}…, system_metrics ${other:0:12}…"
}

# Each wrong value fails helm template and lint, and the schema's message names it; a value
# removed (null, or missing after an upgrade with --reuse-values) is refused too.
the_schema_refuses_wrong_values() {
    local wrong path
    for wrong in "port=http:/port" "port=70000:/port" "hostSysfs=yes:/hostSysfs" \
        "podResources.enabled=1:/podResources/enabled" "image.digest=latest:/image/digest" \
        "serviceMonitor.interval=soon:/serviceMonitor/interval" "extraArgs=--verbose:/extraArgs" \
        "hostSysfss=true:hostSysfss" "scrapeTLS.insecureSkipVerify=no:/scrapeTLS/insecureSkipVerify" \
        "runAsUser=null:'runAsUser'" "podResources.enabled=null:'enabled'" \
        "nodeProblemDetector.timeout=1m:/nodeProblemDetector/timeout" "stateDir.type=pvc:/stateDir/type"; do
        path="${wrong##*:}" wrong="${wrong%:*}"
        if helm_template --set "$wrong" >"$tmp/schema.out" 2>&1; then
            fail "helm template accepted --set $wrong" || return 1
        fi
        grep -q "schema" "$tmp/schema.out" && grep -qF "$path" "$tmp/schema.out" ||
            { cat "$tmp/schema.out"; fail "--set $wrong: refused, but not by the schema at $path"; } || return 1
        if "$HELM" lint "$chart" --set "$wrong" >"$tmp/schema.out" 2>&1; then
            fail "helm lint accepted --set $wrong" || return 1
        fi
    done
    # A values file with a wrong type is refused too.
    printf 'networkPolicy: "false"\n' >"$tmp/wrong-values.yaml"
    if helm_template --values "$tmp/wrong-values.yaml" >"$tmp/schema.out" 2>&1; then
        fail "helm template accepted networkPolicy: \"false\"" || return 1
    fi
    echo "RESULT schema: $(grep -m1 -- "- at" "$tmp/schema.out")"
}

# NOTES.txt renders (helm install --dry-run=client: no cluster) and says what the values imply.
notes_say_how_to_reach_the_metrics() {
    KUBECONFIG="$tmp/no-kubeconfig" "$HELM" install nds-monitor "$chart" --namespace neuron-monitor \
        --dry-run=client >"$tmp/install.out" 2>&1 || { cat "$tmp/install.out"; return 1; }
    sed -n '/^NOTES:/,$p' "$tmp/install.out" >"$tmp/notes.txt"
    grep -q 'port-forward ds/nds-monitor 8000' "$tmp/notes.txt" &&
        grep -q 'no monitoring.coreos.com/v1 API' "$tmp/notes.txt" &&
        grep -q 'runAsUser=0' "$tmp/notes.txt" || { cat "$tmp/notes.txt"; fail "NOTES incomplete"; } || return 1
    "$HELM" install nds-monitor "$chart" --namespace neuron-monitor --dry-run=client \
        --values "$chart/ci/restricted-values.yaml" --set tlsSecret=t >"$tmp/install.out" 2>&1 || return 1
    grep -q 'curl -sk https://localhost:8000/metrics' "$tmp/install.out" &&
        ! grep -q 'runAsUser=0' "$tmp/install.out" || { cat "$tmp/install.out"; fail "NOTES of the restricted values"; } ||
        return 1
    "$HELM" install nds-monitor "$chart" --namespace neuron-monitor --dry-run=client \
        --set nodeProblemDetector.enabled=true >"$tmp/install.out" 2>&1 || return 1
    grep -q 'ConfigMap nds-monitor-node-problem-detector in neuron-monitor' "$tmp/install.out" &&
        grep -q 'NodeCondition NeuronDeviceProblem' "$tmp/install.out" &&
        grep -q "(and NPD's NeuronDeviceProblem) are judged from those totals" "$tmp/install.out" ||
        { cat "$tmp/install.out"; fail "NOTES of nodeProblemDetector"; } || return 1
    "$HELM" install nds-monitor "$chart" --namespace neuron-monitor --dry-run=client \
        --set stateDir.type=hostPath >"$tmp/install.out" 2>&1 || return 1
    grep -q 'install -d -o 65532 -m 0700 /var/lib/nds-monitor' "$tmp/install.out" ||
        { cat "$tmp/install.out"; fail "NOTES of a hostPath stateDir"; } || return 1
    "$HELM" install nds-monitor "$chart" --namespace neuron-monitor --dry-run=client \
        --set stateDir.type=hostPath --set runAsUser=0 >"$tmp/install.out" 2>&1 || return 1
    ! grep -q 'install -d' "$tmp/install.out" || { cat "$tmp/install.out"; fail "NOTES as root"; }
}

every_object_validates_against_the_kubernetes_schemas() {
    local version variant name files=()
    for variant in "${variants[@]}"; do
        name="${variant%%:*}"
        # The ServiceMonitor and PodMonitor are the Prometheus Operator's kinds: no bundled schema.
        "$python" - "$tmp/variant-$name.yaml" "$tmp/core-$name.yaml" <<'EOF' || return 1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1]))
        if d and d["kind"] not in ("ServiceMonitor", "PodMonitor")]
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
EOF
        files+=("$tmp/core-$name.yaml")
    done
    for version in "${KUBERNETES_VERSIONS[@]}"; do
        "$K8S_VENV/bin/kubernetes-validate" --strict --quiet -k "$version" "${files[@]}" ||
            fail "a variant does not validate against Kubernetes $version" || return 1
        echo "RESULT kubernetes $version: ${#files[@]} variants, $(cat "${files[@]}" | grep -c '^kind:') objects valid (strict)"
    done
}

# The validator is not vacuous: a misspelled field and a wrong type fail.
the_validator_rejects_a_broken_daemonset() {
    sed 's/readOnlyRootFilesystem: true/readOnlyRootFilesytem: true/' "$k8s/nds-monitor.yaml" >"$tmp/typo.yaml"
    sed 's/runAsUser: 65532/runAsUser: nobody/' "$k8s/nds-monitor.yaml" >"$tmp/type.yaml"
    local file
    for file in "$tmp/typo.yaml" "$tmp/type.yaml"; do
        cmp -s "$file" "$k8s/nds-monitor.yaml" && fail "$(basename "$file"): nothing replaced" && return 1
        if "$K8S_VENV/bin/kubernetes-validate" --strict --quiet -k "${KUBERNETES_VERSIONS[-1]}" "$file"; then
            fail "accepted $(basename "$file")" || return 1
        fi
    done
}

# The Pod Security Standards' checks (baseline, then restricted) of a pod spec, as the
# standard lists them, for the fields a pod spec can carry: the level the pod meets must be
# the one the chart writes on its namespace.
pod_security_level_is_the_namespace_label() {
    local variant name levels=""
    for variant in "${variants[@]}"; do
        name="${variant%%:*}"
        check_rendering "$name" >"$tmp/pss.out" <<'EOF' || { cat "$tmp/pss.out"; return 1; }
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                 "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}
psc = pod.get("securityContext", {})
containers = pod.get("initContainers", []) + pod["containers"]
baseline, restricted = [], []
for ns in ("hostNetwork", "hostPID", "hostIPC"):
    if pod.get(ns):
        baseline.append(ns)
for c in containers:
    sc = c.get("securityContext", {})
    if sc.get("privileged"):
        baseline.append("privileged")
    if sc.get("windowsOptions", {}).get("hostProcess"):
        baseline.append("hostProcess")
    added = set(sc.get("capabilities", {}).get("add", []))
    if added - BASELINE_CAPS:
        baseline.append("capability beyond baseline " + ",".join(sorted(added - BASELINE_CAPS)))
    if any(p.get("hostPort") for p in c.get("ports", [])):
        baseline.append("hostPort")
    if sc.get("procMount", "Default") != "Default":
        baseline.append("procMount")
    for ctx in (psc, sc):
        if ctx.get("seccompProfile", {}).get("type") == "Unconfined":
            baseline.append("seccomp Unconfined")
        if ctx.get("appArmorProfile", {}).get("type") == "Unconfined":
            baseline.append("appArmor Unconfined")
        se = ctx.get("seLinuxOptions", {})
        if se.get("type", "") not in ("", "container_t", "container_init_t", "container_kvm_t",
                                      "container_engine_t") or se.get("user") or se.get("role"):
            baseline.append("seLinuxOptions")
    if sc.get("allowPrivilegeEscalation") is not False:
        restricted.append("allowPrivilegeEscalation")
    if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
        restricted.append("runAsNonRoot")
    if sc.get("runAsUser", psc.get("runAsUser")) == 0:
        restricted.append("runAsUser 0")
    if sc.get("seccompProfile", psc.get("seccompProfile", {})).get("type") not in ("RuntimeDefault", "Localhost"):
        restricted.append("seccompProfile")
    caps = sc.get("capabilities", {})
    if "ALL" not in caps.get("drop", []):
        restricted.append("capabilities drop ALL")
    if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
        restricted.append("capabilities add " + ",".join(sorted(set(caps["add"]) - {"NET_BIND_SERVICE"})))
if any(s.get("name") not in ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                              "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                              "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                              "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                              "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes")
       for s in psc.get("sysctls", [])):
    baseline.append("sysctls")
for v in pod.get("volumes", []):
    kind = next(k for k in v if k != "name")
    if kind == "hostPath":
        baseline.append("hostPath " + v["hostPath"]["path"])
    elif kind not in RESTRICTED_VOLUMES:
        restricted.append("volume " + kind)
level = "privileged" if baseline else "baseline" if restricted else "restricted"
label = docs["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
assert label == level, f"namespace says {label}, the pod meets {level}: {baseline} {restricted}"
print(level, "(" + "; ".join(baseline + restricted) + ")")
EOF
        levels+="$name=$(cat "$tmp/pss.out") "
        echo "RESULT pod security $name: $(cat "$tmp/pss.out")"
    done
    # The values kubernetes.rst names reach each level.
    case "$levels" in *"defaults=privileged"*"restricted=restricted"*"baseline=baseline"*) ;;
    *) fail "levels: $levels" || return 1 ;;
    esac
}

# checkov_report: one checkov run over every variant; "failed|passed ID RESOURCE FILE" lines.
checkov_report() {
    mkdir -p "$tmp/checkov"
    local variant name
    for variant in "${variants[@]}"; do
        name="${variant%%:*}"
        cp "$tmp/variant-$name.yaml" "$tmp/checkov/$name.yaml"
    done
    "$K8S_VENV/bin/checkov" --framework kubernetes --skip-download --output json \
        --directory "$tmp/checkov" >"$tmp/checkov.json" 2>"$tmp/checkov.err"
    # checkov exits 1 when a check fails: the report says which.
    "$python" - "$tmp/checkov.json" <<'EOF'
import json, os, sys
report = json.load(open(sys.argv[1]))
reports = report if isinstance(report, list) else [report]
for r in reports:
    for state in ("failed", "passed"):
        for c in r["results"][state + "_checks"]:
            variant = os.path.basename(c["file_path"]).rsplit(".", 1)[0]
            print(state, c["check_id"], c["resource"].split(".")[0], variant)
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

# checkov_expect <variant> <expected failed ids...>: exactly those fail on the variant's
# objects, and every required check passes on its DaemonSet unless it is expected to fail.
checkov_expect() {
    local name="$1" id required passes failed
    shift
    failed="$(awk -v v="$name" '$1 == "failed" && $4 == v { print $2 }' "$tmp/checkov.txt" | sort -u | paste -sd' ')"
    [ "$failed" = "$(printf '%s\n' "$@" | sort -u | paste -sd' ')" ] ||
        fail "$name: checkov failed [$failed], expected [$*]" || return 1
    for required in "${REQUIRED_PASSES[@]}"; do
        id="${required%% *}"
        case " $* " in *" $id "*) continue ;; esac
        awk -v v="$name" -v id="$id" '$1 == "passed" && $2 == id && $3 == "DaemonSet" && $4 == v { found = 1 }
            END { exit !found }' "$tmp/checkov.txt" || fail "$name: $required did not pass" || return 1
    done
    passes="$(awk -v v="$name" '$1 == "passed" && $4 == v' "$tmp/checkov.txt" | wc -l)"
    echo "RESULT checkov $name: $passes passed, failed: ${failed:-none}"
}

checkov_finds_only_what_the_values_ask_for() {
    checkov_report >"$tmp/checkov.txt" || { cat "$tmp/checkov.err"; return 1; }
    grep -q . "$tmp/checkov.txt" || { cat "$tmp/checkov.err"; fail "checkov reported nothing"; } || return 1
    # CKV_K8S_25: the PERFMON capability, on purpose; CKV_K8S_43: an image by tag.
    checkov_expect defaults CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect tls CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect cdi CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect digest CKV_K8S_25 &&
        checkov_expect hostsysfs CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect restricted CKV_K8S_43 || return 1
    # The documented features that need more are visible as exactly those findings: the host's
    # pid namespace (CKV_K8S_17), root (CKV_K8S_23; CKV_K8S_40 asks for a high uid).
    checkov_expect hostpid CKV_K8S_17 CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect root CKV_K8S_23 CKV_K8S_25 CKV_K8S_40 CKV_K8S_43 &&
        checkov_expect baseline CKV_K8S_23 CKV_K8S_40 CKV_K8S_43 &&
        checkov_expect all CKV_K8S_17 CKV_K8S_25 &&
        checkov_expect insights CKV_K8S_25 CKV_K8S_43 &&
        checkov_expect npd CKV_K8S_25 CKV_K8S_43
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

# CloudWatch Container Insights' Neuron scraper finds the Service, by the rules its sources
# write (tests/container-insights-receiver.json, each with its file and commit), and the
# option's requirements are refused when missing.
container_insights_discovers_the_service() {
    "$python" tests/container-insights.py "$tmp/variant-insights.yaml" \
        tests/container-insights-receiver.json || return 1
    # Each rule fails the check when the rendering breaks it: the checker is not vacuous.
    local broken
    for broken in "s/k8s-app: neuron-monitor-service/k8s-app: neuron-monitor/" \
        "s/internalTrafficPolicy: Local/internalTrafficPolicy: Cluster/" \
        "s/^  namespace: amazon-cloudwatch/  namespace: neuron-monitor/" \
        "s/name: neuron-monitor-service/name: nds-monitor/" \
        "s/- --cert-file/- --certificate/"; do
        sed "$broken" "$tmp/variant-insights.yaml" >"$tmp/insights-broken.yaml"
        cmp -s "$tmp/insights-broken.yaml" "$tmp/variant-insights.yaml" && fail "$broken: nothing replaced" && return 1
        if "$python" tests/container-insights.py "$tmp/insights-broken.yaml" \
            tests/container-insights-receiver.json 2>/dev/null; then
            fail "accepted a rendering with $broken" || return 1
        fi
    done
    # Without TLS, or outside the agent's namespace, the chart refuses to render.
    if helm_template --set containerInsights.enabled=true --namespace amazon-cloudwatch >"$tmp/ci.out" 2>&1; then
        fail "containerInsights without tlsSecret rendered" || return 1
    fi
    grep -q "needs tlsSecret" "$tmp/ci.out" || { cat "$tmp/ci.out"; return 1; }
    if helm_template --values "$chart/ci/container-insights-values.yaml" >"$tmp/ci.out" 2>&1; then
        fail "containerInsights in neuron-monitor rendered" || return 1
    fi
    grep -q "install the release there (--namespace amazon-cloudwatch)" "$tmp/ci.out" || { cat "$tmp/ci.out"; return 1; }
    # Off (the default), the Service stays headless and unlabelled.
    check_rendering defaults <<'EOF'
service = docs["Service"]
assert service["spec"]["clusterIP"] == "None" and "k8s-app" not in service["metadata"]["labels"], service
EOF
}

# The readiness probe asks /readyz, the liveness probe /healthz; the event stream's state
# directory is an emptyDir, or the node's with stateDir.type hostPath.
probes_and_the_state_directory() {
    check_rendering defaults <<'EOF' || return 1
assert container["livenessProbe"]["httpGet"]["path"] == "/healthz", container["livenessProbe"]
assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", container["readinessProbe"]
assert option(args, "--state-dir") == "/var/lib/nds-monitor", args
assert "--" not in args or args.index("--state-dir") < args.index("--"), "an entrypoint option"
assert mounts["/var/lib/nds-monitor"] == {"name": "state", "mountPath": "/var/lib/nds-monitor"}, mounts
assert volumes["state"] == {"name": "state", "emptyDir": {"sizeLimit": "1Mi"}}, volumes["state"]
print("RESULT defaults: readinessProbe /readyz, livenessProbe /healthz, --state-dir on an emptyDir")
EOF
    check_rendering all <<'EOF'
state = volumes["state"]["hostPath"]
assert state == {"path": "/var/lib/nds-monitor-all", "type": "DirectoryOrCreate"}, state
print("RESULT all: the state directory on the node,", state["path"])
EOF
}

# nodeProblemDetector renders NPD's custom plugin monitor (kubernetes/node-problem-detector,
# docs/custom_plugin_monitor.md): its fields only, a permanent rule setting the condition with
# nds-monitor health against the node's own pod (the Service's cluster IP, internal traffic
# Local), within NPD's timeout.
node_problem_detector_checks_the_nodes_own_pod() {
    check_rendering npd <<'EOF' || return 1
import json, re
assert npd is not None and npd["kind"] == "ConfigMap", "no NPD ConfigMap"
assert npd["metadata"]["namespace"] == "neuron-monitor", npd["metadata"]
monitor = json.loads(npd["data"]["nds-monitor-health.json"])
assert set(monitor) == {"plugin", "pluginConfig", "source", "metricsReporting", "conditions", "rules"}, monitor
assert monitor["plugin"] == "custom" and monitor["source"], monitor
config = monitor["pluginConfig"]
assert set(config) <= {"invoke_interval", "timeout", "max_output_length", "concurrency",
                       "enable_message_change_based_condition_update", "skip_initial_status"}, config
def seconds(text):
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"([0-9]+)(ms|s|m|h)", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    return sum(int(n) * units[u] for n, u in parts)
assert seconds(config["invoke_interval"]) == 60 and seconds(config["timeout"]) == 10, config
assert config["max_output_length"] >= 80 and config["concurrency"] >= 1, config
[condition] = monitor["conditions"]
assert set(condition) == {"type", "reason", "message"}, condition
assert condition["type"] == "NeuronDeviceProblem" and condition["reason"] and condition["message"]
[rule] = monitor["rules"]
assert set(rule) == {"type", "condition", "reason", "path", "args", "timeout"}, rule
assert rule["type"] == "permanent" and rule["condition"] == condition["type"], rule
assert seconds(rule["timeout"]) <= seconds(config["timeout"]), "a rule within the global timeout"
assert rule["path"] == "/opt/bin/nds-monitor", rule
url = option(rule["args"], "--url")
assert rule["args"][0] == "health" and url == "http://nds-monitor.neuron-monitor.svc:8000", rule["args"]
assert 2 * seconds(option(rule["args"], "--timeout")) == seconds(rule["timeout"]), "half of NPD's"
service = docs["Service"]
assert service["metadata"]["name"] == "nds-monitor" and service["spec"]["type"] == "ClusterIP", service
assert service["spec"]["internalTrafficPolicy"] == "Local", service["spec"]
print("RESULT npd: condition", condition["type"], "by", rule["path"], " ".join(rule["args"]))
EOF
    check_rendering all <<'EOF' || return 1
import json
assert npd["metadata"]["namespace"] == "kube-system", npd["metadata"]
[rule] = json.loads(npd["data"]["nds-monitor-health.json"])["rules"]
assert rule["condition"] == "NeuronAcceleratorProblem" and rule["path"] == "/usr/local/bin/nds-monitor", rule
assert option(rule["args"], "--url") == "https://nds-monitor-all.neuron-monitor.svc:9400", rule["args"]
assert option(rule["args"], "--ca-file") == "/etc/nds-monitor-ca/ca.crt", rule["args"]
assert option(rule["args"], "--timeout") == "7500ms" and rule["timeout"] == "15s", rule
EOF
    check_rendering defaults <<'EOF' || return 1
assert npd is None and docs["Service"]["spec"]["clusterIP"] == "None", "off by default"
EOF
    # Over HTTPS the check must be able to verify the certificate.
    if helm_template --set nodeProblemDetector.enabled=true --set tlsSecret=t >"$tmp/npd.out" 2>&1; then
        fail "nodeProblemDetector with tlsSecret and no caFile rendered" || return 1
    fi
    grep -q "needs nodeProblemDetector.caFile" "$tmp/npd.out" || { cat "$tmp/npd.out"; return 1; }
}

kubernetes_rst_is_valid() { rst_is_valid "$root/Documentation/kubernetes.rst"; }

if [ ! -x "$python" ] || [ ! -x "$K8S_VENV/bin/checkov" ] || [ ! -x "$KUBECTL" ]; then
    echo "not ok 1 - the manifest checkers are installed ($K8S_VENV, $KUBECTL: run make deps)"
    echo "1..1"
    exit 1
fi
check "helm and kubectl are the pinned releases" helm_and_kubectl_are_the_pinned_releases
check "helm lint --strict: no warning, with the defaults and the ci/ values" helm_lint_is_clean
check "the plain YAML is helm template of the chart's defaults" plain_yaml_is_the_chart_rendered
check "the ServiceMonitor and PodMonitor are rendered only where the Prometheus Operator's API exists" \
    the_monitors_appear_only_with_the_prometheus_operator
check "the chart renders every value combination" render_variants
check "tlsSecret: serve, probes, ServiceMonitor and PodMonitor over HTTPS; insecureSkipVerify a value" \
    tls_turns_on_https_for_serve_the_probes_and_the_scrapes
check "sysfs: the container's own, or the host's whole /sys with hostSysfs; never one directory" \
    sysfs_is_the_containers_own_or_the_hosts_whole
check "podResources: the kubelet's socket directory read-only, --pod-resources-socket" \
    pod_resources_mounts_the_kubelets_socket_read_only
check "every value of ci/all-options-values.yaml reaches the objects; the helpers' labels everywhere" \
    every_value_reaches_the_objects
check "a monitorConfig change changes the pod template's checksum/config" monitor_config_changes_roll_the_pods
check "readinessProbe /readyz, livenessProbe /healthz; the event stream's state directory" \
    probes_and_the_state_directory
check "nodeProblemDetector: NPD's custom plugin monitor runs nds-monitor health on the node's own pod" \
    node_problem_detector_checks_the_nodes_own_pod
check "values.schema.json: helm refuses wrong-typed, unknown and removed values" the_schema_refuses_wrong_values
check "NOTES.txt renders and says what the values imply" notes_say_how_to_reach_the_metrics
check "every object validates (strict) against Kubernetes ${KUBERNETES_VERSIONS[*]}" \
    every_object_validates_against_the_kubernetes_schemas
check "the validator rejects a misspelled field and a wrong type" the_validator_rejects_a_broken_daemonset
check "the namespace's Pod Security label is the level the pod meets (restricted where the values allow)" \
    pod_security_level_is_the_namespace_label
check "checkov: no privileged container, host network, writable root; only what the values ask for flagged" \
    checkov_finds_only_what_the_values_ask_for
check "the node side: KMM Module and Dockerfile, CDI specification" the_node_side_manifests_hold_together
check "containerInsights: CloudWatch Container Insights' Neuron scraper discovers the Service, as upstream writes its rules" \
    container_insights_discovers_the_service
check "Documentation/kubernetes.rst is valid reStructuredText" kubernetes_rst_is_valid
echo "1..$number"
[ "$failures" -eq 0 ]
