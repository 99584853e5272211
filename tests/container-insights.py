#!/usr/bin/env python3
"""Checks a rendering of the chart against CloudWatch Container Insights' Neuron scraper.

The scraper's rules are in tests/container-insights-receiver.json, as its sources write them
(each part names its file and commit). A Service of the rendering must be one the scraper
discovers (the role service, its label selector, the agent's own namespace), reachable the
way the add-on's own Service is (a cluster IP local to each node), on the port the monitor
serves, over HTTPS with the certificate the agent trusts for that Service's name, and
admitted by the chart's NetworkPolicy. Prints a RESULT line; exits 1 with the reason on the
first rule broken.

Usage: container-insights.py RENDERING.yaml RECEIVER.json
"""

import json
import sys

import yaml

# What the monitor serves its exposition at (nds-monitor serve).
MONITOR_METRICS_PATH = "/metrics"


def fail(message):
    print(f"container insights: {message}", file=sys.stderr)
    sys.exit(1)


def selector_terms(selector):
    """`k=v[,k2=v2]` (equality terms, the only kind the scraper's selector has) as a dict."""
    terms = {}
    for term in selector.split(","):
        key, sep, value = term.partition("=")
        if not sep or "!" in key:
            fail(f"selector term {term!r} is not an equality")
        terms[key.strip()] = value.strip()
    return terms


def option(args, name):
    if args.count(name) != 1:
        fail(f"{name} given {args.count(name)} times: {args}")
    return args[args.index(name) + 1]


def main(rendering_path, receiver_path):
    receiver = json.load(open(receiver_path))
    scraper = receiver["scraper"]
    docs = [d for d in yaml.safe_load_all(open(rendering_path)) if d]
    agent_namespace = receiver["agent_namespace"]["namespace"]

    # Discovery: role service, the agent's own namespace, the label selector.
    sd = scraper["kubernetes_sd_config"]
    if sd["role"] != "service" or sd["namespaces"] != {"own_namespace": True}:
        fail(f"the scraper's discovery is no longer what this check reads: {sd}")
    wanted = {}
    for selector in sd["selectors"]:
        if selector["role"] != "service":
            fail(f"a selector of another role: {selector}")
        wanted.update(selector_terms(selector["label"]))
    found = [
        d
        for d in docs
        if d["kind"] == "Service"
        and d["metadata"]["namespace"] == agent_namespace
        and all(d["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
    ]
    if len(found) != 1:
        fail(f"{len(found)} Services labelled {wanted} in {agent_namespace}, not one")
    service = found[0]
    name = service["metadata"]["name"]

    # Reached as the add-on's Service is: each node's agent scrapes the cluster IP, on its node.
    like = receiver["service"]
    spec = service["spec"]
    if spec.get("type", "ClusterIP") != like["type"] or spec.get("clusterIP") == "None":
        fail(f"Service {name} is not a {like['type']} with an address: {spec}")
    if spec.get("internalTrafficPolicy") != like["internal_traffic_policy"]:
        fail(f"Service {name}: internalTrafficPolicy {spec.get('internalTrafficPolicy')}, "
             f"the add-on's is {like['internal_traffic_policy']}")

    # Role service makes a target of each port: the one port must reach the monitor's.
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    if any(pod_labels.get(k) != v for k, v in spec["selector"].items()):
        fail(f"Service {name} selects {spec['selector']}, the pods are {pod_labels}")
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = container["args"]
    ports = spec["ports"]
    if len(ports) != 1:
        fail(f"Service {name} has {len(ports)} ports: each would be scraped")
    port = ports[0]
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    target = port["targetPort"]
    target = container_ports.get(target) if isinstance(target, str) else target
    if target is None or target != int(option(args, "--port")):
        fail(f"Service port {port} does not reach the monitor's --port {option(args, '--port')}")

    # Scheme and path: HTTPS at /metrics, with the Secret mounted for serve.
    if scraper["scheme"] != "https" or scraper["metrics_path"] != MONITOR_METRICS_PATH:
        fail(f"the scraper asks {scraper['scheme']}://…{scraper['metrics_path']}")
    cert = option(args, "--cert-file")
    key = option(args, "--key-file")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret = None
    for volume_name, path in mounts.items():
        if cert.startswith(path + "/") and key.startswith(path + "/"):
            secret = volumes[volume_name]["secret"]["secretName"]
    if secret is None:
        fail(f"--cert-file {cert} and --key-file {key} come from no mounted Secret")
    for probe in ("livenessProbe", "readinessProbe"):
        if container[probe]["httpGet"]["scheme"] != "HTTPS":
            fail(f"the {probe} is not HTTPS")

    # The scraper checks the certificate (no insecure_skip_verify) for the Service's name.
    if scraper["tls_config"]["insecure_skip_verify"]:
        fail("the scraper no longer checks certificates: this check would say too much")
    host = f"{name}.{agent_namespace}.svc"
    agent_cert = receiver["agent_certificate"]
    if secret != agent_cert["secret"]:
        fail(f"the Secret {secret} is not the agent's certificate {agent_cert['secret']}, "
             "whose names this check knows")
    if host not in agent_cert["dns_names"]:
        fail(f"the scraper connects to {host}, which {secret}'s certificate does not name")

    # The chart's NetworkPolicy, where rendered, admits the port.
    for policy in (d for d in docs if d["kind"] == "NetworkPolicy"):
        admitted = [p.get("port") for rule in policy["spec"].get("ingress", [])
                    for p in rule.get("ports", [])]
        if target not in admitted and "metrics" not in admitted:
            fail(f"NetworkPolicy {policy['metadata']['name']} admits {admitted}, not {target}")

    print(f"RESULT container insights: Service {name} in {agent_namespace} matches "
          f"{sd['selectors'][0]['label']} (role service, own namespace), {spec.get('type', 'ClusterIP')} "
          f"internalTrafficPolicy {spec['internalTrafficPolicy']}, https://{host}:{port['port']}"
          f"{scraper['metrics_path']} with {secret}; rules of {scraper['repository']} "
          f"{scraper['path']} at {scraper['commit'][:12]}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail(__doc__.strip().splitlines()[-1])
    main(sys.argv[1], sys.argv[2])
