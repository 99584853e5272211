#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The container image (userspace/packaging/image.sh, make image): built twice, the second time from a
# copy of the tree in another directory with a cargo target of its own, to the same digest;
# its files listed (no shell, no package manager, static programs, the entrypoint's file
# capability) and its OCI labels read back with skopeo. Then, where podman can run, the image
# runs as the DaemonSet's security context says (userspace/packaging/kubernetes/nds-monitor.yaml: its
# user, capabilities, read-only root, no privilege escalation) against nds-loadgen --slab-dir
# producers, a real Prometheus scrapes it and answers with the producers' numbers, /healthz
# answers, over HTTP and with --cert-file/--key-file over HTTPS. Prints one TAP line per test;
# exits non-zero if any failed.
#
# Usage: tests/image.sh
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
# shellcheck source=qemu/env.sh
source qemu/env.sh

python="$K8S_VENV/bin/python3"
image="$root/build/nds-monitor-image.tar"
tmp="$(mktemp -d)"
containers=()
cleanup() {
    local container
    for container in "${containers[@]}"; do
        podman rm -f -t 0 "$container" >/dev/null 2>&1
    done
    # Each commit's image is another: not kept in podman's storage.
    [ -n "${image_id:-}" ] && podman rmi -f "$image_id" >/dev/null 2>&1
    [ -n "${loadgen_pid:-}" ] && kill "$loadgen_pid" 2>/dev/null
    [ -n "${prometheus_pid:-}" ] && kill "$prometheus_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tests/tap.sh
source tests/tap.sh

# --- the image

# build_output <log>: "digest archive-sha256" from userspace/packaging/image.sh's output.
build_output() {
    local digest sha
    digest="$(sed -n 's/^manifest digest \(sha256:[0-9a-f]*\)$/\1/p' "$1")"
    sha="$(sed -n 's/.* sha256 \([0-9a-f]*\))$/\1/p' "$1")"
    [ -n "$digest" ] && [ -n "$sha" ] && echo "$digest $sha"
}

the_image_builds() {
    bash userspace/packaging/image.sh >"$tmp/build1.log" 2>&1 || { cat "$tmp/build1.log"; return 1; }
    cat "$tmp/build1.log"
    read -r first_digest first_sha < <(build_output "$tmp/build1.log") || fail "no digest printed"
    echo "RESULT $(grep -E '^(manifest digest|archive|blobs)' "$tmp/build1.log" | paste -sd';')"
}

# The same commit in another directory, with a cargo target of its own: the same bytes. The
# copy lies at one path of the cache, and rsync keeps the modification times of the tree, so
# its crates compile anew when their sources changed since the last run, as the first
# build's do; both targets are in the cargo cache (userspace/target/static, static-elsewhere),
# so a new Cargo.lock or toolchain compiles every dependency anew in both.
a_second_build_elsewhere_has_the_same_digest() {
    local copy="$CACHE_DIR/image-elsewhere/neuron-ds"
    mkdir -p "$copy"
    # One user of the copy at a time (tests/image.sh by hand beside make test).
    exec 7>"$CACHE_DIR/image-elsewhere.lock" && flock 7
    rsync -a --delete --exclude /build --exclude /userspace/target --exclude '/tests/*/target' \
        "$root/" "$copy/" || return 1
    (cd "$copy" && STATIC_TOOLS_TARGET="$root/userspace/target/static-elsewhere" \
        bash userspace/packaging/image.sh --output "$tmp/second.tar") >"$tmp/build2.log" 2>&1 ||
        { cat "$tmp/build2.log"; return 1; }
    local second_digest second_sha
    read -r second_digest second_sha < <(build_output "$tmp/build2.log") || fail "no digest printed"
    [ "$second_digest" = "$first_digest" ] || fail "manifest digests differ: $first_digest, $second_digest" || return 1
    [ "$second_sha" = "$first_sha" ] || fail "archives differ: $first_sha, $second_sha" || return 1
    exec 7>&-
    echo "RESULT two builds (here and in $copy): manifest $first_digest, archive sha256 $first_sha"
}

# The layer's entries: "type mode uid gid size capability path", from the archive itself.
layer_listing() {
    "$python" - "$image" <<'EOF'
import io, json, sys, tarfile
archive = tarfile.open(sys.argv[1])
def blob(digest):
    return archive.extractfile("blobs/sha256/" + digest.split(":")[1]).read()
index = json.loads(archive.extractfile("index.json").read())
manifest = json.loads(blob(index["manifests"][0]["digest"]))
for layer in manifest["layers"]:
    for entry in tarfile.open(fileobj=io.BytesIO(blob(layer["digest"])), mode="r:gz"):
        kind = "d" if entry.isdir() else "f" if entry.isfile() else "l" if entry.issym() else "?"
        cap = entry.pax_headers.get("SCHILY.xattr.security.capability")
        cap = cap.encode("latin-1").hex() if cap else "-"
        name = entry.name.lstrip("./") or "/"
        print(kind, oct(entry.mode), entry.uid, entry.gid, entry.size, cap, name)
EOF
}

EXPECTED_FILES="/
opt/
opt/aws/
opt/aws/neuron/
opt/aws/neuron/bin/
opt/aws/neuron/bin/neuron-monitor.conf
opt/bin/
opt/bin/entrypoint.sh
opt/bin/nds-monitor
opt/bin/nds-top"

the_image_holds_only_the_tools_no_shell_no_package_manager() {
    layer_listing >"$tmp/files" || return 1
    sed 's/^/RESULT file: /' "$tmp/files"
    diff <(awk '{ print $7 ($1 == "d" && $7 != "/" ? "/" : "") }' "$tmp/files" | sed 's|//$|/|' | sort) \
        <(echo "$EXPECTED_FILES" | sort) || fail "the image's files differ from the list" || return 1
    # Belt and braces against a list edited carelessly: no shell, no package manager.
    ! awk '{ print $7 }' "$tmp/files" |
        grep -E '(^|/)(sh|bash|dash|ash|busybox|apt|apt-get|dpkg|apk|rpm|yum|dnf|microdnf|pip[0-9.]*|python[0-9.]*)$' ||
        fail "a shell or package manager is in the image" || return 1
    awk '$1 != "d" && ($3 != 0 || $4 != 0) { exit 1 }' "$tmp/files" || fail "a file not owned by root:root"
}

# Every program is static (no program interpreter) and only the entrypoint has a file capability.
the_programs_are_static_and_only_the_entrypoint_has_cap_perfmon() {
    local unpacked="$tmp/unpacked" name
    mkdir -p "$unpacked/oci" && tar -xf "$image" -C "$unpacked/oci" || return 1
    umoci raw unpack --image "$unpacked/oci:0.1.0" "$unpacked/rootfs" || return 1
    for name in entrypoint.sh nds-monitor nds-top; do
        ! readelf -l "$unpacked/rootfs/opt/bin/$name" | grep -q 'Requesting program interpreter' ||
            fail "$name is dynamically linked" || return 1
        readelf -h "$unpacked/rootfs/opt/bin/$name" | grep -q 'Type:.*DYN\|Type:.*EXEC' || return 1
    done
    getcap "$unpacked/rootfs/opt/bin/entrypoint.sh" | grep -qx ".*/entrypoint.sh cap_perfmon=p" ||
        fail "entrypoint.sh: '$(getcap "$unpacked/rootfs/opt/bin/entrypoint.sh")'" || return 1
    [ -z "$(getcap "$unpacked/rootfs/opt/bin/nds-monitor" "$unpacked/rootfs/opt/bin/nds-top")" ] ||
        fail "another program has a file capability" || return 1
    echo "RESULT static: entrypoint.sh, nds-monitor, nds-top; $(getcap "$unpacked/rootfs/opt/bin/entrypoint.sh" | sed "s|$unpacked/rootfs||")"
}

the_labels_and_configuration_read_back() {
    skopeo inspect "oci-archive:$image" >"$tmp/inspect.json" &&
        skopeo inspect --config "oci-archive:$image" >"$tmp/config.json" || return 1
    "$python" - "$tmp/inspect.json" "$tmp/config.json" "$(git rev-parse HEAD)" \
        "$(date -u -d "@$(git log -1 --format=%ct)" +%Y-%m-%dT%H:%M:%SZ)" <<'EOF'
import json, sys
inspect, config = (json.load(open(p)) for p in sys.argv[1:3])
revision, created = sys.argv[3:5]
labels = inspect["Labels"]
expected = {
    "org.opencontainers.image.title": "nds-monitor",
    "org.opencontainers.image.version": "0.1.0",
    "org.opencontainers.image.revision": revision,
    "org.opencontainers.image.created": created,
    "org.opencontainers.image.licenses": "GPL-2.0-only",
}
for key, value in expected.items():
    assert labels.get(key) == value, (key, labels.get(key), value)
for key in ("description", "vendor", "documentation"):
    assert labels.get("org.opencontainers.image." + key), key
assert inspect["Created"] == created, inspect["Created"]
c = config["config"]
assert c["User"] == "65532:65532", c
assert c["Entrypoint"] == ["/opt/bin/entrypoint.sh"], c
assert c["Cmd"] == ["--port", "8000", "--neuron-monitor-config", "/opt/aws/neuron/bin/neuron-monitor.conf"], c
assert list(c["ExposedPorts"]) == ["8000/tcp"], c
print("RESULT labels:", ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "org.opencontainers.image.description"))
EOF
}

# --- the image under podman

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# podman_run ARGS...: podman with the runtime and limits this kind of host needs: runc (crun
# cannot use a hybrid cgroup hierarchy), and limits below those podman asks for by default,
# which a sandboxed root may not raise to.
podman_run() {
    local nofile
    nofile="$(ulimit -Hn)"
    { [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; } && nofile=65536
    podman --runtime runc run --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 "$@"
}

# The podman flags of the DaemonSet's container securityContext.
security_flags() {
    "$python" - "$root/userspace/packaging/kubernetes/nds-monitor.yaml" <<'EOF'
import sys, yaml
ds = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet")
pod = ds["spec"]["template"]["spec"]
sc = pod["containers"][0]["securityContext"]
assert sc["privileged"] is False and not pod.get("hostPID") and not pod.get("hostNetwork")
flags = [f"--user={sc['runAsUser']}:{sc['runAsGroup']}"]
if sc["readOnlyRootFilesystem"]:
    flags.append("--read-only")
if sc["allowPrivilegeEscalation"] is False:
    flags.append("--security-opt=no-new-privileges")
flags += [f"--cap-drop={c}" for c in sc["capabilities"]["drop"]]
flags += [f"--cap-add={c}" for c in sc["capabilities"]["add"]]
print(" ".join(flags))
EOF
}

podman_can_run() {
    [ "$(id -u)" -eq 0 ] || { echo "not root (the test runs podman rootful)"; return 1; }
    command -v podman >/dev/null || { echo "podman is not installed (make deps installs it)"; return 1; }
    podman info >"$tmp/podman-info.log" 2>&1 || { cat "$tmp/podman-info.log"; return 1; }
    return 0
}

# podman_loads_the_archive: the image in podman's storage; sets image_id.
podman_loads_the_archive() {
    podman load --quiet --input "$image" >"$tmp/load.log" 2>&1 || { cat "$tmp/load.log"; return 1; }
    image_id="$(sed -n 's/^Loaded image[^:]*: *//p' "$tmp/load.log" | tail -n1)"
    [ -n "$image_id" ] || fail "podman load named no image: $(cat "$tmp/load.log")"
}

# podman_starts_containers: a container of the image starts (podman's own failures, exit
# codes 125-127, mean this host cannot run containers; the image's own are other codes).
podman_starts_containers() {
    local output status
    output="$(podman_run --rm --network none --entrypoint /opt/bin/nds-monitor "$image_id" --version 2>&1)"
    status=$?
    if [ "$status" -ge 125 ] && [ "$status" -le 127 ]; then
        echo "$output"
        return 1
    fi
    return 0
}

start_load() {
    mkdir -p "$tmp/slabs" "$tmp/reports"
    chmod 755 "$tmp" "$tmp/slabs"
    (cd userspace && cargo build --quiet --locked -p nds-loadgen) || return 1
    mkfifo "$tmp/hold"
    userspace/target/debug/nds-loadgen run --slab-dir "$tmp/slabs" --devices 0,1 \
        --procs-per-device 2 --count 400 --rate 2000 --hold --report-dir "$tmp/reports" \
        --time-in-use-unit-ps 1 --summary "$tmp/summary.json" <"$tmp/hold" >"$tmp/loadgen.out" 2>&1 &
    loadgen_pid=$!
    exec 9>"$tmp/hold"
    local waited
    for waited in $(seq 1 120); do
        grep -q '^ready' "$tmp/loadgen.out" && return 0
        kill -0 "$loadgen_pid" 2>/dev/null || break
        sleep 0.5
    done
    cat "$tmp/loadgen.out"
    return 1
}

# run_monitor NAME PORT [ENTRYPOINT ARGS...]: the image as the DaemonSet runs it, port published
# on loopback, the slab directory read-only.
run_monitor() {
    local name="$1" port="$2"
    shift 2
    local flags
    flags="$(security_flags)" || return 1
    # shellcheck disable=SC2086 # one word per flag
    podman_run -d --name "$name" $flags -p "127.0.0.1:$port:8000" \
        -v "$tmp/slabs:/slabs:ro" "$@" "$image_id" --port 8000 \
        --neuron-monitor-config /opt/aws/neuron/bin/neuron-monitor.conf "${extra_args[@]}" \
        -- --slab-dir /slabs --instance-metadata off >/dev/null || return 1
    containers+=("$name")
}

wait_http() { # wait_http URL [curl options...]: 200 within 30 s
    local url="$1" i
    shift
    for i in $(seq 1 60); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "$@" "$url")" = 200 ] && return 0
        sleep 0.5
    done
    fail "$url never answered 200"
}

# monitor_of <pid>: the pid of its nds-monitor child.
monitor_of() {
    local child
    for child in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
        grep -qP '^Name:\tnds-monitor$' "/proc/$child/status" && echo "$child" && return 0
    done
    return 1
}

extra_args=()
the_image_runs_with_the_daemonsets_security_context() {
    start_load || return 1
    monitor_port="$(free_port)"
    run_monitor nds-monitor-test "$monitor_port" || return 1
    wait_http "http://127.0.0.1:$monitor_port/metrics" || { podman logs nds-monitor-test; return 1; }
    local init pid status
    init="$(podman inspect --format '{{.State.Pid}}' nds-monitor-test)"
    grep -qP '^Name:\tentrypoint.sh$' "/proc/$init/status" || fail "process 1 is not entrypoint.sh" || return 1
    # As process 1, the entrypoint runs the monitor as its child (nds-entrypoint's init.rs).
    pid="$(monitor_of "$init")" || fail "entrypoint.sh has no nds-monitor child" || return 1
    status="$(cat "/proc/$pid/status")"
    grep -qP '^Uid:\t65532\t65532\t65532\t65532$' <<<"$status" || fail "not uid 65532: $status" || return 1
    grep -qP '^NoNewPrivs:\t1$' <<<"$status" || fail "no_new_privs is off" || return 1
    # CAP_PERFMON (38) alone, effective: passed on by the entrypoint as an ambient capability.
    local set
    for set in CapPrm CapEff CapBnd CapAmb; do
        grep -qP "^$set:\t0000004000000000$" <<<"$status" || fail "$set: $(grep "^$set" <<<"$status")" || return 1
    done
    awk '$5 == "/" { exit ($6 ~ /(^|,)ro(,|$)/) ? 0 : 1 }' "/proc/$init/mountinfo" ||
        fail "the root filesystem is writable" || return 1
    [ "$(podman inspect --format '{{.HostConfig.Privileged}}' nds-monitor-test)" = false ] || return 1
    echo "RESULT podman: $(security_flags); the monitor runs as 65532 with CapEff=CapAmb=0000004000000000 (PERFMON), NoNewPrivs 1, root mounted ro"
}

healthz_answers() {
    local body
    body="$(curl -s -m 5 -w ' %{http_code}' "http://127.0.0.1:$monitor_port/healthz")"
    [ "${body##* }" = 200 ] || fail "/healthz: $body" || return 1
    echo "RESULT GET /healthz: 200"
}

a_real_prometheus_scrapes_the_producers_numbers() {
    local prometheus_port
    prometheus_port="$(free_port)"
    cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: nds-monitor
    static_configs:
      - targets: ['127.0.0.1:$monitor_port']
EOF
    prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prometheus-data" \
        --web.listen-address="127.0.0.1:$prometheus_port" >"$tmp/prometheus.log" 2>&1 &
    prometheus_pid=$!
    "$python" - "$tmp/reports" "127.0.0.1:$prometheus_port" <<'EOF'
import json, pathlib, sys, time, urllib.parse, urllib.request
reports = [json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json"))]
assert len(reports) == 4, reports
server = sys.argv[2]

def query(expression, series):
    url = f"http://{server}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            answer = json.load(urllib.request.urlopen(url, timeout=5))
            if answer["status"] == "success" and len(answer["data"]["result"]) >= series:
                return answer["data"]["result"]
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"Prometheus never had {series} series for {expression}")

compared = 0
# execution_status_total by the companion exporter's status types, from the NRT statuses the
# producers counted.
statuses = {
    "completed": "NRT_SUCCESS",
    "completed_with_err": "NRT_EXEC_COMPLETED_WITH_ERR",
    "completed_with_num_err": "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
    "timed_out": "NRT_TIMEOUT",
    "incorrect_input": "NRT_EXEC_BAD_INPUT",
}
for status_type, status in statuses.items():
    result = query(f'execution_status_total{{status_type="{status_type}"}}', len(reports))
    for report in reports:
        series = [s for s in result if s["metric"].get("runtime_tag") == report["tag"]]
        assert len(series) == 1, (report["tag"], result)
        value = float(series[0]["value"][1])
        assert value == report["statuses"].get(status, 0), (report["tag"], status_type, value, report["statuses"])
        compared += 1
assert sum(r["statuses"].get("NRT_SUCCESS", 0) for r in reports) > 0
print(f"RESULT Prometheus scraped the container: {compared} values equal the producers' reports "
      f"(execution_status_total, 5 status types of each of {len(reports)} processes)")
EOF
}

https_with_the_certificate_files() {
    mkdir -p "$tmp/tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/tls/tls.key" -out "$tmp/tls/tls.crt" 2>/dev/null ||
        return 1
    chmod 644 "$tmp/tls/tls.key"
    local port
    port="$(free_port)"
    extra_args=(--cert-file /etc/nds-monitor-tls/tls.crt --key-file /etc/nds-monitor-tls/tls.key)
    run_monitor nds-monitor-tls-test "$port" -v "$tmp/tls:/etc/nds-monitor-tls:ro"
    local started=$?
    extra_args=()
    [ "$started" -eq 0 ] || return 1
    wait_http "https://127.0.0.1:$port/healthz" --cacert "$tmp/tls/tls.crt" ||
        { podman logs nds-monitor-tls-test; return 1; }
    # /healthz answers from the first tick on; the producers' series come with the first
    # report that has seen their slabs, later on a loaded machine.
    local i
    for i in $(seq 1 60); do
        curl -s -m 5 --cacert "$tmp/tls/tls.crt" "https://127.0.0.1:$port/metrics" |
            grep -q '^execution_status_total{' && break
        [ "$i" -lt 60 ] || { fail "no metrics over HTTPS within 30 s"; return 1; }
        sleep 0.5
    done
    # Plain HTTP on the TLS port is not served.
    [ "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "http://127.0.0.1:$port/healthz")" != 200 ] ||
        fail "HTTP answered on the HTTPS port" || return 1
    echo "RESULT HTTPS: /healthz 200 and /metrics with the container's --cert-file/--key-file"
}

# runc_capabilities <bundle> <name>: runs the bundle detached and prints the CapEff and CapAmb
# of the monitor its entrypoint starts, then removes it.
runc_capabilities() {
    local bundle="$1" name="$2" pid monitor="" i
    runc run --detach --bundle "$bundle" "$name" </dev/null >"$tmp/$name.log" 2>&1 ||
        { cat "$tmp/$name.log"; return 1; }
    pid="$(runc state "$name" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["pid"])')"
    for i in $(seq 1 40); do
        monitor="$(monitor_of "$pid")" && break
        sleep 0.25
    done
    if [ -n "$monitor" ]; then
        grep -E '^Cap(Eff|Amb):' "/proc/$monitor/status" | awk '{ printf "%s%s", sep, $2; sep = " " } END { print "" }'
    fi
    runc kill "$name" KILL >/dev/null 2>&1
    sleep 0.5
    runc delete --force "$name" >/dev/null 2>&1
    [ -n "$monitor" ] || { cat "$tmp/$name.log"; fail "$name: no nds-monitor started"; }
}

# What containerd and CRI-O write for the DaemonSet's container: PERFMON bounding, permitted
# and effective, none ambient, no_new_privs, uid 65532, read-only root. Then the exec of the
# non-root entrypoint keeps PERFMON only through its file capability: with it, the monitor
# holds PERFMON; with the capability removed from the file (the control), it holds nothing.
as_kubernetes_starts_it_the_file_capability_carries_perfmon() {
    local oci="$tmp/unpacked/oci" bundle="$tmp/runc-bundle" caps
    [ -d "$oci" ] || { mkdir -p "$oci" && tar -xf "$image" -C "$oci"; } || return 1
    rm -rf "$bundle"
    umoci unpack --image "$oci:0.1.0" "$bundle" >/dev/null || return 1
    "$python" - "$bundle/config.json" "$tmp/slabs" <<'EOF'
import json, sys
path, slabs = sys.argv[1:3]
config = json.load(open(path))
process = config["process"]
process["terminal"] = False
process["args"] = ["/opt/bin/entrypoint.sh", "--port", "8000", "--", "--slab-dir", "/slabs",
                   "--instance-metadata", "off"]
process["user"] = {"uid": 65532, "gid": 65532}
process["noNewPrivileges"] = True
perfmon = ["CAP_PERFMON"]
process["capabilities"] = {"bounding": perfmon, "effective": perfmon, "permitted": perfmon,
                           "inheritable": [], "ambient": []}
process["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]
config["root"]["readonly"] = True
config["mounts"].append({"destination": "/slabs", "type": "bind", "source": slabs,
                         "options": ["rbind", "ro"]})
json.dump(config, open(path, "w"))
EOF
    caps="$(runc_capabilities "$bundle" nds-monitor-runc-filecap)" || return 1
    [ "$caps" = "0000004000000000 0000004000000000" ] ||
        fail "with the file capability: CapEff CapAmb = $caps" || return 1
    setcap -r "$bundle/rootfs/opt/bin/entrypoint.sh" || return 1
    caps="$(runc_capabilities "$bundle" nds-monitor-runc-nocap)" || return 1
    [ "$caps" = "0000000000000000 0000000000000000" ] ||
        fail "without the file capability: CapEff CapAmb = $caps" || return 1
    grep -q "CAP_PERFMON is not permitted" "$tmp/nds-monitor-runc-nocap.log" || return 1
    echo "RESULT runc as Kubernetes starts it (no ambient set, no_new_privs): monitor CapEff=CapAmb=0000004000000000 with entrypoint.sh's cap_perfmon=p, 0 without it"
}

# SIGTERM (podman stop, a pod's deletion) ends the monitor at once, not after the grace period.
sigterm_stops_the_container() {
    local start elapsed
    start="$(date +%s)"
    podman stop -t 10 nds-monitor-test >/dev/null || return 1
    elapsed=$(($(date +%s) - start))
    [ "$elapsed" -lt 10 ] || fail "podman stop took $elapsed s: SIGTERM was ignored" || return 1
    echo "RESULT podman stop: $elapsed s"
}

if [ ! -x "$python" ]; then
    echo "not ok 1 - the image test's tools are installed ($K8S_VENV: run make deps)"
    echo "1..1"
    exit 1
fi
first_digest="" first_sha=""
check "make image builds the OCI archive" the_image_builds
check "a second build from a copy of the tree elsewhere has the same digest" \
    a_second_build_elsewhere_has_the_same_digest
check "the image holds the tools and nothing else: no shell, no package manager" \
    the_image_holds_only_the_tools_no_shell_no_package_manager
check "the programs are static; only entrypoint.sh has a file capability, cap_perfmon=p" \
    the_programs_are_static_and_only_the_entrypoint_has_cap_perfmon
check "skopeo reads the OCI labels, the user and the entrypoint back" the_labels_and_configuration_read_back
image_id=""
if ! podman_can_run >"$tmp/podman-probe.log" 2>&1; then
    echo "# SKIP the podman tests: podman cannot run here: $(paste -sd' ' "$tmp/podman-probe.log")"
else
    check "podman loads the archive" podman_loads_the_archive
    if [ -z "$image_id" ]; then
        echo "# SKIP the other podman tests: the archive did not load"
    elif ! podman_starts_containers >"$tmp/podman-probe.log" 2>&1; then
        echo "# SKIP the other podman tests: podman cannot start containers here: $(paste -sd' ' "$tmp/podman-probe.log")"
    else
        check "podman runs the image with the DaemonSet's security context, PERFMON only" \
            the_image_runs_with_the_daemonsets_security_context
        check "as Kubernetes starts it (no ambient capabilities), entrypoint.sh's file capability gives the monitor PERFMON" \
            as_kubernetes_starts_it_the_file_capability_carries_perfmon
        check "/healthz answers" healthz_answers
        check "a real Prometheus scrapes the container and gets the producers' numbers" \
            a_real_prometheus_scrapes_the_producers_numbers
        check "--cert-file/--key-file: /healthz and /metrics over HTTPS" https_with_the_certificate_files
        check "SIGTERM stops the container within the grace period" sigterm_stops_the_container
    fi
fi
echo "1..$number"
[ "$failures" -eq 0 ]
