#!/usr/bin/env python3
"""Checks the layering of the userspace workspace, from `cargo metadata` and the sources.

Crates: every workspace member has a floor, declared once in userspace/Cargo.toml under
[workspace.metadata.floors]. A normal or build dependency on another member must go to a
crate on a lower floor. A dev-dependency may go to a lower floor or the same one (a crate's
tests may use a sibling, or the crate itself with more features), never higher: a crate's
tests do not build on the crates built on it.

Modules: in each crate root (src/lib.rs, src/main.rs, src/bin/*.rs: the lib and bin targets
cargo lists), the file modules are declared bottom-up, and a module's files may name through
`crate::` (a path, or the head of a `use crate::{...}` tree) only modules declared before it
in that root, or itself; an item the root re-exports (`pub use module::Item`) counts as its
module. Inside a module's own directory, `super::` is free. Comments are not read.

Size: no crate of the monitor (MONITOR_CRATES) holds more than LINE_LIMIT lines of Rust in
src/.

Usage:
  userspace-layers.py [--workspace DIR]            check; one line per problem, exit 1 if any
  userspace-layers.py --draw                       print the drawing of the crates
  userspace-layers.py --check-doc FILE             also check that FILE holds the drawing,
                                                   exactly, between the lines
                                                   `.. crate-drawing-begin` and
                                                   `.. crate-drawing-end`

The drawing lists the floors top first; each crate with its lines of Rust in src/, rounded
to the hundred so that an ordinary edit leaves the drawing as it is, and an
arrow to each crate it depends on (normal and build dependencies), with that crate's floor:
every arrow points to a smaller number. It is made from cargo metadata and the floors only.
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys

from rust_paths import crate_heads

MONITOR_CRATES = [
    "nds-terminal",
    "nds-metric-table",
    "nds-slabs",
    "nds-document",
    "nds-host",
    "nds-exporter",
    "nds-sampler",
    "nds-monitor",
]
LINE_LIMIT = 3000
BEGIN_MARK = ".. crate-drawing-begin"
END_MARK = ".. crate-drawing-end"
# Targets whose source root declares modules of the crate (tests and benches are roots of
# their own and are not layered).
ROOT_KINDS = {"lib", "rlib", "cdylib", "staticlib", "proc-macro", "bin"}


def metadata(workspace: pathlib.Path) -> dict:
    output = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=workspace,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output)


def code_of(path: pathlib.Path) -> str:
    """The file without its comments (whole-line ones, and those after code)."""
    lines = []
    for line in path.read_text().splitlines():
        if line.strip().startswith("//"):
            continue
        lines.append(re.sub(r"\s//.*$", "", line))
    return "\n".join(lines)


def rust_lines(src: pathlib.Path) -> int:
    return sum(len(path.read_text().splitlines()) for path in src.rglob("*.rs"))


def declared_modules(code: str) -> list:
    """The file modules a root declares, in order: (name, `#[path]` or None)."""
    modules = []
    pattern = re.compile(
        r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.MULTILINE
    )
    for match in pattern.finditer(code):
        path = re.search(r'#\[path\s*=\s*"([^"]+)"\]', match.group(1))
        modules.append((match.group(2), path.group(1) if path else None))
    return modules


def reexports(code: str) -> dict:
    """Item -> module, for the root's `pub use module::...` of a declared module's items."""
    items = {}
    for module, tree in re.findall(r"\bpub\s+use\s+(\w+)::([^;]+);", code):
        for piece in re.split(r"[,{}]", tree):
            piece = piece.strip()
            if not piece or piece in ("*", "self"):
                continue
            items[piece.split(" as ")[-1].split("::")[-1].strip()] = module
    return items


def module_files(root_dir: pathlib.Path, name: str, path: str, src: pathlib.Path) -> list:
    """The files of file module `name` declared in `root_dir` (none outside `src`)."""
    if path is not None:
        target = (root_dir / path).resolve()
        return [target] if src.resolve() in target.parents else []
    files = [root_dir / f"{name}.rs"]
    directory = root_dir / name
    if directory.is_dir():
        files += sorted(directory.rglob("*.rs"))
    return [file for file in files if file.is_file()]


def check_modules(package: dict, workspace: pathlib.Path, problems: list) -> None:
    """The module rule in every root of `package`, naming files as under `workspace`."""
    src = pathlib.Path(package["manifest_path"]).parent / "src"
    base = pathlib.Path(package["manifest_path"]).parent.parent
    for target in package["targets"]:
        if not ROOT_KINDS & set(target["kind"]):
            continue
        root = pathlib.Path(target["src_path"])
        if src.resolve() not in root.resolve().parents:
            continue
        root_code = code_of(root)
        modules = declared_modules(root_code)
        rank = {name: index for index, (name, _) in enumerate(modules)}
        items = reexports(root_code)
        for name, path in modules:
            for file in module_files(root.parent, name, path, src):
                for used in sorted(crate_heads(code_of(file))):
                    above = items.get(used, used)
                    if above in rank and above != name and rank[above] > rank[name]:
                        shown = workspace / file.relative_to(base)
                        problems.append(
                            f"{shown}: module {name} uses {above} (crate::{used}), declared "
                            f"after it in {root.name} of {package['name']}"
                        )


def crate_graph(meta: dict):
    """Members with their floors, path dependencies by kind, and lines of Rust in src/."""
    packages = {package["name"]: package for package in meta["packages"]}
    floors = (meta.get("metadata") or {}).get("floors") or {}
    dependencies, lines = {}, {}
    for name, package in packages.items():
        dependencies[name] = sorted(
            {
                (dependency["name"], dependency["kind"] or "normal")
                for dependency in package["dependencies"]
                if dependency.get("path") and dependency["name"] in packages
            }
        )
        lines[name] = rust_lines(pathlib.Path(package["manifest_path"]).parent / "src")
    return packages, floors, dependencies, lines


def check_crates(packages, floors, dependencies, lines, problems: list) -> None:
    for name in sorted(packages):
        if not isinstance(floors.get(name), int):
            problems.append(f"{name}: no floor in [workspace.metadata.floors] of userspace/Cargo.toml")
    for name in sorted(floors):
        if name not in packages:
            problems.append(f"{name}: has a floor but is no member of the workspace")
    for name in sorted(packages):
        if name not in floors:
            continue
        for dependency, kind in dependencies[name]:
            if dependency not in floors:
                continue
            here, there = floors[name], floors[dependency]
            upward = there > here if kind == "dev" else there >= here
            if upward:
                rule = "lower or the same" if kind == "dev" else "lower"
                problems.append(
                    f"{name} (floor {here}): {kind} dependency on {dependency} (floor {there}); "
                    f"it must be on a {rule} floor"
                )
    for name in MONITOR_CRATES:
        if name in lines and lines[name] > LINE_LIMIT:
            problems.append(f"{name}: {lines[name]:,} lines of Rust in src/, more than {LINE_LIMIT:,}")


def drawing(floors, dependencies, lines) -> str:
    """The crates by floor, top first, each with its arrows down."""
    out = []
    for floor in sorted(set(floors.values()), reverse=True):
        for name in sorted(crate for crate, at in floors.items() if at == floor):
            rounded = max(100, round(lines.get(name, 0), -2))
            out.append(f"  floor {floor:>2}  {name}  (~{rounded:,} lines)")
            targets = sorted(
                {
                    dependency
                    for dependency, kind in dependencies.get(name, [])
                    if kind != "dev" and dependency in floors
                },
                key=lambda dependency: (-floors[dependency], dependency),
            )
            for dependency in targets:
                out.append(f"              --> {dependency} ({floors[dependency]})")
    return "\n".join(out) + "\n"


def check_doc(doc: pathlib.Path, expected: str, problems: list) -> None:
    text = doc.read_text()
    if BEGIN_MARK not in text or END_MARK not in text:
        problems.append(f"{doc}: no '{BEGIN_MARK}' ... '{END_MARK}' around the crate drawing")
        return
    inside = text.split(BEGIN_MARK, 1)[1].split(END_MARK, 1)[0]
    found = inside.split("::\n\n", 1)[1] if "::\n\n" in inside else ""
    if found.rstrip("\n") + "\n" != expected:
        problems.append(
            f"{doc}: the crate drawing is not the current one; replace it with the output of "
            "python3 tests/userspace-layers.py --draw"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workspace", default="userspace", type=pathlib.Path)
    parser.add_argument("--draw", action="store_true")
    parser.add_argument("--check-doc", type=pathlib.Path)
    args = parser.parse_args()
    meta = metadata(args.workspace)
    packages, floors, dependencies, lines = crate_graph(meta)
    if args.draw:
        print(drawing(floors, dependencies, lines), end="")
        return 0
    problems = []
    check_crates(packages, floors, dependencies, lines, problems)
    for name in sorted(packages):
        check_modules(packages[name], args.workspace, problems)
    if args.check_doc:
        check_doc(args.check_doc, drawing(floors, dependencies, lines), problems)
    for problem in problems:
        print(problem)
    print(f"userspace layers: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
