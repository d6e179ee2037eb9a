"""Runs every causal-LM architecture of the installed transformers on neuron and on the CPU.

For each entry of transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES the sweep builds a tiny
config (tiny_config.py: the architecture's defaults with every size shrunk), builds the model
with random weights on the CPU, copies it to neuron, and runs a forward pass and an 8-token
greedy generate() on both devices. An architecture passes when the logits match
(float32 tolerance) and the generated tokens are identical, with zero CPU fallback.

Statuses: pass, mismatch (ran on neuron, results differ), fallback (matched, but some ops ran
on the CPU), error (neuron raised; the CPU ran), crash (the neuron worker process died),
no_cpu_reference (the tiny model does not build or run on the CPU either: a harness or
library limitation, not counted against the backend).

    python test/conformance/hf_arch_sweep.py                 # full sweep, writes the report
    python test/conformance/hf_arch_sweep.py --archs llama gpt2
    python test/conformance/hf_arch_sweep.py --smoke         # the CI slice
    python test/conformance/hf_arch_sweep.py --check         # full sweep vs the checked-in report

Each architecture runs in a worker process (restarted if it dies), so one crash or hang
costs one architecture, not the sweep.
"""

import argparse
import json
import pathlib
import selectors
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPORT = HERE / "hf_arch_report.json"
ARCH_TIMEOUT_S = 300

# The CI slice: widely used architectures of different families (dense, MoE, MLA, SSM, hybrid,
# encoder-style decoders).
SMOKE_ARCHS = ["llama", "gpt2", "mistral", "qwen2", "gemma2", "phi3", "mixtral", "deepseek_v3",
               "falcon", "gpt_neox", "mamba", "bert"]


def all_archs():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


class Worker:
    """A child process that runs architectures one at a time (see arch_check.py)."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, str(HERE / "arch_check.py"), "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def run(self, arch, timeout):
        self.proc.stdin.write(arch + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                self.kill()
                return {"status": "crash", "error": f"timed out after {timeout} s"}
            line = self.proc.stdout.readline()
            if not line:
                code = self.proc.wait()
                return {"status": "crash", "error": f"worker died (exit code {code})"}
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def sweep(archs, progress=True, timeout=ARCH_TIMEOUT_S):
    report, worker = {}, None
    start = time.monotonic()
    for i, arch in enumerate(archs):
        worker = worker or Worker()
        result = worker.run(arch, timeout)
        if result["status"] == "crash":
            worker = None
        report[arch] = result
        if progress:
            done = i + 1
            bar = "#" * (30 * done // len(archs))
            print(f"\r[{bar:<30}] {done}/{len(archs)} {arch:<28} {result['status']:<16} "
                  f"{time.monotonic() - start:5.0f}s", end="", file=sys.stderr, flush=True)
    if worker:
        worker.close()
    if progress:
        print(file=sys.stderr)
    return report


def summarize(report):
    counted = {a: r for a, r in report.items() if r["status"] != "no_cpu_reference"}
    passed = sum(r["status"] == "pass" for r in counted.values())
    statuses = {}
    for r in report.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {"architectures": len(report), "counted": len(counted), "passed": passed,
            "pass_rate": passed / max(len(counted), 1), "statuses": statuses}


def check_against_report(report, expected):
    """Problems: an architecture whose status differs from the checked-in report."""
    problems = []
    for arch, result in report.items():
        want = expected.get(arch, {}).get("status")
        if want is None:
            problems.append(f"{arch}: not in the checked-in report (got {result['status']})")
        elif result["status"] != want:
            problems.append(f"{arch}: expected {want}, got {result['status']}: "
                            f"{result.get('error', '')}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", nargs="*")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--report", default=str(REPORT))
    args = parser.parse_args()
    archs = args.archs or (SMOKE_ARCHS if args.smoke else all_archs())
    report = sweep(archs)
    summary = summarize(report)
    if args.check:
        problems = check_against_report(report, json.loads(REPORT.read_text())["architectures"])
        print("\n".join(problems) or "all architectures as in the report")
        sys.exit(1 if problems else 0)
    if not args.archs and not args.smoke:
        import transformers
        pathlib.Path(args.report).write_text(json.dumps(
            {"transformers": transformers.__version__, "summary": summary,
             "architectures": report}, indent=1, sort_keys=True) + "\n")
    print(f"{summary['passed']}/{summary['counted']} architectures pass on neuron "
          f"({100 * summary['pass_rate']:.1f}%); statuses {summary['statuses']}")


if __name__ == "__main__":
    main()
