#!/usr/bin/env python3
"""Runs the userspace workspace's tests as `cargo test --workspace --no-fail-fast` does, but
with its test binaries in parallel lanes.

Cargo runs test binaries one after another. A few of ours are long and mostly wait (the
Prometheus pair scrapes for a minute, serve waits on reloads), so with two lanes the rest run
beside them. Binaries start longest first, by the times of the last run (--times), so that a
long one does not start last; one without a recorded time starts first. Each binary runs as
cargo runs it: from its package's directory, with CARGO_MANIFEST_DIR and the package's name
and version in the environment, standard input closed. The doc tests are one more job. A
job's output is printed whole when it ends, under cargo's own header line, so the log reads,
and is counted, like cargo's.

Usage (from the workspace): python3 ../tests/host_tests.py [--lanes N] [--times FILE]
Exits 0 when the build and every job passed, 1 otherwise.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass
class Job:
    """One test binary, or the doc tests."""

    key: str
    header: str
    argv: list
    cwd: str
    env: dict = field(default_factory=dict)


def packages(workspace):
    """Name and version of each workspace package, by manifest path."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        cwd=workspace, check=True, capture_output=True, text=True,
    ).stdout
    return {p["manifest_path"]: (p["name"], p["version"]) for p in json.loads(out)["packages"]}


def build(workspace):
    """Builds every test binary; returns one job per binary, or None if the build failed."""
    names = packages(workspace)
    proc = subprocess.Popen(
        ["cargo", "test", "--workspace", "--no-run", "--color", "never",
         "--message-format=json-render-diagnostics"],
        cwd=workspace, stdout=subprocess.PIPE, text=True,
    )
    jobs = []
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        target = message["target"]
        package_dir = os.path.dirname(message["manifest_path"])
        name, version = names[message["manifest_path"]]
        source = os.path.relpath(target["src_path"], package_dir)
        kind = "unittests " if target["kind"][0] in ("lib", "bin", "proc-macro") else ""
        executable = message["executable"]
        jobs.append(Job(
            key=f"{name}:{'/'.join(target['kind'])}:{target['name']}",
            header=f"     Running {kind}{source} ({os.path.relpath(executable, workspace)})",
            argv=[executable],
            cwd=package_dir,
            env={"CARGO_MANIFEST_DIR": package_dir, "CARGO_PKG_NAME": name,
                 "CARGO_PKG_VERSION": version},
        ))
    if proc.wait() != 0:
        return None
    jobs.append(Job(
        key="doc-tests", header="",
        argv=["cargo", "test", "--workspace", "--doc", "--no-fail-fast", "--color", "never"],
        cwd=workspace,
    ))
    return jobs


def load_times(path):
    try:
        with open(path, encoding="utf-8") as file:
            return {k: float(v) for k, v in json.load(file).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def save_times(path, times):
    temporary = f"{path}.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(times, file, indent=1, sort_keys=True)
    os.replace(temporary, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--times", help="JSON file of each job's last time, read and rewritten")
    args = parser.parse_args()
    workspace = os.getcwd()

    jobs = build(workspace)
    if jobs is None:
        print("host_tests: the test build failed", flush=True)
        return 1
    last = load_times(args.times) if args.times else {}
    jobs.sort(key=lambda job: -last.get(job.key, math.inf))

    printing = threading.Lock()
    times = {}

    def run(job):
        start = time.monotonic()
        result = subprocess.run(
            job.argv, cwd=job.cwd, env={**os.environ, **job.env}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        )
        times[job.key] = round(time.monotonic() - start, 2)
        with printing:
            if job.header:
                print(job.header)
            print(result.stdout, end="", flush=True)
            if result.returncode != 0:
                print(f"error: {job.key} exited with status {result.returncode}", flush=True)
        return result.returncode == 0

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.lanes)) as pool:
        passed = list(pool.map(run, jobs))
    if args.times:
        save_times(args.times, times)
    longest = max(times, key=times.get)
    print(f"host_tests: {len(jobs)} jobs in {args.lanes} lanes, {time.monotonic() - start:.1f} s; "
          f"the longest {longest} {times[longest]:.1f} s", flush=True)
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
