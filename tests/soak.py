#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""`make soak`: a day of a busy host, compressed, against one `nds-monitor serve`.

The monitor reads slab files (--slab-dir) every SOAK_PERIOD (default 100ms) while
`nds-loadgen run`s start and end all the time (a few at once, tags shared between them and
across devices); each ended run's slabs are removed as the kernel releases them, and every
fourth run's first slab is first replaced by a new file under the same name (a slab reused by
a new tenure). Scraping comes in cycles of SOAK_CYCLE seconds: no scraper for the first two
thirds, then SOAK_SCRAPERS concurrent scrapers. Every second the monitor's VmRSS, open file
count and CPU time are sampled from /proc.

The monitor serves its event stream as the chart runs it (a --state-dir, the default ring),
followed by one client asking /api/v1/events once a second; a twin monitor on the same slabs,
scraped alike, serves none (--events-capacity 0). Their CPU ratio is the stream's cost; it is
printed, never judged. The follower's events must be numbered without a hole, a gap declared.

It fails unless, after the warm-up (the first cycle), the resident set and the open file
count stay within the bounds printed with the figures, every scrape is answered, and every
counter (each `_total`, histogram `_bucket`/`_count`/`_sum`) is monotonic across all scrapes
of all scrapers, ordered by the report number each exposition carries
(`nds_monitor_reports_total`), with each `_created` constant. It prints the figures that
Documentation/performance.rst quotes, CPU per period as a ratio to the period included.

Environment: SOAK_DURATION (seconds, default 600), SOAK_PERIOD (a monitor --period, default
100ms), SOAK_CYCLE (seconds, default 60), SOAK_SCRAPERS (default 16), NDS_TOOLS_BIN_DIR (the
binaries; default userspace/target/release).
"""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("NDS_TOOLS_BIN_DIR", os.path.join(ROOT, "userspace/target/release"))
DURATION = float(os.environ.get("SOAK_DURATION", "600"))
PERIOD = os.environ.get("SOAK_PERIOD", "100ms")
CYCLE = float(os.environ.get("SOAK_CYCLE", "60"))
SCRAPERS = int(os.environ.get("SOAK_SCRAPERS", "16"))
# Two cycles: the per-process series of ended processes fill the monitor's bounded store of
# idle series (8192) within about a minute at this churn, and two busy phases pass.
WARM_UP = 2 * CYCLE
# Bounds after the warm-up: the resident set stays within RSS_BOUND_KIB above the warm-up's
# maximum, its maximum in the last third of the rest is within RSS_TREND_KIB of the first
# third's (no growth), and the open files stay within FD_BOUND above the warm-up's maximum.
RSS_BOUND_KIB = 4096
RSS_TREND_KIB = 1024
FD_BOUND = 4
CONCURRENT_RUNS = 3
TICKS = os.sysconf("SC_CLK_TCK")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def period_seconds(text):
    units = {"ms": 1e-3, "s": 1.0, "m": 60.0}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", text)
    if not match:
        sys.exit(f"soak: SOAK_PERIOD {text!r} is not like 100ms, 1s or 1m")
    return float(match.group(1)) * units[match.group(2)]


class Monitor:
    """`nds-monitor serve` on the scratch directory, with `serve_args` after the listener."""

    def __init__(self, scratch, serve_args):
        for part in ("sys", "driver", "module"):
            os.makedirs(os.path.join(scratch, part), exist_ok=True)
        self.process = subprocess.Popen(
            [os.path.join(BIN, "nds-monitor"),
             "--slab-dir", os.path.join(scratch, "slabs"),
             "--sysfs-root", os.path.join(scratch, "sys"),
             "--hardware-sysfs-root", os.path.join(scratch, "driver"),
             "--module-dir", os.path.join(scratch, "module"),
             "--period", PERIOD, "--instance-metadata", "off",
             "serve", "--listen", "127.0.0.1:0", *serve_args],
            stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().strip()
        match = re.fullmatch(r"listening on (http://[^/]+)/metrics", line)
        if not match:
            self.process.kill()
            sys.exit(f"soak: no listening line from nds-monitor: {line!r}")
        self.url = match.group(1)
        self.pid = self.process.pid

    def resources(self):
        """(VmRSS in KiB, open files, utime + stime in seconds)."""
        with open(f"/proc/{self.pid}/status") as status:
            rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        with open(f"/proc/{self.pid}/stat") as stat:
            # Fields after the command (which may hold spaces) start at the state, field 3.
            fields = stat.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS
        return rss, fds, cpu


class Counters:
    """Every counter sample seen, checked against all scrapes by report number."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = {}  # series -> (report, value)
        self.created = {}  # _created series -> value
        self.violations = []
        self.scrapes = 0
        self.failed = []

    def check(self, body):
        counters, histograms = set(), set()
        samples, report = [], None
        for line in body.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ", 3)
                (counters if kind == "counter" else histograms if kind == "histogram"
                 else set()).add(name)
                continue
            match = SAMPLE.match(line)
            if not match:
                continue
            name, labels, value = match.group(1), match.group(2) or "", match.group(3)
            if name == "nds_monitor_reports_total":
                report = float(value)
            samples.append((name, labels, float(value)))
        if report is None:
            self.failed.append("an exposition without nds_monitor_reports_total")
            return
        with self.lock:
            self.scrapes += 1
            for name, labels, value in samples:
                series = name + labels
                if name.endswith("_created"):
                    earlier = self.created.setdefault(series, value)
                    if earlier != value:
                        self.violations.append((series, f"changed from {earlier} to {value}"))
                        self.created[series] = value
                    continue
                family = re.sub(r"_(bucket|count|sum)$", "", name)
                if name not in counters and family not in histograms:
                    continue
                earlier = self.seen.get(series)
                if earlier is None or earlier[0] < report:
                    if earlier is not None and value < earlier[1]:
                        self.violations.append(
                            (series, f"{earlier[1]} at report {earlier[0]}, then {value}"
                                     f" at report {report}"))
                    self.seen[series] = (report, value)
                elif earlier[0] == report and earlier[1] != value:
                    self.violations.append((series, f"two values in report {report}"))
                elif earlier[0] > report and value > earlier[1]:
                    self.violations.append((series, f"report {report} above a later one"))


def scraper(targets, stop):
    """Scrapes each (url, counters) of `targets` in turn, so that every monitor is scraped
    alike."""
    while not stop.is_set():
        for url, counters in targets:
            try:
                with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
                    body = response.read().decode()
                counters.check(body)
            except Exception as error:  # every failure counts, whatever its kind
                with counters.lock:
                    counters.failed.append(repr(error))
        time.sleep(0.05)


class Follower:
    """A client of /api/v1/events that asks for what follows the last number it saw, once a
    second, as a log shipper would."""

    def __init__(self, url):
        self.url = url
        self.stream = None
        self.last = 0
        self.events = 0
        self.gaps = 0
        self.lost = 0
        self.problems = []

    def poll(self):
        query = f"since={self.last}" + (f"&stream={self.stream}" if self.stream else "")
        with urllib.request.urlopen(f"{self.url}/api/v1/events?{query}", timeout=10) as answer:
            lines = answer.read().decode().splitlines()
        for line in lines:
            record = json.loads(line)
            if record["kind"] == "gap" and record["first"] == self.last + 1:
                # Declared: the ring moved on faster than this client asked.
                self.gaps += 1
                self.lost += record["lost"]
                self.last = record["last"]
            elif "seq" not in record:
                self.problems.append(f"after {self.last}: {line}")
            elif record["seq"] != self.last + 1 or record["stream"] != (self.stream or
                                                                        record["stream"]):
                self.problems.append(f"after {self.last} of {self.stream}: {line}")
                return
            else:
                self.stream = record["stream"]
                self.last = record["seq"]
                self.events += 1

    def run(self, stop):
        while not stop.wait(1.0):
            try:
                self.poll()
            except Exception as error:  # every failure counts, whatever its kind
                self.problems.append(repr(error))


class Producers:
    """`nds-loadgen run`s, CONCURRENT_RUNS at a time, and their slabs' release and reuse."""

    def __init__(self, scratch):
        self.scratch = scratch
        self.slabs = os.path.join(scratch, "slabs")
        self.runs = []
        self.number = 0
        self.started = self.ended = self.reused = self.failed_runs = 0
        self.releases = []  # (when, paths, replacement)
        self.pids = {}  # pid -> producers that had it
        self.random = random.Random(27)

    def start(self):
        self.number += 1
        summary = os.path.join(self.scratch, f"run-{self.number}.json")
        procs = self.random.randint(1, 3)
        process = subprocess.Popen(
            [os.path.join(BIN, "nds-loadgen"), "run", "--slab-dir", self.slabs,
             "--devices", "0,1", "--cores", "2", "--procs-per-device", str(procs),
             "--duration", f"{self.random.uniform(2, 12):.1f}s", "--rate", "200",
             "--time-in-use-unit-ps", "1",
             "--tag-prefix", f"soak-{self.number % 3}", "--seed", str(self.number),
             "--summary", summary],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.runs.append((process, summary, self.number))

    def step(self, now):
        for run in list(self.runs):
            process, summary, number = run
            if process.poll() is None:
                continue
            self.runs.remove(run)
            try:
                with open(summary) as file:
                    producers = json.load(file)["producers"]
                os.remove(summary)
            except (OSError, ValueError, KeyError):
                self.failed_runs += 1
                continue
            if process.returncode != 0:
                self.failed_runs += 1
            paths = [os.path.join(self.slabs, f"neuron{p['device']}-{p['pid']}.slab")
                     for p in producers]
            self.started += len(producers)
            for producer in producers:
                self.pids[producer["pid"]] = self.pids.get(producer["pid"], 0) + 1
            hold = 0.5
            if number % 4 == 0 and len(paths) > 1:
                # A new tenure under the first slab's name: another file, another inode,
                # living a while before all of the run's slabs go.
                fresh = paths[0] + ".new"
                shutil.copyfile(paths[1], fresh)
                self.releases.append((now + 0.5, [paths[0]], fresh))
                self.reused += 1
                hold = 2.0
            # Released a moment after the end: the monitor reads their last values first.
            self.releases.append((now + hold, paths, None))
        for release in [r for r in self.releases if r[0] <= now]:
            self.releases.remove(release)
            _, paths, replacement = release
            if replacement:
                os.replace(replacement, paths[0])
                continue
            for path in paths:
                try:
                    os.remove(path)
                    self.ended += 1
                except FileNotFoundError:
                    pass
        while len(self.runs) < CONCURRENT_RUNS:
            self.start()

    def stop(self):
        for process, _, _ in self.runs:
            process.send_signal(signal.SIGTERM)
        for process, _, _ in self.runs:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def excusable(violation, recycled):
    """Whether `violation` is of a pid the system gave to a second producer."""
    match = re.search(r'pid="(\d+)"', violation[0])
    return bool(match) and int(match.group(1)) in recycled


def main():
    period = period_seconds(PERIOD)
    for binary in ("nds-monitor", "nds-loadgen"):
        if not os.access(os.path.join(BIN, binary), os.X_OK):
            sys.exit(f"soak: {BIN}/{binary} missing (make soak builds it)")
    scratch = tempfile.mkdtemp(prefix="nds-soak-")
    os.makedirs(os.path.join(scratch, "slabs"))
    monitor = Monitor(scratch, ["--state-dir", os.path.join(scratch, "state")])
    quiet = Monitor(scratch, ["--events-capacity", "0"])
    producers = Producers(scratch)
    counters, quiet_counters = Counters(), Counters()
    targets = [(monitor.url, counters), (quiet.url, quiet_counters)]
    follower = Follower(monitor.url)
    stop_follower = threading.Event()
    following = threading.Thread(target=follower.run, args=(stop_follower,))
    following.start()
    # (seconds since start, rss KiB, fds, cpu s, busy, slab files, the twin's cpu s)
    samples = []
    started = time.monotonic()
    stop_scrapers, threads, busy = threading.Event(), [], False
    cycles_busy = 0
    next_sample = 0.0
    print(f"soak: {DURATION:.0f} s, period {PERIOD}, cycles of {CYCLE:.0f} s "
          f"({SCRAPERS} scrapers for the last third), monitor pid {monitor.pid}, its twin "
          f"without the event stream {quiet.pid}", flush=True)
    try:
        while (elapsed := time.monotonic() - started) < DURATION:
            producers.step(elapsed)
            want_busy = elapsed % CYCLE >= CYCLE * 2 / 3
            if want_busy and not busy:
                stop_scrapers = threading.Event()
                threads = [threading.Thread(target=scraper, args=(targets, stop_scrapers))
                           for _ in range(SCRAPERS)]
                for thread in threads:
                    thread.start()
                cycles_busy += 1
            elif busy and not want_busy:
                stop_scrapers.set()
                for thread in threads:
                    thread.join()
            busy = want_busy
            if elapsed >= next_sample:
                for one in (monitor, quiet):
                    if one.process.poll() is not None:
                        sys.exit(f"soak: nds-monitor {one.pid} exited with "
                                 f"{one.process.returncode}")
                rss, fds, cpu = monitor.resources()
                quiet_cpu = quiet.resources()[2]
                samples.append((elapsed, rss, fds, cpu, busy, len(os.listdir(producers.slabs)),
                                quiet_cpu))
                next_sample += 1.0
            time.sleep(0.05)
    finally:
        stop_scrapers.set()
        stop_follower.set()
        for thread in threads + [following]:
            thread.join()
        producers.stop()
    # One last scrape of each: everything since the last busy phase is checked too.
    healthy, exit_statuses = True, []
    for one, its_counters in [(monitor, counters), (quiet, quiet_counters)]:
        with urllib.request.urlopen(one.url + "/metrics", timeout=10) as response:
            its_counters.check(response.read().decode())
        with urllib.request.urlopen(one.url + "/healthz", timeout=10) as response:
            healthy = healthy and response.status == 200
    follower.poll()
    for one in (monitor, quiet):
        one.process.send_signal(signal.SIGTERM)
        exit_statuses.append(one.process.wait(timeout=20))
    exit_status = max(exit_statuses)
    shutil.rmtree(scratch, ignore_errors=True)

    # A pid the system gave to a second producer: its per-process series may restart once
    # the monitor forgot the first one's (Documentation/userspace.rst, bounded idle series).
    recycled = {pid for pid, count in producers.pids.items() if count > 1}
    excused = [v for v in counters.violations + quiet_counters.violations
               if excusable(v, recycled)]
    violations = [v for v in counters.violations + quiet_counters.violations
                  if not excusable(v, recycled)]
    warm = [s for s in samples if s[0] < WARM_UP]
    after = [s for s in samples if s[0] >= WARM_UP]
    if not warm or len(after) < 2:
        sys.exit(f"soak: SOAK_DURATION {DURATION:.0f} s leaves nothing after the "
                 f"{WARM_UP:.0f} s warm-up")
    wall = after[-1][0] - after[0][0]
    cpu = after[-1][3] - after[0][3]
    quiet_cpu = after[-1][6] - after[0][6]
    phase_cpu = {False: 0.0, True: 0.0}
    phase_wall = {False: 0.0, True: 0.0}
    for one, two in zip(after, after[1:]):
        if one[4] == two[4]:
            phase_cpu[one[4]] += two[3] - one[3]
            phase_wall[one[4]] += two[0] - one[0]
    ratio = lambda c, w: c / w if w else 0.0
    rss_warm_max = max(s[1] for s in warm)
    rss_after_max = max(s[1] for s in after)
    fd_warm_max = max(s[2] for s in warm)
    fd_after = [s[2] for s in after]
    quiet_fds = [s[2] for s in after if not s[4]]
    figures = {
        "duration_s": round(samples[-1][0]),
        "period": PERIOD,
        "runs": producers.number,
        "producers_started": producers.started,
        "slabs_released": producers.ended,
        "slabs_reused": producers.reused,
        "slab_files_max": max(s[5] for s in samples),
        "busy_phases": cycles_busy,
        "scrapes": counters.scrapes,
        "scrape_failures": len(counters.failed),
        "counter_series_checked": len(counters.seen),
        "monotonic_violations": len(violations),
        "pids_recycled": len(recycled),
        "restarts_of_recycled_pids": len(excused),
        "rss_kib_start": samples[0][1],
        "rss_kib_warm_up_max": rss_warm_max,
        "rss_kib_after_warm_up_min": min(s[1] for s in after),
        "rss_kib_after_warm_up_max": rss_after_max,
        "rss_kib_end": samples[-1][1],
        "fds_warm_up_max": fd_warm_max,
        "fds_after_warm_up_min_max": [min(fd_after), max(fd_after)],
        "fds_quiet_min_max": [min(quiet_fds), max(quiet_fds)] if quiet_fds else None,
        "fds_end": samples[-1][2],
        "cpu_s_after_warm_up": round(cpu, 2),
        "cpu_ratio": round(ratio(cpu, wall), 4),
        "cpu_ms_per_period": round(1000 * ratio(cpu, wall) * period, 3),
        "cpu_ratio_no_scraper": round(ratio(phase_cpu[False], phase_wall[False]), 4),
        "cpu_ratio_scrapers": round(ratio(phase_cpu[True], phase_wall[True]), 4),
        "cpu_ratio_stream_off": round(ratio(quiet_cpu, wall), 4),
        "cpu_stream_on_over_off": round(ratio(cpu, quiet_cpu), 3),
        "events_followed": follower.events,
        "event_gaps_declared": follower.gaps,
        "events_lost_in_gaps": follower.lost,
        "healthz_at_end": healthy,
        "exit_status_on_sigterm": exit_status,
    }
    print(json.dumps(figures, indent=2))
    problems = []
    if rss_after_max > rss_warm_max + RSS_BOUND_KIB:
        problems.append(f"RSS {rss_after_max} KiB after the warm-up, above its maximum "
                        f"{rss_warm_max} KiB + {RSS_BOUND_KIB} KiB")
    if max(fd_after) > fd_warm_max + FD_BOUND:
        problems.append(f"{max(fd_after)} open files after the warm-up, above its maximum "
                        f"{fd_warm_max} + {FD_BOUND}")
    failed = counters.failed + quiet_counters.failed
    if failed:
        problems.append(f"{len(failed)} scrapes failed, e.g. {failed[:3]}")
    if follower.problems:
        problems.append(f"the event stream's follower: {follower.problems[:3]}")
    if violations:
        broken = sorted({series for series, _ in violations})
        families = sorted({series.split("{")[0] for series in broken})
        problems.append(f"{len(violations)} counter violations in {len(broken)} series of "
                        f"families {families}, e.g. {violations[:3]}")
    thirds = len(after) // 3
    rss_first = max(s[1] for s in after[:thirds or 1])
    rss_last = max(s[1] for s in after[-(thirds or 1):])
    if rss_last > rss_first + RSS_TREND_KIB:
        problems.append(f"RSS grew: {rss_first} KiB at most in the first third after the "
                        f"warm-up, {rss_last} KiB in the last")
    if producers.failed_runs:
        problems.append(f"{producers.failed_runs} load-generator runs failed")
    if counters.scrapes == 0 or quiet_counters.scrapes == 0 or producers.started == 0:
        problems.append("nothing was scraped or produced")
    if follower.events == 0:
        problems.append("the event stream's follower saw no event")
    if not healthy or exit_status != 0:
        problems.append(f"/healthz {healthy}, exit statuses {exit_statuses} on SIGTERM")
    print(f"soak: bounds after the {WARM_UP:.0f} s warm-up: RSS at most its maximum + "
          f"{RSS_BOUND_KIB} KiB and at most + {RSS_TREND_KIB} KiB from the first third of "
          f"the rest to the last, open files at most its maximum + {FD_BOUND}")
    for minute in range(0, int(samples[-1][0]) // 60):
        part = [s for s in samples if minute * 60 <= s[0] < (minute + 1) * 60]
        if len(part) > 1:
            used = (part[-1][3] - part[0][3]) / (part[-1][0] - part[0][0])
            print(f"soak: minute {minute + 1}: RSS {min(s[1] for s in part)}.."
                  f"{max(s[1] for s in part)} KiB, fds {min(s[2] for s in part)}.."
                  f"{max(s[2] for s in part)}, CPU ratio {used:.4f}")
    for problem in problems:
        print(f"soak: FAIL: {problem}")
    print("soak: PASS" if not problems else "soak: FAIL")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
