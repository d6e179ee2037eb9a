"""benchmarks/collective_benchmark.py --smoke: it launches its own ranks, prints nccl-tests
style tables whose busbw never exceeds the cost model's ceiling, and its simulated times are
what the backend charges: the cost model's duration_ns for the op, size and rank placement,
recomputed here independently of the benchmark."""

import json
import os
import sys
import time

from conftest import EVENT_RECORD_NS, assert_ok, run_process_group

BENCHMARK = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks",
                         "collective_benchmark.py")
HEADER = ("size", "count", "type", "sim time", "sim/", "algbw", "busbw", "algorithm", "link",
          "ceiling", "busbw/", "wall neuron", "wall cpu", "neuron/", "calls")


def parse_tables(stdout):
    """{op: [row, ...]} from the printed tables; a row is a dict of the numeric columns."""
    tables, op = {}, None
    for line in stdout.splitlines():
        if line.startswith("# ") and " on " in line and "(cost model:" in line:
            op = line[2:].split(" on ")[0]
            tables[op] = []
        elif line.startswith("#") and line[1:].split()[:2] == ["size", "count"]:
            assert all(column in line for column in HEADER), line
        elif line.strip() and not line.startswith("#"):
            model_part, wall_part = line.split("|")
            left = model_part.split()
            wall = wall_part.split()
            tables[op].append({
                "bytes": int(left[0]), "sim_us": float(left[3]), "sim_over_model": float(left[4]),
                "busbw": float(left[6]), "link": left[-3], "ceiling": float(left[-2]),
                "pct": float(left[-1].rstrip("%")), "wall_neuron_us": float(wall[0]),
                "wall_cpu_us": float(wall[1]), "ratio": float(wall[2])})
    return tables


def test_smoke_run_prints_consistent_tables(tmp_path):
    import torch_neuron

    rows_file = tmp_path / "rows.json"
    start = time.monotonic()
    result = assert_ok(run_process_group(
        [sys.executable, BENCHMARK, "--smoke", "--json", str(rows_file)], timeout=120))
    elapsed = time.monotonic() - start
    assert elapsed < 60, f"--smoke took {elapsed:.0f} s (CI budget: 60 s)"

    tables = parse_tables(result.stdout)
    assert list(tables) == ["all_reduce", "all_gather_into_tensor"], result.stdout
    rows = json.loads(rows_file.read_text())
    printed = [r for op in tables for r in tables[op]]
    assert len(printed) == len(rows) == 2 * 10  # 8 B .. 1 MiB in x4 steps, two ops
    for shown, row in zip(printed, rows):
        assert shown["bytes"] == row["bytes"]
        assert row["bytes"] <= 1 << 20 and row["ranks"] == 2 and row["instance"] == "trn2.3xlarge"
        assert shown["link"] == row["link"] == "on-chip"
        # busbw never beats the model's ceiling: exactly in the rows, within print rounding in
        # the table.
        assert row["busbw_gbps"] <= row["link_gbps"] * (1 + 1e-9), row
        assert shown["busbw"] <= shown["ceiling"] + 0.06 and shown["pct"] <= 100.0, shown
        # The simulated clock advanced by what the cost model says for this op, size and
        # placement, on every rank, in single calls and in batches, plus the event record that
        # marks its Work complete, 100 cycles at 1.4 GHz (Note [Event records]).
        model = torch_neuron._C._collective_cost(row["model_op"], row["bytes"],
                                                 [tuple(p) for p in row["places"]],
                                                 row["instance"])
        expected = model["duration_ns"] + EVENT_RECORD_NS
        for key in ("sim_ns", "sim_ns_min", "sim_ns_max"):
            assert abs(row[key] - expected) <= 1e-6 * expected, (key, row, expected)
        assert abs(shown["sim_us"] * 1e3 - expected) <= 0.5 + 1e-6 * expected
        assert shown["sim_over_model"] == 1.0
        assert shown["wall_neuron_us"] > 0 and shown["wall_cpu_us"] > 0

    summary = result.stdout[result.stdout.index("# Summary."):]
    assert "must be <= 100%" in summary and "trn2.3xlarge (2 ranks, on-chip)" in summary
    assert "(c) 20 of 20" in summary.replace("\n# ", " ")
