"""Profiling on the simulated Trainium: where the predicted time goes.

    with torch_neuron.profiler.profile() as prof:
        model(x).sum().backward()
    print(prof.summary())
    prof.export_chrome_trace("trace.json")   # open in https://ui.perfetto.dev or chrome://tracing

Every op launched while the profiler is active is recorded with its simulated start and
duration on its stream, the busy time of each engine the cost model charged, its FLOPs and
bytes. Times are simulated Trainium time, not host time.
"""

import collections
import json
from typing import Optional

import torch

from torch_neuron import _C
from torch_neuron._op_tracking import get_fallback_ops

ENGINES = ("TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA")


class profile:
    """Context manager recording every neuron op launched inside it (see the module doc)."""

    def __init__(self, trace_path: Optional[str] = None):
        self.trace_path = trace_path
        self.records: list[dict] = []
        self.fallback_ops: dict[str, int] = {}
        self.peak_hbm: dict[int, int] = {}
        self._fallback_before: dict[str, int] = {}

    def __enter__(self):
        _C._take_trace()  # drop anything recorded before
        self._fallback_before = get_fallback_ops()
        for i in range(torch.neuron.device_count()):
            torch.neuron.reset_peak_memory_stats(i)
        _C._set_tracing(True)
        return self

    def __exit__(self, *exc):
        _C._set_tracing(False)
        self.records = sorted(_C._take_trace(), key=lambda r: (r["device"], r["start_ns"]))
        after = get_fallback_ops()
        self.fallback_ops = {k: v - self._fallback_before.get(k, 0) for k, v in after.items()
                             if v > self._fallback_before.get(k, 0)}
        self.peak_hbm = {d: torch.neuron.max_memory_allocated(d)
                         for d in sorted({r["device"] for r in self.records})}
        if self.trace_path:
            self.export_chrome_trace(self.trace_path)
        return False

    # -- totals ---------------------------------------------------------------------------

    def devices(self) -> list[int]:
        return sorted({r["device"] for r in self.records})

    def span_ns(self, device: int) -> float:
        """Simulated time from the first op's start to the last op's end on a device."""
        rs = [r for r in self.records if r["device"] == device]
        if not rs:
            return 0.0
        return max(r["start_ns"] + r["duration_ns"] for r in rs) - min(r["start_ns"] for r in rs)

    def total_time_ns(self) -> float:
        """The longest device span: the predicted wall time of the profiled region."""
        return max((self.span_ns(d) for d in self.devices()), default=0.0)

    def engine_utilization(self, device: int) -> dict[str, float]:
        span = self.span_ns(device) or 1.0
        busy = collections.Counter()
        for r in self.records:
            if r["device"] == device:
                busy.update(r["engine_ns"])
        return {e: busy[e] / span for e in ENGINES}

    def mfu(self, device: int) -> float:
        """Model FLOPs utilisation: FLOPs done over what the core's BF16 peak allows in the
        span."""
        info = _C._instance_info()
        peak_per_ns = info["bf16_tflops_per_chip"] * 1e3 / info["logical_cores_per_chip"]
        flops = sum(r["flops"] for r in self.records
                    if r["device"] == device and "TensorE" in r["engine_ns"])
        span = self.span_ns(device)
        return flops / (span * peak_per_ns) if span else 0.0

    def by_op(self) -> list[dict]:
        """Per op name: calls, simulated time, FLOPs, bytes; sorted by time."""
        rows = {}
        for r in self.records:
            row = rows.setdefault(r["name"], {"name": r["name"], "calls": 0, "time_ns": 0.0,
                                              "flops": 0.0, "bytes": 0})
            row["calls"] += 1
            row["time_ns"] += r["duration_ns"]
            row["flops"] += r["flops"]
            row["bytes"] += r["bytes"]
        return sorted(rows.values(), key=lambda row: -row["time_ns"])

    # -- reports ----------------------------------------------------------------------------

    def summary(self, top: int = 15) -> str:
        info = _C._instance_info()
        total = sum(r["duration_ns"] for r in self.records) or 1.0
        lines = [f"Simulated {info['name']} ({info['chip']}, {info['core_version']}): "
                 f"{len(self.records)} ops, predicted time {self.total_time_ns() / 1e3:.1f} us",
                 "",
                 f"{'op':<40}{'calls':>7}{'time (us)':>12}{'%':>7}{'TFLOP/s':>10}{'GB/s':>9}"]
        for row in self.by_op()[:top]:
            t = row["time_ns"]
            lines.append(f"{row['name'][:39]:<40}{row['calls']:>7}{t / 1e3:>12.1f}"
                         f"{100 * t / total:>7.1f}{row['flops'] / t / 1e3 if t else 0:>10.2f}"
                         f"{row['bytes'] / t if t else 0:>9.1f}")
        for d in self.devices():
            util = self.engine_utilization(d)
            engines = "  ".join(f"{e} {util[e]:.0%}" for e in ENGINES)
            lines += ["", f"neuron:{d}: span {self.span_ns(d) / 1e3:.1f} us, MFU {self.mfu(d):.1%}, "
                      f"peak HBM {self.peak_hbm.get(d, 0) / 2**20:.1f} MiB",
                      f"  engine busy: {engines}"]
        if self.fallback_ops:
            lines += ["", "CPU fallback ops: " + ", ".join(
                f"{k} x{v}" for k, v in sorted(self.fallback_ops.items()))]
        else:
            lines += ["", "CPU fallback ops: none"]
        return "\n".join(lines)

    def chrome_trace(self) -> dict:
        """Chrome/Perfetto trace: one process per device, a track per stream and per engine."""
        events = []
        for d in self.devices():
            events.append({"ph": "M", "name": "process_name", "pid": d,
                           "args": {"name": f"neuron:{d}"}})
            for q in sorted({r["queue"] for r in self.records if r["device"] == d}):
                events.append({"ph": "M", "name": "thread_name", "pid": d, "tid": q,
                               "args": {"name": f"stream {q}"}})
            for i, e in enumerate(ENGINES):
                events.append({"ph": "M", "name": "thread_name", "pid": d, "tid": 1000 + i,
                               "args": {"name": e}})
        for r in self.records:
            args = {"shapes": r["detail"], "flops": r["flops"], "bytes": r["bytes"],
                    "engine_ns": r["engine_ns"]}
            events.append({"ph": "X", "name": r["name"], "pid": r["device"], "tid": r["queue"],
                           "ts": r["start_ns"] / 1e3, "dur": r["duration_ns"] / 1e3,
                           "args": args})
            for e, busy in r["engine_ns"].items():
                events.append({"ph": "X", "name": r["name"], "pid": r["device"],
                               "tid": 1000 + ENGINES.index(e), "ts": r["start_ns"] / 1e3,
                               "dur": busy / 1e3})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"instance": _C._instance_info()["name"],
                              "time": "simulated Trainium time"}}

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    def plot(self, path: str, top: int = 12) -> None:
        """A PNG (needs matplotlib): the timeline of each device's streams and engines on top,
        simulated time per op below."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        devices = self.devices()[:1]  # the first device keeps the picture readable
        rows = self.by_op()[:top][::-1]
        fig, (timeline, bars) = plt.subplots(
            2, 1, figsize=(10, 3.2 + 0.35 * len(rows)),
            gridspec_kw={"height_ratios": [1.2, max(1, len(rows) / 6)]})
        tracks = []
        for d in devices:
            streams = sorted({r["queue"] for r in self.records if r["device"] == d})
            tracks += [(f"neuron:{d} stream {q}", "queue", q) for q in streams]
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
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
