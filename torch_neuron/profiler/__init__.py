"""Profiling on the simulated Trainium: where the predicted time goes.

    with torch_neuron.profiler.profile() as prof:
        model(x).sum().backward()
    print(prof.summary())
    prof.export_chrome_trace("trace.json")   # open in https://ui.perfetto.dev or chrome://tracing

Every op launched while the profiler is active is recorded with its simulated start and
duration on its stream, the busy time of each engine the cost model charged, its FLOPs and
bytes. Times are simulated Trainium time, not host time.

Collectives of the c10d "neuron" backend run on their process group's own stream: the summary
lists them in a "Collectives" section instead of among the ops, with each device's compute,
communication and exposed communication time (Note [Exposed communication] in
torch_neuron/profiler/collectives.py); the trace names their track "collectives (group G)".
"""

import collections
import json
from typing import Optional

import torch

from torch_neuron import _C
from torch_neuron.profiler.collectives import (collective_detail, collectives_table, is_collective,
                                               time_breakdown, track_name)

ENGINES = ("TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA")


# The profiles now recording, outermost first. The simulator keeps one trace buffer, so when a
# profile starts or stops inside another, what was recorded so far goes to every active one.
_active: list["profile"] = []


def _collect() -> None:
    records = _C._take_trace()
    for p in _active:
        p._recorded.extend(records)


class profile:
    """Context manager recording every neuron op launched inside it (see the module doc).
    Profiles nest: an outer profile also keeps what an inner one records (so a script that
    profiles itself still gets the full report of `python -m torch_neuron run`)."""

    def __init__(self, trace_path: Optional[str] = None):
        self.trace_path = trace_path
        self.records: list[dict] = []
        self.fallback_ops: dict[str, int] = {}
        self.peak_hbm: dict[int, int] = {}
        self._fallback_before: dict[str, int] = {}
        self._recorded: list[dict] = []
        self.compiles = {"graphs": 0, "recompiles": 0}  # torch.compile during the profile
        self._compiles_before: dict[str, int] = {}

    def __enter__(self):
        if _active:
            _collect()  # the outer profiles' records so far
        else:
            _C._take_trace()  # drop anything recorded before
            # Peak HBM counts from the outermost profile's start (an inner one reports the
            # peak since then too).
            for i in range(torch.neuron.device_count()):
                torch.neuron.reset_peak_memory_stats(i)
        self._fallback_before = dict(_C._fallback_ops())
        self._compiles_before = _compile_counts()
        self._recorded = []
        _active.append(self)
        _C._set_tracing(True)
        return self

    def __exit__(self, *exc):
        _collect()
        _active.remove(self)
        if not _active:
            _C._set_tracing(False)
        self.records = sorted(self._recorded, key=lambda r: (r["device"], r["start_ns"]))
        self._recorded = []
        after = dict(_C._fallback_ops())
        self.fallback_ops = {k: v - self._fallback_before.get(k, 0) for k, v in after.items()
                             if v > self._fallback_before.get(k, 0)}
        self.peak_hbm = {d: torch.neuron.max_memory_allocated(d)
                         for d in sorted({r["device"] for r in self.records})}
        now = _compile_counts()
        self.compiles = {k: now[k] - self._compiles_before.get(k, 0) for k in now}
        if self.trace_path:
            self.export_chrome_trace(self.trace_path)
        return False

    # -- totals ---------------------------------------------------------------------------

    def devices(self) -> list[int]:
        return sorted({r["device"] for r in self.records})

    def compute_records(self) -> list[dict]:
        """The ops and copies: every record but the collectives."""
        return [r for r in self.records if not is_collective(r)]

    def collective_records(self) -> list[dict]:
        return [r for r in self.records if is_collective(r)]

    def span_ns(self, device: int) -> float:
        """Simulated time from the first op's start to the last op's end on a device."""
        rs = [r for r in self.records if r["device"] == device]
        if not rs:
            return 0.0
        return max(r["start_ns"] + r["duration_ns"] for r in rs) - min(r["start_ns"] for r in rs)

    def total_time_ns(self) -> float:
        """The longest device span: the predicted wall time of the profiled region."""
        return max((self.span_ns(d) for d in self.devices()), default=0.0)

    def time_breakdown(self, device: int) -> dict[str, float]:
        """span_ns, compute_ns, communication_ns and exposed_communication_ns of a device."""
        return time_breakdown([r for r in self.records if r["device"] == device])

    def engine_utilization(self, device: int) -> dict[str, float]:
        """Busy time of each NeuronCore engine over the device's span. Collectives are not
        counted: they run on the collective-communication cores, not on these engines."""
        span = self.span_ns(device) or 1.0
        busy = collections.Counter()
        for r in self.compute_records():
            if r["device"] == device:
                busy.update(r["engine_ns"])
        return {e: busy[e] / span for e in ENGINES}

    def mfu(self, device: int) -> float:
        """Model FLOPs utilisation: FLOPs done over what the core's BF16 peak allows in the
        span."""
        return mfu([r for r in self.records if r["device"] == device], self.span_ns(device),
                   _C._instance_info())

    def hbm_utilization(self, device: int) -> float:
        """HBM traffic of the device's ops over what its DMA queues can stream in the span
        (the core's streaming bandwidth, InstanceSpec::core_stream_gbps)."""
        span = self.span_ns(device)
        traffic = sum(r["bytes"] for r in self.compute_records() if r["device"] == device)
        return traffic / (span * _C._instance_info()["stream_gbps_per_core"]) if span else 0.0

    def by_op(self) -> list[dict]:
        """Per op name: calls, simulated time, FLOPs, bytes; sorted by time. Collectives are
        not ops: see collective_records() and the summary's "Collectives" section."""
        return op_rows(self.compute_records())

    def graph_ops(self, graph: Optional[str] = None) -> list[dict]:
        """The ops inside compiled graphs (all graphs, or the graph named `graph`): per graph
        and op name, calls, the sum of their spans in the graph's schedule, each engine's busy
        time and the HBM bytes they moved; sorted by their busiest engine's time. Ops of one
        graph overlap, so their spans add up to more than the graph's time."""
        return graph_op_rows([r for r in self.compute_records()
                              if graph is None or r["name"] == graph])

    # -- reports ----------------------------------------------------------------------------

    def summary(self, top: int = 15) -> str:
        info = _C._instance_info()
        compute, collectives = self.compute_records(), self.collective_records()
        counts = f"{len(compute)} ops" + (f", {len(collectives)} collectives"
                                          if collectives else "")
        lines = [f"Simulated {info['name']} ({info['chip']}, {info['core_version']}): "
                 f"{counts}, predicted time {self.total_time_ns() / 1e3:.1f} us", ""]
        lines += op_table(compute, top)
        for d in self.devices():
            util = self.engine_utilization(d)
            engines = "  ".join(f"{e} {util[e]:.0%}" for e in ENGINES)
            lines += ["", f"neuron:{d}: span {self.span_ns(d) / 1e3:.1f} us, MFU {self.mfu(d):.1%}, "
                      f"HBM bandwidth {self.hbm_utilization(d):.1%}, "
                      f"peak HBM {self.peak_hbm.get(d, 0) / 2**20:.1f} MiB",
                      f"  engine busy: {engines}"]
            if any(r["device"] == d for r in collectives):
                t = self.time_breakdown(d)
                lines.append(f"  compute {t['compute_ns'] / 1e3:.1f} us, communication "
                             f"{t['communication_ns'] / 1e3:.1f} us, exposed communication "
                             f"{t['exposed_communication_ns'] / 1e3:.1f} us")
        graphs = compiled_graph_table(compute)
        if graphs:
            lines += ["", "Compiled graphs (each one launch, its engines scheduled together; "
                      "busy: share of the graph's time)"] + graphs
            lines += ["", "Inside compiled graphs (ops by their busiest engine's time; spans "
                      "overlap)"] + graph_op_table(compute, top)
        if collectives:
            lines += ["", "Collectives"] + collectives_table(collectives)
        if self.compiles["graphs"]:
            lines += ["", f"torch.compile: {self.compiles['graphs']} graphs compiled, "
                      f"{self.compiles['recompiles']} of them recompilations"]
        lines += ["", fallback_line(self.fallback_ops)]
        return "\n".join(lines)

    def chrome_trace(self) -> dict:
        """Chrome/Perfetto trace: one process per device, a track per stream (a process
        group's stream is "collectives (group G)") and per engine."""
        events = []
        for d in self.devices():
            events += process_trace_events([r for r in self.records if r["device"] == d],
                                           pid=d, name=f"neuron:{d}")
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"instance": _C._instance_info()["name"],
                              "time": "simulated Trainium time"}}

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    def plot(self, path: str, top: int = 12) -> None:
        """A PNG (needs matplotlib): the timeline of each device's streams and engines on top,
        simulated time per op in the middle, and the roofline below: each op placed by its
        arithmetic intensity (FLOPs per HBM byte) and achieved TFLOP/s under the core's peak
        and its HBM streaming bandwidth."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        devices = self.devices()[:1]  # the first device keeps the picture readable
        rows = self.by_op()[:top][::-1]
        fig, (timeline, bars, roof) = plt.subplots(
            3, 1, figsize=(10, 7.2 + 0.35 * len(rows)),
            gridspec_kw={"height_ratios": [1.2, max(1, len(rows) / 6), 1.6]})
        tracks = []
        for d in devices:
            streams = sorted({r["queue"] for r in self.records if r["device"] == d})
            tracks += [(f"neuron:{d} {queue_track_name(self.records, d, q)}", "queue", q)
                       for q in streams]
            tracks += [(f"neuron:{d} {e}", "engine", e) for e in ENGINES]
        colors = {}
        palette = plt.get_cmap("tab20").colors
        for y, (label, kind, key) in enumerate(tracks):
            spans, faces = [], []
            for r in self.records:
                if r["device"] not in devices:
                    continue
                if kind == "queue" and r["queue"] == key:
                    spans.append((r["start_ns"] / 1e3, r["duration_ns"] / 1e3))
                elif kind == "engine" and key in r["engine_ns"]:
                    spans.append((r["start_ns"] / 1e3, r["engine_ns"][key] / 1e3))
                else:
                    continue
                faces.append(colors.setdefault(r["name"], palette[len(colors) % len(palette)]))
            timeline.broken_barh(spans, (y - 0.4, 0.8), facecolors=faces, linewidth=0)
        timeline.set_yticks(range(len(tracks)), [t[0] for t in tracks])
        timeline.invert_yaxis()
        timeline.set_xlabel("simulated time (us)")
        timeline.set_title(f"Simulated {_C._instance_info()['name']}: timeline")
        bars.barh([r["name"] for r in rows], [r["time_ns"] / 1e3 for r in rows],
                  color=[colors.get(r["name"], "#888888") for r in rows])
        bars.set_xlabel("simulated time per op (us)")
        roofline(roof, rows, colors)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def roofline(ax, rows: list[dict], colors: dict) -> None:
    """The roofline of one logical core on `ax`, with the ops of `rows` (op_rows) on it."""
    info = _C._instance_info()
    peak = info["peak_bf16_tflops_per_core"]
    stream = info["stream_gbps_per_core"]  # GB/s = bytes/ns; x FLOP/byte -> GFLOP/s
    points = [(r["flops"] / r["bytes"], r["flops"] / r["time_ns"] / 1e3, r)
              for r in rows if r["flops"] > 0 and r["bytes"] > 0 and r["time_ns"] > 0]
    low = min([p[0] for p in points] + [0.01]) / 2
    high = max([p[0] for p in points] + [4 * peak * 1e3 / stream])
    xs = [low * (high / low) ** (i / 100) for i in range(101)]
    ax.plot(xs, [min(peak, x * stream / 1e3) for x in xs], color="black", linewidth=1,
            label=f"BF16 peak {peak:.0f} TFLOP/s, HBM {stream:.0f} GB/s")
    ax.plot(xs, [min(info["peak_fp32_tflops_per_core"], x * stream / 1e3) for x in xs],
            color="grey", linewidth=1, linestyle="--", label="FP32 peak")
    for intensity, tflops, r in points:
        ax.scatter(intensity, tflops, color=colors.get(r["name"], "#888888"), zorder=3)
        ax.annotate(r["name"].replace("aten::", ""), (intensity, tflops), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("roofline of one core")
    ax.legend(fontsize=7, loc="lower right")


def _compile_counts() -> dict:
    """Graphs torch.compile compiled so far (torch_neuron/compile/recompiles.py); none
    before a program first compiles for neuron."""
    import sys

    module = sys.modules.get("torch_neuron.compile.recompiles")
    return module.counts() if module else {"graphs": 0, "recompiles": 0}


# -- shared with the report of several ranks (torch_neuron/distributed/report.py) -------------


def mfu(records: list[dict], span_ns: float, instance_info: dict) -> float:
    """FLOPs of the TensorE records over what one logical core's BF16 peak (from the TensorE
    clock and array size) allows in span_ns."""
    peak_per_ns = instance_info["peak_bf16_tflops_per_core"] * 1e3
    flops = sum(r["flops"] for r in records
                if "TensorE" in r["engine_ns"] and not is_collective(r))
    return flops / (span_ns * peak_per_ns) if span_ns else 0.0


def op_rows(records: list[dict]) -> list[dict]:
    """Per op name: calls, simulated time, FLOPs, bytes; sorted by time."""
    rows = {}
    for r in records:
        row = rows.setdefault(r["name"], {"name": r["name"], "calls": 0, "time_ns": 0.0,
                                          "flops": 0.0, "bytes": 0})
        row["calls"] += 1
        row["time_ns"] += r["duration_ns"]
        row["flops"] += r["flops"]
        row["bytes"] += r["bytes"]
    return sorted(rows.values(), key=lambda row: -row["time_ns"])


def op_table(records: list[dict], top: int) -> list[str]:
    """The op table: the `top` ops by time, with their share of all these records' time."""
    total = sum(r["duration_ns"] for r in records) or 1.0
    rows = op_rows(records)[:top]
    width = max([40] + [len(row["name"]) + 2 for row in rows])  # whole names, never cut
    lines = [f"{'op':<{width}}{'calls':>7}{'time (us)':>12}{'%':>7}{'TFLOP/s':>10}{'GB/s':>9}"]
    for row in rows:
        t = row["time_ns"]
        lines.append(f"{row['name']:<{width}}{row['calls']:>7}{t / 1e3:>12.1f}"
                     f"{100 * t / total:>7.1f}{row['flops'] / t / 1e3 if t else 0:>10.2f}"
                     f"{row['bytes'] / t if t else 0:>9.1f}")
    return lines


def is_compiled_graph(record: dict) -> bool:
    """A compiled graph's launch (Note [Compiled graph schedule] in csrc/aten/GraphSchedule.h)."""
    return record.get("detail", "").startswith("compiled graph:")


def compiled_graph_table(records: list[dict]) -> list[str]:
    """Per compiled graph: runs, predicted time per run, and each engine's busy share."""
    rows = {}
    for r in records:
        if not is_compiled_graph(r):
            continue
        row = rows.setdefault(r["name"], {"calls": 0, "time_ns": 0.0,
                                          "busy": collections.Counter()})
        row["calls"] += 1
        row["time_ns"] += r["duration_ns"]
        row["busy"].update(r["engine_ns"])
    if not rows:
        return []
    width = max(40, *(len(name) + 2 for name in rows))
    lines = [f"{'graph':<{width}}{'calls':>7}{'us/call':>10}  " +
             "".join(f"{e:>9}" for e in ENGINES)]
    for name, row in sorted(rows.items(), key=lambda kv: -kv[1]["time_ns"]):
        t = row["time_ns"]
        lines.append(f"{name:<{width}}{row['calls']:>7}{t / row['calls'] / 1e3:>10.1f}  " +
                     "".join(f"{row['busy'][e] / t if t else 0:>9.0%}" for e in ENGINES))
    return lines


def graph_op_rows(records: list[dict]) -> list[dict]:
    """graph_ops() of these records: their compiled graphs' parts, by graph and op name."""
    rows = {}
    for r in records:
        for part in r.get("parts", ()):
            row = rows.setdefault((r["name"], part["name"]), {
                "graph": r["name"], "name": part["name"], "calls": 0, "span_ns": 0.0,
                "engine_ns": collections.Counter(), "bytes": 0})
            row["calls"] += 1
            row["span_ns"] += part["duration_ns"]
            row["engine_ns"].update(part["engine_ns"])
            row["bytes"] += part["bytes"]
    for row in rows.values():
        row["engine_ns"] = dict(row["engine_ns"])
        row["busiest"] = max(row["engine_ns"], key=row["engine_ns"].get, default="")
    return sorted(rows.values(), key=lambda row: -max(row["engine_ns"].values(), default=0))


def graph_op_table(records: list[dict], top: int) -> list[str]:
    """The `top` ops inside compiled graphs: span, busiest engine and its time, bytes."""
    rows = graph_op_rows(records)[:top]
    names = [f"{row['graph']}: {row['name']}" for row in rows]
    width = max([40] + [len(n) + 2 for n in names])
    lines = [f"{'graph: op':<{width}}{'calls':>7}{'span (us)':>11}{'busiest':>10}"
             f"{'busy (us)':>11}{'MB':>9}"]
    for name, row in zip(names, rows):
        busy = row["engine_ns"].get(row["busiest"], 0.0)
        lines.append(f"{name:<{width}}{row['calls']:>7}{row['span_ns'] / 1e3:>11.1f}"
                     f"{row['busiest']:>10}{busy / 1e3:>11.1f}{row['bytes'] / 1e6:>9.2f}")
    return lines


def fallback_line(fallback_ops: dict[str, int]) -> str:
    if not fallback_ops:
        return "CPU fallback ops: none"
    return "CPU fallback ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(fallback_ops.items()))


def queue_track_name(records: list[dict], device: int, queue: int) -> str:
    """"stream Q", or "collectives (group G)" for a process group's stream."""
    on_queue = [r for r in records if r["device"] == device and r["queue"] == queue]
    if on_queue and is_collective(on_queue[0]):
        return track_name(on_queue)
    return f"stream {queue}"


ENGINE_TID_BASE = 1000  # engine tracks follow the stream tracks (stream ids are < 1000)
DEVICE_TID_STRIDE = 10000


def process_trace_events(records: list[dict], pid: int, name: str,
                         sort_index: Optional[int] = None) -> list[dict]:
    """Chrome trace events of one process: its name, a track per stream (tid = stream id) and
    per engine (tid = 1000 + engine index), and a span per record on each. A process whose
    records are on several devices (a rank that used more than its own NeuronCore) gets the
    tracks of each, named "neuron:D ..." with tids offset by 10000 x (D + 1)."""
    events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}]
    if sort_index is not None:
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                       "args": {"sort_index": sort_index}})
    devices = sorted({r["device"] for r in records})
    several = len(devices) > 1

    def tid(device: int, track: int) -> int:
        return (device + 1) * DEVICE_TID_STRIDE + track if several else track

    for d in devices:
        prefix = f"neuron:{d} " if several else ""
        for q in sorted({r["queue"] for r in records if r["device"] == d}):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid(d, q),
                           "args": {"name": prefix + queue_track_name(records, d, q)}})
        for i, e in enumerate(ENGINES):
            events.append({"ph": "M", "name": "thread_name", "pid": pid,
                           "tid": tid(d, ENGINE_TID_BASE + i), "args": {"name": prefix + e}})
    for r in records:
        if is_collective(r):
            args = {**collective_detail(r), "bytes": r["bytes"]}
        else:
            args = {"shapes": r["detail"], "flops": r["flops"], "bytes": r["bytes"],
                    "engine_ns": r["engine_ns"]}
        events.append({"ph": "X", "name": r["name"], "pid": pid,
                       "tid": tid(r["device"], r["queue"]), "ts": r["start_ns"] / 1e3,
                       "dur": r["duration_ns"] / 1e3, "args": args})
        for e, busy in r["engine_ns"].items():
            events.append({"ph": "X", "name": r["name"], "pid": pid,
                           "tid": tid(r["device"], ENGINE_TID_BASE + ENGINES.index(e)),
                           "ts": r["start_ns"] / 1e3, "dur": busy / 1e3})
        events += graph_part_events(r, pid, tid(r["device"], r["queue"]), len(events))
    return events


def graph_part_events(record: dict, pid: int, tid: int, first_id: int) -> list[dict]:
    """A compiled graph's ops as async slices under its record (they overlap, so they cannot
    nest as complete events do): one begin and one end event each, category "graph op"."""
    events = []
    for i, part in enumerate(record.get("parts", ())):
        start = (record["start_ns"] + part["start_ns"]) / 1e3
        common = {"name": part["name"], "cat": "graph op", "pid": pid, "tid": tid,
                  "id": first_id + i}
        events.append({**common, "ph": "b", "ts": start,
                       "args": {"graph": record["name"], "bytes": part["bytes"],
                                "engine_ns": part["engine_ns"]}})
        events.append({**common, "ph": "e", "ts": start + part["duration_ns"] / 1e3})
    return events
