"""Collective anchors: every example table of AWS's nccom-test user guide, predicted through
the collective model's public entry point (torch_neuron._C._collective_cost).

The guide names no instance type for any of them ("Performance data shown in these examples
should not be considered up-to-date"), so every row is loose: printed with its prediction and
ratio, counted in no goal. The instance each is predicted on is an assumption stated per row:
trn1.32xlarge where the ranks per instance fit its 32 NeuronCores, trn2.48xlarge (64 logical
cores at LNC=2) where 64 ranks run on one instance."""

import functools

from torch_neuron.fidelity import workloads as w
from torch_neuron.fidelity.anchor import EXCLUDED, LOOSE, Anchor

SOURCE = ("github.com/aws-neuron/aws-neuron-sdk@a3247f5b tools/neuron-sys-tools/nccom-test.rst "
          "(example: {example})")
OPS = {"allr": "all_reduce", "allg": "all_gather", "allgv": "all_gather",
       "permute": "send_recv", "alltoallv": "all_to_all"}
# Ranks per chip and per instance of the instance each row is assumed to run on.
LAYOUT = {"trn1.32xlarge": (2, 32), "trn2.48xlarge": (4, 64)}


def _places(instance: str, ranks: int, nodes: int) -> list:
    per_chip, per_node = LAYOUT[instance]
    per_node = min(per_node, ranks // nodes)
    return [(r // per_node, (r % per_node) // per_chip) for r in range(ranks)]


def _rows(example, command, ranks, nodes, dtype, rows, status=LOOSE, reason=None,
          instance="trn1.32xlarge", op_ranks=None):
    """rows: [(size in bytes, time in us)] as printed; op_ranks: the ranks the op spans when
    not all of them (a permute's exchanging pair)."""
    op = OPS[command]
    span = op_ranks or ranks
    places = _places(instance, ranks, nodes)[:span]
    if reason is None:
        reason = (f"nccom-test.rst names no instance type; assumed {instance} "
                  f"({LAYOUT[instance][1]} NeuronCores per instance)")
    out = []
    for i, (size, time_us) in enumerate(rows):
        suffix = f"-{i}" if len({s for s, _ in rows}) < len(rows) else ""
        out.append(Anchor(
            f"{command}-r{ranks}{f'-N{nodes}' if nodes > 1 else ''}-{size}B-{dtype}-{example}"
            f"{suffix}", "collective", instance,
            f"nccom-test {command} -r {ranks}{f' -N {nodes}' if nodes > 1 else ''} -d {dtype}, "
            f"{size} B ({op} over {span} ranks)", time_us / 1e3, "ms",
            SOURCE.format(example=example),
            functools.partial(w.collective_ms, op, size, places),
            functools.partial(w.collective_bound_ms, op, size, span),
            status=status, reason=reason))
    return out


MiB = 1 << 20
ANCHORS = (
    # "Quick environment validation" (shown twice in the guide, same numbers).
    _rows("quick", "allr", 2, 1, "uint8", [(32 * MiB, 768)])
    + _rows("sweep", "allr", 2, 1, "fp32", [
        (1024, 58), (4096, 58), (16384, 58), (65536, 58), (262144, 60), (MiB, 68),
        (4 * MiB, 107), (16 * MiB, 332), (64 * MiB, 1214), (256 * MiB, 4750),
        (1024 * MiB, 18930)])
    + _rows("check", "allg", 32, 1, "fp32", [(1024, 151), (8192, 149), (65536, 150),
                                            (524288, 179)])
    + _rows("io-size", "allg", 32, 1, "fp32", [(1024, 6.16), (8192, 6.48), (65536, 8.17),
                                              (524288, 23.16)])
    + _rows("stats-avg", "allg", 8, 1, "fp32", [(1024, 10.0), (8192, 10.22), (65536, 11.31),
                                               (524288, 14.83)])
    + _rows("json", "allg", 32, 1, "fp32", [(1024, 6.19), (8192, 6.55), (65536, 8.18),
                                           (524288, 23.11)])
    + _rows("permute", "permute", 8, 1, "uint8", [(32 * MiB, 894.24)], op_ranks=2)
    + _rows("show-algorithm", "allr", 16, 1, "fp32", [
        (4, 299.91), (32, 299.69), (512, 299.82), (8192, 299.74), (131072, 574.15),
        (2 * MiB, 686.32), (32 * MiB, 2754.15), (512 * MiB, 9689.51)])
    + _rows("allgatherv", "allgv", 4, 1, "fp16", [(2048, 16.28)])
    + _rows("multistream-0", "allg", 64, 1, "bf16", [
        (1024 << i, t) for i, t in enumerate([101.14, 101.93, 101.45, 101.84, 102.21, 102.36,
                                              103.28, 105.03, 107.37, 110.07, 117.67])],
        status=EXCLUDED, instance="trn2.48xlarge",
        reason="two streams of collectives run at once, each row's time includes the other "
        "stream's contention, which the model does not describe; no instance type given "
        "(64 ranks on one instance: assumed trn2.48xlarge)")
    + _rows("multistream-1", "allg", 64, 1, "fp32", [
        (1024, t) for t in [257.65, 258.55, 257.86, 258.51, 259.04, 257.72, 258.24, 258.33,
                            258.95, 259.09, 260.6]],
        status=EXCLUDED, instance="trn2.48xlarge",
        reason="the second of two concurrent streams (see multistream-0)")
    + _rows("multi-instance", "allr", 64, 2, "fp32", [
        (8 << i, t) for i, t in enumerate([
            520, 520, 523, 525, 553, 709, 782, 840, 881, 916, 1013, 1031, 1174, 1315, 1315,
            1311, 1312, 1328, 1329, 1378, 1419, 2138, 2711, 3963, 6279, 11954, 21803,
            41806])])
    + _rows("alltoallv", "alltoallv", 2, 2, "fp32", [(1048608, 955.05)], status=EXCLUDED,
            reason="variable send counts (512 and 1024 elements): the model's all_to_all "
            "sends equal blocks; no instance type given (assumed trn1.32xlarge)")
)
