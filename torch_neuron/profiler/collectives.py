"""Communication in a profile: which trace records are collectives, what their detail says, and
how much of a device's time communication takes and how much of it compute does not hide.

Pure functions of trace records (the dicts `torch_neuron._C._take_trace()` returns), shared by
`profile.summary()` and the report of `python -m torch_neuron run --nproc-per-node N`.

Note [Exposed communication]: a process group runs its collectives on a stream of its own
(ids from `_C._first_collective_stream()` up), so they overlap compute as on hardware, where
the collective-communication cores move data while the NeuronCore computes. What a step pays
for communication is the part of the collectives' time during which no compute runs on that
device: the union of the collective intervals minus the union of the compute intervals.
"""

import functools
import json


@functools.lru_cache(maxsize=None)
def first_collective_stream() -> int:
    from torch_neuron import _C

    return _C._first_collective_stream()


def is_collective(record: dict) -> bool:
    return record["queue"] >= first_collective_stream()


def collective_detail(record: dict) -> dict:
    """The JSON object the process group puts in a collective's `detail`; {} if unreadable."""
    try:
        detail = json.loads(record["detail"])
    except (TypeError, ValueError):
        return {}
    return detail if isinstance(detail, dict) else {}


# -- interval arithmetic on [start, end) in ns --------------------------------------------------


def merge_intervals(intervals) -> list[tuple[float, float]]:
    """Sorted, disjoint intervals covering the same time as `intervals` (empty ones dropped)."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def covered_ns(intervals) -> float:
    """Length of the union of `intervals`."""
    return sum(e - s for s, e in merge_intervals(intervals))


def uncovered_ns(intervals, by) -> float:
    """Length of the union of `intervals` that no interval of `by` covers."""
    cover = merge_intervals(by)
    total, j = 0.0, 0
    for start, end in merge_intervals(intervals):
        while j < len(cover) and cover[j][1] <= start:
            j += 1
        hidden, k = 0.0, j
        while k < len(cover) and cover[k][0] < end:
            hidden += min(end, cover[k][1]) - max(start, cover[k][0])
            k += 1
        total += (end - start) - hidden
    return total


def interval(record: dict) -> tuple[float, float]:
    return record["start_ns"], record["start_ns"] + record["duration_ns"]


def time_breakdown(records: list[dict]) -> dict[str, float]:
    """Span, compute, communication and exposed communication (ns) of one device's records."""
    if not records:
        return {"span_ns": 0.0, "compute_ns": 0.0, "communication_ns": 0.0,
                "exposed_communication_ns": 0.0}
    compute = [interval(r) for r in records if not is_collective(r)]
    comm = [interval(r) for r in records if is_collective(r)]
    return {"span_ns": max(e for _, e in map(interval, records))
            - min(s for s, _ in map(interval, records)),
            "compute_ns": covered_ns(compute), "communication_ns": covered_ns(comm),
            "exposed_communication_ns": uncovered_ns(comm, compute)}


# -- the collectives table ----------------------------------------------------------------------


def collective_rows(records: list[dict], by_size: bool = False) -> list[dict]:
    """Collective records aggregated per name, or per (name, bytes) with `by_size`; sorted by
    time. A row: name, bytes (total, or per call with by_size), calls, time_ns (total),
    algorithms, links, group_ranks (sorted lists), busbw_gbps (mean over calls), and ranks
    (how many distinct `rank`s issued it, for records tagged with a rank; else 1)."""
    rows: dict = {}
    for r in records:
        if not is_collective(r):
            continue
        d = collective_detail(r)
        # The collective's size as nccl-tests counts it (the detail's), not the record's bytes,
        # which are what this rank's DMA moves.
        size = int(d.get("bytes", r["bytes"]))
        key = (r["name"], size) if by_size else r["name"]
        row = rows.setdefault(key, {"name": r["name"], "bytes": 0, "calls": 0, "time_ns": 0.0,
                                    "algorithms": set(), "links": set(), "group_ranks": set(),
                                    "busbw_sum": 0.0, "issuers": set()})
        row["bytes"] = size if by_size else row["bytes"] + size
        row["calls"] += 1
        row["time_ns"] += r["duration_ns"]
        row["busbw_sum"] += float(d.get("busbw_gbps", 0.0))
        for field, value in (("algorithms", d.get("algorithm")), ("links", d.get("link")),
                             ("group_ranks", d.get("ranks"))):
            if value is not None:
                row[field].add(value)
        row["issuers"].add(r.get("rank"))
    out = []
    for row in rows.values():
        busbw_sum, issuers = row.pop("busbw_sum"), row.pop("issuers")
        row["busbw_gbps"] = busbw_sum / row["calls"]
        row["ranks"] = len(issuers)
        for field in ("algorithms", "links", "group_ranks"):
            row[field] = sorted(row[field])
        out.append(row)
    return sorted(out, key=lambda row: (-row["time_ns"], row["name"], row["bytes"]))


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def collectives_table(records: list[dict]) -> list[str]:
    """The "Collectives" section of one process's summary: one line per collective name."""
    lines = [f"{'collective':<28}{'calls':>7}{'bytes':>12}{'time (us)':>12}{'busbw (GB/s)':>14}"
             f"  algorithm / link"]
    for row in collective_rows(records):
        lines.append(f"{row['name'][:27]:<28}{row['calls']:>7}{format_bytes(row['bytes']):>12}"
                     f"{row['time_ns'] / 1e3:>12.1f}{row['busbw_gbps']:>14.1f}"
                     f"  {', '.join(row['algorithms']) or '-'} / {', '.join(row['links']) or '-'}")
    return lines


def track_name(records: list[dict]) -> str:
    """Name of a collective stream's trace track, from the groups of its records."""
    groups = sorted({str(collective_detail(r).get("group", "?")) for r in records})
    return f"collectives (group{'s' if len(groups) > 1 else ''} {', '.join(groups)})"
