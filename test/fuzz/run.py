"""Command line of the differential fuzzer.

    python test/fuzz/run.py --seed S                 replay program S (prints it; shrinks a mismatch)
    python test/fuzz/run.py --programs N --start-seed S   run N programs from seed S
    python test/fuzz/run.py --smoke                  the bounded set CI runs (fixed seeds)

(`cd test && python -m fuzz ...` is the same; `python -m test.fuzz` cannot work while Python's
own `test` package shadows this repository's `test` directory, which has no __init__.py.)
Long runs: `--isolate` runs the programs in child processes, so that a crash or a hang of the
backend is reported with its seed and the run goes on; `--out DIR` writes each reproducer.
"""

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz.generator import generate  # noqa: E402
from fuzz.program import reproducer  # noqa: E402
from fuzz.runner import run_program  # noqa: E402
from fuzz.shrink import describe_size, shrink  # noqa: E402

# The smoke: fixed seeds, a few hundred programs (CI, test/python/reliability/test_fuzz_smoke.py).
SMOKE_START = 1_000_000
SMOKE_PROGRAMS = 500


class Summary:
    def __init__(self):
        self.programs = 0
        self.steps = 0
        self.exceptions = 0
        self.mismatches = []          # (seed, Mismatch, reproducer text)
        self.explained = collections.Counter()
        self.bitdiffs = collections.Counter()
        self.fallback_ops = collections.Counter()
        self.crashes = []             # (seed, description) from --isolate
        self.errors = []              # (seed, harness exception)
        self.seconds = 0.0

    def to_json(self):
        return {"programs": self.programs, "steps": self.steps, "exceptions": self.exceptions,
                "mismatches": [{"seed": s, "signature": list(m.signature()), "text": str(m),
                                "reproducer": rep} for s, m, rep in self.mismatches],
                "explained": dict(self.explained), "bitdiffs": dict(self.bitdiffs),
                "fallback_ops": dict(self.fallback_ops), "crashes": self.crashes,
                "errors": self.errors, "seconds": self.seconds}

    def merge(self, other):
        self.programs += other.programs
        self.steps += other.steps
        self.exceptions += other.exceptions
        self.mismatches += other.mismatches
        self.explained.update(other.explained)
        self.bitdiffs.update(other.bitdiffs)
        self.fallback_ops.update(other.fallback_ops)
        self.crashes += other.crashes
        self.errors += other.errors

    def merge_json(self, d):
        self.programs += d["programs"]
        self.steps += d["steps"]
        self.exceptions += d["exceptions"]
        for m in d["mismatches"]:
            self.mismatches.append((m["seed"], _Stored(m), m["reproducer"]))
        self.explained.update(d["explained"])
        self.bitdiffs.update(d["bitdiffs"])
        self.fallback_ops.update(d["fallback_ops"])
        self.crashes += d["crashes"]
        self.errors += d["errors"]

    def report(self):
        lines = [f"{self.programs} programs, {self.steps} steps ({self.exceptions} raised on both "
                 f"devices), {self.seconds:.1f} s",
                 f"unexplained mismatches: {len(self.mismatches)}"]
        by_sig = collections.defaultdict(list)
        for seed, m, _ in self.mismatches:
            by_sig[tuple(m.signature())].append(seed)
        for sig, seeds in sorted(by_sig.items()):
            lines.append(f"  {sig}: seeds {seeds[:10]}{' ...' if len(seeds) > 10 else ''}")
        if self.crashes:
            lines.append(f"crashes/hangs: {self.crashes}")
        if self.errors:
            lines.append(f"harness errors: {self.errors[:5]}")
        if self.explained:
            lines.append("explained differences: " + ", ".join(f"{k} x{v}" for k, v in sorted(self.explained.items())))
        if self.bitdiffs:
            lines.append("within tolerance but not bit-identical: " + ", ".join(
                f"{k} x{v}" for k, v in sorted(self.bitdiffs.items())))
        if self.fallback_ops:
            lines.append("CPU fallback ops seen: " + ", ".join(sorted(self.fallback_ops)))
        return "\n".join(lines)


class _Stored:
    """A mismatch read back from a child's JSON."""

    def __init__(self, d):
        self._sig = tuple(d["signature"])
        self._text = d["text"]

    def signature(self):
        return self._sig

    def __str__(self):
        return self._text


def run_one(seed, summary, do_shrink=True, log=print, verbose=False, shrink_budget=400):
    if os.environ.get("FUZZ_TEST_CRASH_AT") == str(seed):  # tests the crash handling of --isolate
        os.abort()
    program = generate(seed)
    if verbose:
        log(f"# seed {seed}: {len(program.steps)} steps, float64 lanes: {program.uses_float64}")
        log(program.text())
    result = run_program(program)
    summary.programs += 1
    summary.steps += result.steps_run
    summary.exceptions += result.exceptions
    for m in result.explained:
        summary.explained[m.explained_by] += 1
    for hit in result.hits:
        summary.explained[hit] += 1
    for _, dtype in result.bitdiffs:
        summary.bitdiffs[dtype] += 1
    summary.fallback_ops.update(result.fallback_ops)
    if result.mismatch is None:
        if verbose:
            log(f"# seed {seed}: ok ({result.steps_run} steps, {len(result.explained)} explained differences)")
        return None
    m = result.mismatch
    log(f"# seed {seed}: {str(m).splitlines()[0]}")
    small, small_m = program, m
    if do_shrink:
        small, small_m = shrink(program, m, budget=shrink_budget)
        log(f"# shrunk from {describe_size(program)} to {describe_size(small)}")
    mode = {"neuron/exact": "exact", "neuron/narrow": "narrow"}.get(small_m.lane)
    text = reproducer(small, small_m, mode)
    if verbose:
        log(text)
    else:
        log("\n".join("#   " + line for line in [str(small_m).splitlines()[0]] + small.source_lines()))
    summary.mismatches.append((seed, small_m, text))
    return small_m


def run_many(seeds, do_shrink=True, log=print, out_dir=None, progress=None, shrink_budget=400):
    summary = Summary()
    start = time.time()
    for seed in seeds:
        if progress:
            progress(f"@@begin {seed}")
        one = Summary()
        try:
            run_one(seed, one, do_shrink, log, shrink_budget=shrink_budget)
        except Exception as e:  # noqa: BLE001  (a harness bug: report it, go on)
            one.errors.append((seed, f"{type(e).__name__}: {e}"))
            log(f"# seed {seed}: harness error {type(e).__name__}: {e}")
        if one.mismatches and out_dir:
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, f"seed_{seed}.py"), "w") as f:
                f.write(one.mismatches[-1][2])
        summary.merge(one)
        if progress:
            progress("@@result " + json.dumps(one.to_json()))
    summary.seconds = time.time() - start
    return summary


def run_isolated(start, count, args, log=print, chunk=500, timeout=300):
    """Runs seeds [start, start+count) in child processes; a child that dies or stops making
    progress is reported with the seed it was running, and the run resumes after it."""
    summary = Summary()
    t0 = time.time()
    seed, end = start, start + count
    while seed < end:
        n = min(chunk, end - seed)
        cmd = [sys.executable, os.path.abspath(__file__), "--programs", str(n), "--start-seed", str(seed),
               "--child"]
        if args.no_shrink:
            cmd.append("--no-shrink")
        if args.out:
            cmd += ["--out", args.out]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        current, last = None, time.time()
        child_summary = None
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 10)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                last = time.time()
                if line.startswith("@@begin "):
                    current = int(line.split()[1])
                elif line.startswith("@@result "):
                    summary.merge_json(json.loads(line[len("@@result "):]))
                    current = None
                elif line.startswith("@@summary "):
                    child_summary = True
                else:
                    log(line.rstrip("\n"))
            elif time.time() - last > timeout:
                proc.kill()
                log(f"# seed {current}: no progress for {timeout} s, killed")
                summary.crashes.append((current, "hang"))
                break
        rc = proc.wait()
        if child_summary is not None:
            seed += n
        else:
            if current is None:
                current = seed
            if not summary.crashes or summary.crashes[-1][0] != current:
                summary.crashes.append((current, f"child exited with {rc}"))
                log(f"# seed {current}: child process died ({rc})")
            seed = current + 1
    summary.seconds = time.time() - t0
    return summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, help="replay one program, printing it")
    p.add_argument("--programs", type=int, help="number of programs")
    p.add_argument("--start-seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help=f"{SMOKE_PROGRAMS} programs from seed {SMOKE_START}")
    p.add_argument("--seed-list", help="file of seeds (one a line) to run, e.g. earlier mismatches")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--isolate", action="store_true", help="run in child processes (crash/hang safe)")
    p.add_argument("--out", help="directory for reproducers")
    p.add_argument("--json", help="write the summary as JSON here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.seed is not None:
        summary = Summary()
        t = time.time()
        run_one(args.seed, summary, not args.no_shrink, verbose=True)
        summary.seconds = time.time() - t
        print(summary.report())
        return 1 if summary.mismatches else 0
    if args.smoke:
        seeds, count, start = range(SMOKE_START, SMOKE_START + SMOKE_PROGRAMS), SMOKE_PROGRAMS, SMOKE_START
    elif args.seed_list:
        seeds = [int(x) for x in open(args.seed_list).read().split()]
        count, start = len(seeds), None
    elif args.programs:
        seeds, count, start = range(args.start_seed, args.start_seed + args.programs), args.programs, args.start_seed
    else:
        p.error("give --seed, --programs or --smoke")
    if args.child:
        summary = run_many(seeds, not args.no_shrink, out_dir=args.out,
                           progress=lambda s: print(s, flush=True),
                           log=lambda s: print(s, flush=True))
        print("@@summary done", flush=True)
        return 0
    if args.isolate and start is not None:
        summary = run_isolated(start, count, args)
    else:
        summary = run_many(seeds, not args.no_shrink, out_dir=args.out)
    print(summary.report())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary.to_json(), f, indent=1)
    return 1 if summary.mismatches or summary.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
