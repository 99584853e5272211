#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Renders the nds-monitor Helm chart without helm (Debian has none), for the plain YAML next
to it and for tests/manifests.sh.

It implements the part of Helm's template language the chart uses, and refuses everything
else, so that a template using more fails here instead of rendering differently from helm:
actions `{{ ... }}` with `{{-`/`-}}` trimming; `if`/`else`/`end` with Go's truth (false, 0,
nil and empty are false); `not`; the fields `.Values.*`, `.Release.Name`, `.Release.Namespace`,
`.Chart.*` and `.Capabilities.APIVersions.Has "group/version"`; pipelines into `quote`,
`nindent N`, `toYaml` and `toJson`. Output: the documents in Helm's install order, each after
a `# Source:` line, as `helm template` prints them.

Usage: render-chart.py CHART [--release NAME] [--namespace NS] [--set PATH=VALUE ...]
                             [--api-versions GROUP/VERSION ...]
       render-chart.py CHART --write-plain DIR
  --write-plain: writes the plain YAML (PLAIN_FILES) from the chart's defaults, release
  nds-monitor in namespace neuron-monitor, the namespace included.
"""

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

# Helm's install order (pkg/releaseutil/kind_sorter.go) for the kinds the chart has; others
# come after them.
INSTALL_ORDER = [
    "Namespace", "NetworkPolicy", "ServiceAccount", "ConfigMap", "Service", "DaemonSet",
]

ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\(|\)|\||[^\s()|]+')


class TemplateError(Exception):
    """A construct outside the supported subset, or a missing value."""


def truthy(value):
    """Go's template truth."""
    return not (value is None or value is False or value == 0 or value in ("", [], {}))


def to_yaml(value):
    """Helm's toYaml: block YAML, keys sorted, without the final newline."""
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n")


def to_json(value):
    """Helm's toJson (Go's encoding/json): compact, map keys sorted."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def go_string(value):
    """How a template prints a value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        raise TemplateError("printing a missing value")
    if isinstance(value, (dict, list)):
        raise TemplateError(f"printing a collection {value!r}: pipe it into toYaml")
    return str(value)


class Renderer:
    def __init__(self, context, api_versions):
        self.context = context
        self.api_versions = set(api_versions)

    def field(self, path):
        if path == ".Capabilities.APIVersions.Has":
            return lambda version: version in self.api_versions
        node = self.context
        for part in path.lstrip(".").split("."):
            if not isinstance(node, dict) or part not in node:
                raise TemplateError(f"no value at {path}")
            node = node[part]
        return node

    def term(self, token):
        if token.startswith('"'):
            return json.loads(token)
        if re.fullmatch(r"-?[0-9]+", token):
            return int(token)
        if token.startswith("."):
            return self.field(token)
        raise TemplateError(f"unsupported term {token!r}")

    def command(self, tokens, piped):
        """One command of a pipeline; `piped` is the previous command's value (or absent)."""
        head, args = tokens[0], tokens[1:]
        values = [self.term(t) for t in args]
        if piped is not _NOTHING:
            values.append(piped)
        if head.startswith(".") and not args and piped is _NOTHING:
            return self.field(head)
        if head == ".Capabilities.APIVersions.Has" and len(values) == 1:
            return self.field(head)(values[0])
        functions = {
            "quote": (1, lambda v: json.dumps(go_string(v))),
            "nindent": (2, lambda n, v: "\n" + "\n".join(" " * n + l if l else l for l in v.split("\n"))),
            "toYaml": (1, to_yaml),
            "toJson": (1, to_json),
            "not": (1, lambda v: not truthy(v)),
        }
        if head not in functions:
            raise TemplateError(f"unsupported function {head!r}")
        arity, function = functions[head]
        if len(values) != arity:
            raise TemplateError(f"{head} takes {arity} arguments, got {len(values)}")
        return function(*values)

    def pipeline(self, text):
        tokens = TOKEN.findall(text)
        if "(" in tokens or ")" in tokens:
            raise TemplateError(f"parentheses are not supported: {text!r}")
        value = _NOTHING
        command = []
        for token in tokens + ["|"]:
            if token == "|":
                if not command:
                    raise TemplateError(f"empty command in {text!r}")
                value = self.command(command, value)
                command = []
            else:
                command.append(token)
        return value

    def render(self, source):
        """The text of one template."""
        pieces = []  # text, or (kind, argument) for actions
        position = 0
        for match in ACTION.finditer(source):
            text = source[position:match.start()]
            if match.group(1):
                text = text.rstrip()
            pieces.append(text)
            pieces.append(("action", match.group(2)))
            position = match.end()
            if match.group(3):
                rest = source[position:]
                position += len(rest) - len(rest.lstrip())
        pieces.append(source[position:])
        output, index = self.block(pieces, 0, True)
        if index < len(pieces):
            raise TemplateError(f"{pieces[index][1]!r} without if")
        return output

    def block(self, pieces, index, active):
        """Renders from `index` to the matching else/end; returns (text, index after it)."""
        out = []
        while index < len(pieces):
            piece = pieces[index]
            index += 1
            if isinstance(piece, str):
                if active:
                    out.append(piece)
                continue
            action = piece[1]
            if action.startswith("/*"):
                continue
            word = action.split(None, 1)[0]
            if word == "if":
                condition = truthy(self.pipeline(action[2:])) if active else False
                text, index, ended_by = self.branch(pieces, index, active and condition)
                out.append(text)
                if ended_by == "else":
                    text, index, ended_by = self.branch(pieces, index, active and not condition)
                    out.append(text)
                if ended_by != "end":
                    raise TemplateError("if without end")
            elif word in ("else", "end"):
                return "".join(out), index - 1
            elif word in ("range", "with", "define", "include", "template", "tpl", "block"):
                raise TemplateError(f"unsupported action {action!r}")
            elif active:
                out.append(go_string(self.pipeline(action)))
        return "".join(out), index

    def branch(self, pieces, index, active):
        text, index = self.block(pieces, index, active)
        if index >= len(pieces):
            return text, index, None
        return text, index + 1, pieces[index][1].split(None, 1)[0]


_NOTHING = object()

PLAIN_HEADER = """\
# SPDX-License-Identifier: GPL-2.0
# {what}
# Generated from chart/nds-monitor with its default values by
#   render-chart.py chart/nds-monitor --write-plain .
# (tests/manifests.sh checks that it still is): edit the chart, then run that.
"""
MONITORING_API = "monitoring.coreos.com/v1"
# File name -> (what it holds, the documents it takes from the rendering with the Prometheus
# Operator's API).
PLAIN_FILES = {
    "nds-monitor.yaml": (
        "nds-monitor as a DaemonSet: kubectl apply -f nds-monitor.yaml",
        lambda kind: kind != "ServiceMonitor",
    ),
    "nds-monitor-servicemonitor.yaml": (
        "Its ServiceMonitor, where the Prometheus Operator runs: kubectl apply -f nds-monitor-servicemonitor.yaml",
        lambda kind: kind == "ServiceMonitor",
    ),
}
PLAIN_SETS = ["createNamespace=true"]


def plain_files(chart):
    """{file name: text} of the plain YAML."""
    documents = render_chart(chart, "nds-monitor", "neuron-monitor", PLAIN_SETS, [MONITORING_API])
    files = {}
    for name, (what, takes) in PLAIN_FILES.items():
        text = PLAIN_HEADER.format(what=what)
        for source, document_text, document in documents:
            if takes(document["kind"]):
                text += f"---\n# Source: {source}\n{document_text}"
        files[name] = text
    return files


def set_value(values, path, text):
    """`--set a.b=c`: the value parsed as YAML, as helm does for scalars."""
    node = values
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = yaml.safe_load(text)


def render_chart(chart, release, namespace, sets=(), api_versions=()):
    """[(template name, text, object)] of the chart's documents, in install order."""
    chart = Path(chart)
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
    values = yaml.safe_load((chart / "values.yaml").read_text())
    for assignment in sets:
        path, _, text = assignment.partition("=")
        set_value(values, path, text)
    context = {
        "Values": values,
        "Release": {"Name": release, "Namespace": namespace},
        "Chart": {key[0].upper() + key[1:]: value for key, value in metadata.items()},
    }
    renderer = Renderer(context, api_versions)
    documents = []
    for template in sorted((chart / "templates").glob("*.yaml")):
        text = renderer.render(template.read_text())
        for part in re.split(r"^---$", text, flags=re.M):
            document = yaml.safe_load(part)
            if document is not None:
                source = f"{chart.name}/templates/{template.name}"
                documents.append((source, part.strip("\n") + "\n", document))

    def order(entry):
        kind = entry[2].get("kind")
        return INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)

    return sorted(documents, key=order)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chart")
    parser.add_argument("--release", default="nds-monitor")
    parser.add_argument("--namespace", default="neuron-monitor")
    parser.add_argument("--set", action="append", default=[], dest="sets")
    parser.add_argument("--api-versions", action="append", default=[])
    parser.add_argument("--write-plain", metavar="DIR")
    args = parser.parse_args()
    try:
        if args.write_plain:
            for name, text in plain_files(args.chart).items():
                (Path(args.write_plain) / name).write_text(text)
            return 0
        documents = render_chart(args.chart, args.release, args.namespace, args.sets, args.api_versions)
    except (TemplateError, yaml.YAMLError, OSError) as error:
        print(f"render-chart.py: {error}", file=sys.stderr)
        return 1
    for source, text, _ in documents:
        sys.stdout.write(f"---\n# Source: {source}\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
