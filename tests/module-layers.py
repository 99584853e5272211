#!/usr/bin/env python3
"""Checks the kernel module's layering: every file of rust/ refers only to modules of a lower
layer (or to its own directory), `unsafe` appears only in rust/shim/, only the shim registers a
misc device, and only the shim has kernel-version conditionals (the `kernel_version` cfg that
Kbuild sets, or the C `LINUX_VERSION_CODE`). Every `cfg` predicate names a known cfg, so a
misspelt one cannot silently select the wrong release. Prints one line per violation; exits 1
if there is any.

The ranks, bottom up: abi (the wire format), shim (generic kernel abstractions), state (pure
state machines), then the top files in the order they may use each other.
"""

import pathlib
import re
import sys

from rust_paths import crate_heads

RANK = {
    "abi": 0,
    "shim": 1,
    "state": 2,
    "device": 3,
    "file": 4,
    "sysfs_tree": 4,
    "metrics_worker": 4,
    "neuron_device": 5,
    "neuron_ds": 6,
}

# The cfg names a predicate may use: Kbuild's release and test build switch, and the kernel's own.
KNOWN_CFGS = {"kernel_version", "neuron_ds_kunit", "MODULE", "test"}
CFG_OPERATORS = {"not", "any", "all"}

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "rust")
problems = []


def cfg_predicates(code: str):
    """The predicates of `#[cfg(...)]`, `cfg!(...)` and `#[cfg_attr(<predicate>, ...)]`."""
    for match in re.finditer(r"\b(cfg_attr|cfg)\s*!?\s*\(", code):
        depth, start, end = 0, match.end(), match.end()
        for end in range(match.end() - 1, len(code)):
            char = code[end]
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    break
            elif char == "," and depth == 1 and match.group(1) == "cfg_attr":
                break
        yield code[start:end]


def version_conditional(code: str) -> bool:
    if "LINUX_VERSION_CODE" in code:
        return True
    return any(re.search(r"\bkernel_version\b", p) for p in cfg_predicates(code))


def unknown_cfgs(code: str) -> set:
    names = set()
    for predicate in cfg_predicates(code):
        for name in re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r'"[^"]*"', "", predicate)):
            if name not in KNOWN_CFGS | CFG_OPERATORS and not name.startswith("CONFIG_"):
                names.add(name)
    return names


def layer_of(path: pathlib.Path) -> str:
    relative = path.relative_to(root)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


for path in sorted(root.rglob("*.rs")):
    text = path.read_text()
    layer = layer_of(path)
    code = "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))
    if layer != "shim" and re.search(r"\bunsafe\b", code):
        problems.append(f"{path}: unsafe outside rust/shim/")
    if layer != "shim" and "MiscDeviceRegistration::register" in code:
        problems.append(f"{path}: registers a misc device outside rust/shim/misc.rs")
    if layer != "shim" and version_conditional(code):
        problems.append(f"{path}: kernel-version conditional outside rust/shim/")
    for name in sorted(unknown_cfgs(code)):
        problems.append(f"{path}: cfg on unknown name '{name}' (known: {', '.join(sorted(KNOWN_CFGS))}, CONFIG_*)")
    if layer not in RANK:
        problems.append(f"{path}: not in any layer (add it to {sys.argv[0]})")
        continue
    for name in crate_heads(code, dollar_crate=True):
        if name not in RANK:
            continue
        if name != layer and RANK[name] >= RANK[layer]:
            problems.append(f"{path}: {layer} (rank {RANK[layer]}) uses {name} (rank {RANK[name]})")

for problem in problems:
    print(problem)
print(f"module layers: {len(problems)} problems")
sys.exit(1 if problems else 0)
