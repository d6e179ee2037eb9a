"""python -m torch_neuron fidelity [--json] [--sources] [--kind op|end-to-end|collective|scale]
                                 [--eager] [--anchor NAME ...] [--all] [--markdown FILE] [--list]

Exit status: 0 when every goal is met, 1 when one is not (or a workload failed), 2 for bad
usage."""

import argparse
import fnmatch
import json
import re
import sys
from typing import Optional

from torch_neuron.fidelity import report, runner
from torch_neuron.fidelity.anchor import KINDS
from torch_neuron.fidelity.anchors import ANCHORS

DOC_BEGIN = "<!-- fidelity-table: python -m torch_neuron fidelity --markdown docs/fidelity.md -->"
DOC_END = "<!-- /fidelity-table -->"


def select(kind: Optional[str], names: Optional[list[str]], everything: bool = False):
    """The anchors asked for; without --kind, --anchor or --all, not the on-request ones
    (Note [On-request anchors])."""
    chosen = [a for a in ANCHORS if (kind is None or a.kind == kind)
              and (everything or kind or names or not a.on_request)]
    if names:
        # A name is a shell-style pattern too ("llama-2-*-trn1-*"); each must match an anchor.
        unknown = [n for n in names if not any(fnmatch.fnmatchcase(a.name, n) for a in ANCHORS)]
        if unknown:
            print(f"python -m torch_neuron fidelity: unknown anchor {unknown[0]!r} (--list "
                  "prints the names)", file=sys.stderr)
            raise SystemExit(2)
        chosen = [a for a in chosen if any(fnmatch.fnmatchcase(a.name, n) for n in names)]
    return chosen


def write_markdown(path: str, text: str) -> None:
    """Replaces the table between the markers of `path` (docs/fidelity.md)."""
    with open(path) as f:
        doc = f.read()
    pattern = re.compile(re.escape(DOC_BEGIN) + ".*?" + re.escape(DOC_END), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"python -m torch_neuron fidelity: {path} has no table markers "
                         f"({DOC_BEGIN} ... {DOC_END})")
    with open(path, "w") as f:
        f.write(pattern.sub(lambda _: f"{DOC_BEGIN}\n{text}\n{DOC_END}", doc))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torch_neuron fidelity",
        description="Published Trainium measurements beside the simulator's predictions; exits "
                    "1 when a goal is not met.")
    parser.add_argument("--sources", action="store_true",
                        help="also print where each measurement was published")
    parser.add_argument("--json", action="store_true",
                        help="also print one JSON document (predictions and summary) last")
    parser.add_argument("--kind", choices=KINDS, help="only the anchors of this kind (with "
                        "scale: also the virtual Llama jobs that run only on request)")
    parser.add_argument("--anchor", action="append", metavar="NAME",
                        help="only this anchor (repeatable; a shell-style pattern such as "
                        "'llama-2-*' names every anchor it matches)")
    parser.add_argument("--all", action="store_true",
                        help="also the anchors that run only on request (the virtual Llama "
                        "jobs of --kind scale; minutes each); --markdown wants every row")
    parser.add_argument("--eager", action="store_true",
                        help="also predict the compiled-measured anchors eagerly, side by side")
    parser.add_argument("--markdown", metavar="FILE",
                        help="write the table into FILE between its fidelity-table markers")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds a worker (one instance's anchors) may take (default "
                        f"{runner.WORKER_TIMEOUT_S}; a virtual Llama job's worker: what the job "
                        "may take and a minute)")
    parser.add_argument("--list", action="store_true",
                        help="print the anchors (name, kind, status, measured) without running")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    anchors = select(args.kind, args.anchor, args.all)
    if args.list:
        for a in anchors:
            print(f"{a.name}  {a.kind}  {a.status}  {report.fmt(a.measured, a.unit)}")
        return 0
    results = runner.predict(anchors, eager=args.eager, timeout=args.timeout)
    print(report.table(anchors, results, eager=args.eager))
    reasons = report.reasons(anchors)
    if reasons:
        print("\nnot counted, and why:\n" + reasons)
    if args.sources:
        print("\nsources:\n" + report.sources(anchors))
    for name, result in results.items():
        if "error" in result:
            print(f"\n{name} failed:\n{result['error']}", file=sys.stderr)
    if args.markdown:
        write_markdown(args.markdown, report.markdown(anchors, results))
    s = report.summary(anchors, results)
    if args.json:  # for tests and scripts: one JSON document on the last line
        print(json.dumps({"predictions": results, "summary": s}))
    return 0 if s["goals_met"] else 1
