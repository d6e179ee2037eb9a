"""The report of a multi-rank run (`python -m torch_neuron run --nproc-per-node N`).

Each rank profiles its script as a single-process run does and, at its end, writes what it
recorded to DIR/rank<R>.json (`write_rank_report`) instead of printing a report. The launcher
reads every rank's file (`read_rank_reports`) and prints one summary (`summary`) and writes
one Chrome/Perfetto trace with a process per rank (`chrome_trace`).

The ranks' simulated clocks need no alignment: each process's clocks start at 0 and the
backend ends every collective at the same simulated time on all its ranks, so the ranks'
timelines line up as recorded.
"""

import json
import os
import time

from torch_neuron import _C
from torch_neuron.profiler.collectives import (collective_rows, format_bytes, is_collective,
                                       time_breakdown)
from torch_neuron.profiler import (fallback_line, graph_op_table, mfu, op_table,
                                   process_trace_events)

TOP_OPS = 10


def rank_report(prof, exit_code: int, error: str | None) -> dict:
    """What one rank's profile recorded, as JSON-ready data; who the rank is comes from
    torchrun's environment (RANK, LOCAL_RANK, GROUP_RANK)."""
    local_rank = _C._setting("LOCAL_RANK") or 0
    return {
        "rank": _C._setting("RANK") or 0,
        "local_rank": local_rank,
        "node": _C._setting("GROUP_RANK") or 0,
        "world_size": _C._setting("WORLD_SIZE") or 1,
        "device": local_rank,  # the backend's rule: rank on node -> neuron:LOCAL_RANK
        "instance": _C._instance_info(),
        "exit_code": exit_code,
        "error": error,
        "finished_at": time.time(),  # host time: the first rank to fail is the likely cause
        "records": prof.records,
        "fallback_ops": prof.fallback_ops,
        "peak_hbm": {str(d): n for d, n in prof.peak_hbm.items()},
    }


def write_rank_report(directory: str, report: dict) -> str:
    path = os.path.join(directory, f"rank{report['rank']}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f)
    os.replace(path + ".tmp", path)  # the launcher never reads half a file
    return path


def read_rank_reports(directory: str) -> list[dict]:
    """Every rank's report in `directory`, by rank; each record gets a "rank" key."""
    reports = []
    for name in os.listdir(directory):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                report = json.load(f)
            for r in report["records"]:
                r["rank"] = report["rank"]
            reports.append(report)
    return sorted(reports, key=lambda report: report["rank"])


def own_records(report: dict) -> list[dict]:
    """The records of the rank's own NeuronCore (all of them if it used none)."""
    mine = [r for r in report["records"] if r["device"] == report["device"]]
    return mine or report["records"]


def rank_row(report: dict) -> dict:
    records = own_records(report)
    row = time_breakdown(records)
    row["mfu"] = mfu(records, row["span_ns"], report["instance"])
    row["peak_hbm"] = report["peak_hbm"].get(str(report["device"]),
                                             max(report["peak_hbm"].values(), default=0))
    return row


def predicted_time_ns(reports: list[dict]) -> float:
    """From the first record of any rank to the last one of any rank (one timeline)."""
    records = [r for report in reports for r in report["records"]]
    if not records:
        return 0.0
    return (max(r["start_ns"] + r["duration_ns"] for r in records)
            - min(r["start_ns"] for r in records))


def summary(reports: list[dict], world_size: int, running: list[int] | None = None,
            nodes: int | None = None) -> str:
    """One report of all ranks: a row per rank (span, compute, communication, exposed
    communication, MFU, peak HBM), the collectives by (name, size), the top ops summed over
    ranks and the CPU fallback ops summed over ranks. Ranks without a report are named. In a
    virtual world `running` lists the ranks that ran (the others have no row) on `nodes`
    instances."""
    by_rank = {report["rank"]: report for report in reports}
    info = reports[0]["instance"] if reports else _C._instance_info()
    nodes = nodes or len({report["node"] for report in reports}) or 1
    virtual = ""
    if running is not None:
        virtual = (f"; a virtual world: rank{'s' if len(running) > 1 else ''} "
                   f"{', '.join(map(str, running))} ran (predict-only), "
                   f"{world_size - len(running)} virtual")
    lines = [f"Simulated {info['name']} ({info['chip']}, {info['core_version']}): {world_size} "
             f"rank{'s' if world_size != 1 else ''} on {nodes} instance{'s' if nodes != 1 else ''}"
             f", predicted time {predicted_time_ns(reports) / 1e3:.1f} us{virtual}", "",
             f"{'rank':>4}  {'device':<10}{'node':>4}{'span (us)':>12}{'compute (us)':>14}"
             f"{'comm (us)':>12}{'exposed comm (us)':>19}{'MFU':>7}{'peak HBM (MiB)':>16}"]
    for rank in running if running is not None else range(world_size):
        report = by_rank.get(rank)
        if report is None:
            lines.append(f"{rank:>4}  (no report: the rank was stopped or crashed)")
            continue
        row = rank_row(report)
        failed = f"  exit code {report['exit_code']}" if report["exit_code"] else ""
        lines.append(f"{rank:>4}  {'neuron:' + str(report['device']):<10}{report['node']:>4}"
                     f"{row['span_ns'] / 1e3:>12.1f}{row['compute_ns'] / 1e3:>14.1f}"
                     f"{row['communication_ns'] / 1e3:>12.1f}"
                     f"{row['exposed_communication_ns'] / 1e3:>19.1f}{row['mfu']:>7.1%}"
                     f"{row['peak_hbm'] / 2**20:>16.1f}{failed}")
    peaks = [rank_row(report)["peak_hbm"] for report in reports]
    capacity = info.get("hbm_bytes_per_core", 0)
    # A failed allocation is not in the peak: a rank that ran out of HBM says so in its error.
    out_of_memory = [r["rank"] for r in reports if "out of memory" in (r.get("error") or "")]
    if peaks and capacity:
        if out_of_memory:
            fits = f"rank {out_of_memory[0]} ran out of it"
        elif max(peaks) <= capacity:
            fits = "every rank's peak fits"
        else:
            fits = "a rank's peak does NOT fit"
        lines += ["", f"HBM per NeuronCore: {capacity / 2**30:.1f} GiB ({fits})"]

    records = [r for report in reports for r in report["records"]]
    lines += ["", "Collectives (size per call; time and busbw are means over calls and ranks)"]
    rows = collective_rows(records, by_size=True)
    if rows:
        lines.append(f"{'collective':<26}{'size':>11}{'ranks':>7}{'calls/rank':>12}"
                     f"{'time (us)':>11}{'busbw (GB/s)':>14}  algorithm / link")
    else:
        lines.append("none")
    for row in rows:
        group = "/".join(str(p) for p in row["group_ranks"]) or "-"
        lines.append(f"{row['name'][:25]:<26}{format_bytes(row['bytes']):>11}{group:>7}"
                     f"{row['calls'] / row['ranks']:>12.4g}"
                     f"{row['time_ns'] / row['calls'] / 1e3:>11.1f}{row['busbw_gbps']:>14.1f}"
                     f"  {', '.join(row['algorithms']) or '-'} / {', '.join(row['links']) or '-'}")

    compute = [r for r in records if not is_collective(r)]
    lines += ["", f"Ops (summed over ranks; top {TOP_OPS})"] + op_table(compute, TOP_OPS)
    inside = graph_op_table(compute, TOP_OPS)
    if len(inside) > 1:
        lines += ["", "Inside compiled graphs (summed over ranks; ops by their busiest "
                  "engine's time; spans overlap)"] + inside
    fallback: dict[str, int] = {}
    for report in reports:
        for op, n in report["fallback_ops"].items():
            fallback[op] = fallback.get(op, 0) + n
    lines += ["", fallback_line(fallback).replace("ops:", "ops (summed over ranks):", 1)]
    return "\n".join(lines)


def chrome_trace(reports: list[dict]) -> dict:
    """One Chrome/Perfetto trace of every rank: process `rank` named "rank R (neuron:D,
    node N)", with its streams, its process group's collectives track and its engines."""
    events = []
    for report in reports:
        name = f"rank {report['rank']} (neuron:{report['device']}, node {report['node']})"
        events += process_trace_events(report["records"], pid=report["rank"], name=name,
                                       sort_index=report["rank"])
    info = reports[0]["instance"] if reports else _C._instance_info()
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"instance": info["name"], "ranks": len(reports),
                          "time": "simulated Trainium time"}}


def write_chrome_trace(reports: list[dict], path: str) -> None:
    with open(path, "w") as f:
        json.dump(chrome_trace(reports), f)
