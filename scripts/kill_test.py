#!/usr/bin/env python
"""The kill test (issue 45): a run killed with SIGKILL N times and resumed each time ends with the same reports as an
uninterrupted run.

1. The reference: the selection run once, uninterrupted, on a fresh cache; every test's start is timed from pytest's
   ``-v`` lines as they are printed, so the run's timeline is known (which test, which pass, when).
2. N kill moments spread uniformly over that wall time (stratified: one uniform draw in each of N equal slices, from
   ``--seed``). Each moment falls inside one test of the reference timeline, at a fraction of it. The kill run then
   starts on its own fresh cache; for moment i it is (re)started, waits until that test is running (a pass that the
   cache already holds is loaded, not recomputed: the test is then short), waits the same fraction of the test's
   reference time, and kills the whole process group with SIGKILL. Each kill is logged with the test it interrupted
   (``test_attention_core[...]`` is a pass being computed: "inside a pass").
3. The run is resumed once more, to the end, and its report folder is compared with the reference's, file by file,
   byte for byte after taking out what is timing (run.json's ``date``, the seconds and rates of the passes, the
   pytest-benchmark timing lines); every difference is printed. Exit 0 when they are identical, 1 when not.

    PYTHONPATH=$PWD BERTATTN_DATA_DIR=../shared/data HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \\
        .venv/bin/python scripts/kill_test.py --n 20 --work /tmp/kill-test \\
        -k "(dependency or coref or surface or arct_ft) and minilm"

The selection is a quick-tier one (the default tier) of at least three families and a fine-tune (``arct_ft``: BERT
fine-tuned on ARCT, the quick tier's 400 examples, one epoch; ``finetune``'s MRPC takes longer);
``--limit`` makes it shorter for a first try (``--n 3 --limit 40``).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE = re.compile(r"(benchmarks/\S+?\.py::\S+)")
DEFAULT_SELECT = "(dependency or coref or surface or arct_ft) and minilm"


class Run:
    """One pytest process over the selection: its -v lines read as printed, each test's start time kept."""

    def __init__(self, args, cache: Path, report: Path, log: Path):
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_claims.py"), "-v", "-p", "no:randomly",
               "-p", "no:cacheprovider", "-k", args.select, f"--claims-report={report}", "--benchmark-disable"]
        if args.limit:
            cmd.append(f"--limit={args.limit}")
        env = {**os.environ, "BERTATTN_CACHE_DIR": str(cache), "CI": "1", "PYTHONUNBUFFERED": "1"}
        self.t0 = time.monotonic()
        self.starts: list[tuple[float, str]] = []  # (seconds since launch, node id) in the order tests started
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        buf = ""
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            self.log.write(chunk)
            self.log.flush()
            buf += chunk.decode("utf-8", "replace")
            for m in NODE.finditer(buf):
                node = m.group(1)
                if not self.starts or self.starts[-1][1] != node:
                    self.starts.append((time.monotonic() - self.t0, node))
            buf = buf[-400:] if "\n" not in buf else buf[buf.rfind("\n") + 1:]

    def current(self) -> str:
        return self.starts[-1][1] if self.starts else "(start-up: collection, model load)"

    def wait(self) -> int:
        rc = self.proc.wait()
        self.reader.join(timeout=10)
        self.log.close()
        return rc

    def kill(self) -> str:
        what = self.current()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait()
        return what


def timeline(starts: list[tuple[float, str]], end: float) -> list[tuple[str, float, float]]:
    """(node, start, duration) of each test of a finished run; the time before the first test is the start-up."""
    out = [("(start-up: collection, model load)", 0.0, starts[0][0] if starts else end)]
    for i, (t, node) in enumerate(starts):
        out.append((node, t, (starts[i + 1][0] if i + 1 < len(starts) else end) - t))
    return out


def at(tl: list[tuple[str, float, float]], moment: float) -> tuple[str, float]:
    """The test running at ``moment`` of the timeline and how far into it (0..1)."""
    for node, start, dur in tl:
        if start <= moment < start + dur:
            return node, (moment - start) / dur if dur else 0.0
    node, start, dur = tl[-1]
    return node, 1.0


def inside_pass(node: str) -> bool:
    return "test_attention_core[" in node


TIMING = re.compile(r"\d+ examples in [\d.]+s = [\d.]+/s|[\d.]+ (?:s|seconds)\b|\"date\": \"[^\"]*\"")


def normalised(path: Path) -> bytes:
    """A report file with its timings taken out (a JSON document: the keys that hold times; text: the timing
    phrases); every other byte as written."""
    data = path.read_bytes()
    if path.suffix == ".json":
        doc = json.loads(data)

        def drop(v):
            if isinstance(v, dict):
                return {k: drop(x) for k, x in v.items() if k not in ("date", "seconds", "examples_per_second")}
            if isinstance(v, list):
                return [drop(x) for x in v]
            return v

        return json.dumps(drop(doc), sort_keys=True, indent=1).encode()
    if path.suffix in (".md", ".csv", ".html", ".txt"):
        return TIMING.sub("<time>", data.decode("utf-8")).encode()
    return data


def compare(ref: Path, other: Path) -> list[str]:
    a = {p.relative_to(ref).as_posix() for p in ref.rglob("*") if p.is_file()}
    b = {p.relative_to(other).as_posix() for p in other.rglob("*") if p.is_file()}
    diffs = [f"only in the reference: {n}" for n in sorted(a - b)] + [f"only after the kills: {n}" for n in sorted(b - a)]
    for name in sorted(a & b):
        if normalised(ref / name) != normalised(other / name):
            diffs.append(f"differs: {name}")
    return diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20, help="how many SIGKILLs (default 20)")
    ap.add_argument("-k", dest="select", default=DEFAULT_SELECT, help=f"the selection (default: {DEFAULT_SELECT!r})")
    ap.add_argument("--limit", type=int, default=None, help="--limit of the runs (a shorter first try)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--work", type=Path, required=True, help="a folder for the caches, reports and logs (emptied)")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("--n must be at least 1")
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    log = args.work / "kill_test.log"

    def say(line: str) -> None:
        print(line, flush=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    say(f"kill test: -k {args.select!r}" + (f" --limit {args.limit}" if args.limit else "") + f", N={args.n}, "
        f"seed {args.seed}")
    # every run writes its report to the same folder (the command, which run.json records, is then the same); the
    # reference's is moved aside before the kills
    report = args.work / "report"
    ref = Run(args, args.work / "cache-ref", report, args.work / "ref.out")
    rc = ref.wait()
    if report.is_dir():
        report.rename(args.work / "report-ref")
    total = time.monotonic() - ref.t0
    tl = timeline(ref.starts, total)
    passes = sum(1 for n, _, _ in tl if inside_pass(n))
    say(f"reference: exit {rc}, {total:.1f} s, {len(tl) - 1} tests ({passes} passes computed)")
    if rc not in (0, 1):
        say("the reference run did not finish (see ref.out): no kill test")
        return 2
    rng = random.Random(args.seed)
    moments = [total * (i + rng.random()) / args.n for i in range(args.n)]
    cache = args.work / "cache-kill"
    kills = inside = 0
    for i, moment in enumerate(moments, 1):
        node, frac = at(tl, moment)
        dur = next(d for n, _, d in tl if n == node)
        run = Run(args, cache, report, args.work / f"kill{i:02d}.out")
        deadline = time.monotonic() + total * 3
        while run.proc.poll() is None and time.monotonic() < deadline:  # wait until that test runs
            if node.startswith("(start-up") or any(n == node for _, n in run.starts):
                break
            time.sleep(0.05)
        if run.proc.poll() is not None:
            say(f"kill {i:2d}/{args.n}: at {moment:7.1f} s of the reference ({node}): the resumed run finished "
                f"first (exit {run.wait()}): nothing to kill")
            continue
        started = next((t for t, n in run.starts if n == node), 0.0) if not node.startswith("(start-up") else 0.0
        target = started + frac * dur
        seen = len(run.starts)
        # the same fraction of that test's reference time; a test that is faster now (its pass loaded from the
        # cache the earlier kills left) is killed when the next one starts, so every moment still kills the run
        while run.proc.poll() is None and time.monotonic() - run.t0 < target:
            if not node.startswith("(start-up") and len(run.starts) > seen and run.starts[-1][1] != node:
                break
            time.sleep(0.02)
        if run.proc.poll() is not None:
            say(f"kill {i:2d}/{args.n}: the resumed run finished before {target:.1f} s (exit {run.wait()})")
            continue
        what = run.kill()
        kills += 1
        inside += inside_pass(what)
        say(f"kill {i:2d}/{args.n}: SIGKILL at {time.monotonic() - run.t0:6.1f} s of the resumed run (reference "
            f"moment {moment:7.1f} s): interrupted {what}" + (" [inside a pass]" if inside_pass(what) else ""))
    final = Run(args, cache, report, args.work / "final.out")
    rc_final = final.wait()
    say(f"resumed to the end: exit {rc_final} (the reference: {rc}); {kills} SIGKILLs, {inside} inside a pass")
    diffs = compare(args.work / "report-ref", report)
    stray = sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*tmp*"))
    if stray:
        say(f"temporary files a SIGKILL left in the cache: {len(stray)} ({', '.join(stray[:5])})")
    if diffs or rc_final != rc:
        say("DIFFERENT from the uninterrupted run:\n  " + "\n  ".join(diffs or [f"exit {rc_final} vs {rc}"]))
        return 1
    files = sum(1 for p in report.rglob("*") if p.is_file())
    say(f"IDENTICAL: the {files} report files equal the uninterrupted run's (timings aside)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
