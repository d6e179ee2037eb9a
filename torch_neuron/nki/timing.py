"""A kernel run's instruction records, scheduled by trnsim (Note [Kernel schedule] in
third_party/trnsim/include/trnsim/kernel_schedule.h).

Note [Records to trnsim]
trnsim owns every cost: this module only translates each InstructionRecord into the facts the
ISA cost formulas take (Note [ISA instruction costs] in trnsim/isa_cost.h): the instruction
kind, its engine, the partitions and elements per partition of the operand the formula names,
the dtypes and ALU operator its conditions mention, and for a dma_copy its bytes and
descriptors; plus its read and written regions. The records go over in one call, as two int64
arrays (one row per instruction, one per region), so timing 100,000 instructions costs one
Python loop and one C++ call, not a call per instruction. Before that, the instructions the
compiler would not emit (repeats of earlier ones) are left out (Note [Redundant instructions]
in redundancy.py): what the schedule gets is the program the hardware runs.
"""

from __future__ import annotations

import numpy as np

from torch_neuron.nki import dtypes, redundancy
from torch_neuron.nki.errors import UnsupportedError

KINDS = {name: i for i, name in enumerate((
    "dma_copy", "nc_matmul", "nc_transpose", "tensor_copy", "tensor_tensor", "tensor_scalar",
    "tensor_reduce", "tensor_partition_reduce", "activation", "activation_reduce", "memset",
    "iota", "affine_select", "bn_stats", "bn_aggr", "select_reduce", "tensor_tensor_scan",
    "dropout", "reciprocal", "core_barrier"))}
ENGINES = ("TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA")
_ENGINE_CODE = {e: i for i, e in enumerate(ENGINES)}
_DTYPE_CODE = {"float32": 1, "bfloat16": 2, "float16": 3, "tfloat32": 5}
_OP_CODE = {"add": 1, "subtract": 2, "multiply": 3, "maximum": 4}
_MEMORY = {"private_hbm": 0, "hbm": 0, "shared_hbm": 0, "sbuf": 1, "psum": 2}
# The operand whose elements per partition each formula counts (isa_cost.h); others: "data".
_FORMULA_OPERAND = {"dma_copy": "dst", "nc_matmul": "moving", "tensor_copy": "src",
                    "tensor_tensor": "data1", "memset": "dst", "iota": "dst",
                    "affine_select": "on_true_tile", "select_reduce": "on_true",
                    "tensor_tensor_scan": "data0"}
_DOUBLE_ROW, _PSUM_AND_SBUF, _ZERO_FILL, _STRIDED = 1, 2, 4, 8
_ENGINE_CHOICES_SHIFT = 8  # flags bits from here on: the engines it may run on, 1 << code each
# Note [Strided access] (trnsim isa_cost.h): an on-chip access whose innermost free-dimension
# stride exceeds this many bytes gets half of an SBUF/PSUM interface's bandwidth on
# NeuronCore-v2 (trnsim decides per chip whether it applies).
_FULL_RATE_STRIDE_BYTES = 16
# Instructions costed with another instruction's formula. scalar_tensor_tensor: its page says
# it has "approximately the same latency as a regular tensor_tensor instruction". The others
# are assumptions (their pages publish no cost): tensor_scalar_reduce as tensor_scalar (the
# page's "small additional performance cost" of the reduction is not quantified),
# tensor_copy_predicated as tensor_copy, max8 as one tensor_reduce pass over its input,
# tensor_scalar_cumulative as tensor_scalar, range_select as select_reduce (a select and a
# reduction in one pass, itself an assumption); exponential and activate2 (NeuronCore-v4, whose
# own costs no page gives) as tensor_scalar and activation. nc_matmul_mx as the nc_matmul of its
# x4 tiles: "An MX matmul with either the MXFP8 or MXFP4 datatype runs at 4x the throughput
# compared to a BF16/FP16 matmul" by contracting 4 values per processing element and cycle
# (trainium3_arch.rst, "Quad-MXFP8/MXFP4 Matmul Performance"), so its cycles are a BF16
# matmul's over the same [K, M] and [K, N] tiles, with 4x the FLOPs; quantize_mx as a
# tensor_copy of its x4 dst: it "can quantize four input elements per partition, per cycle"
# (same page, "MX data-type Quantization"), one x4 element per cycle. The random-number
# instructions (isa_random.py) as a tensor_copy of the tile they write or read on their
# engine: an assumption, their pages publish no cost. topk: its page's "4*n + K GpSIMD Engine
# cycles per partition", as a GpSimd copy of that many elements (the record's `elements`).
# dma_transpose: as the dma_copy of its bytes (isa.dma_transpose says why); dma_compute as a
# dma_copy of its sources' bytes (an assumption, isa_dma_compute.py); sendrecv as a dma_copy of
# its dst (isa_cores.py). nc_stream_shuffle:
# as a tensor_copy of its source, nc_find_index8 and nc_match_replace8 as one tensor_reduce
# pass over their data (as max8), the GpSimd gathers, nonzero_with_count and sequence_bounds
# as a tensor_copy of their output (input for nonzero_with_count) on GpSimd: assumptions,
# their pages publish no cost.
_COST_AS = {"nc_matmul_mx": "nc_matmul", "quantize_mx": "tensor_copy", "topk": "tensor_copy",
            "rng": "tensor_copy", "rand2": "tensor_copy", "set_rng_seed": "tensor_copy",
            "rand_set_state": "tensor_copy", "rand_get_state": "tensor_copy",
            "dma_transpose": "dma_copy", "dma_compute": "dma_copy", "sendrecv": "dma_copy",
            "sendrecv_wait": "core_barrier",
            "nc_stream_shuffle": "tensor_copy",
            "nc_find_index8": "tensor_reduce", "nc_match_replace8": "tensor_reduce",
            "nc_n_gather": "tensor_copy", "local_gather": "tensor_copy",
            "nonzero_with_count": "tensor_copy", "sequence_bounds": "tensor_copy",
            "scalar_tensor_tensor": "tensor_tensor", "tensor_scalar_reduce": "tensor_scalar",
            "tensor_copy_predicated": "tensor_copy", "max8": "tensor_reduce",
            "exponential": "tensor_scalar", "tensor_scalar_cumulative": "tensor_scalar",
            "activate2": "activation", "range_select": "select_reduce"}
_FORMULA_OPERAND.update({"nc_matmul_mx": "moving", "quantize_mx": "dst",
                         "rng": "dst", "rand2": "dst", "set_rng_seed": "src_seeds",
                         "rand_set_state": "src_seeds", "rand_get_state": "dst",
                         "dma_transpose": "dst", "dma_compute": "dst", "sendrecv": "dst",
                         "nc_stream_shuffle": "src",
                         "nc_find_index8": "data", "nc_match_replace8": "data",
                         "nc_n_gather": "dst", "local_gather": "dst",
                         "nonzero_with_count": "src", "sequence_bounds": "dst",
                         "scalar_tensor_tensor": "data", "tensor_copy_predicated": "src",
                         "max8": "src", "exponential": "src",
                         "tensor_scalar_cumulative": "src", "range_select": "on_true_tile"})
_SECOND_INPUT = {"tensor_tensor": "data2", "scalar_tensor_tensor": "operand1"}


def _dtype(name: str) -> int:
    if name.startswith("float8"):
        return 4
    return _DTYPE_CODE.get(name, 0)


def _strided(operand) -> bool:
    """Whether an on-chip operand's innermost free dimension of more than one element steps
    over more than 16 bytes (Note [Strided access])."""
    if operand.space not in ("sbuf", "psum"):
        return False
    for size, stride in zip(reversed(operand.shape[1:]), reversed(operand.strides[1:])):
        if size > 1:
            return abs(stride) * dtypes.resolve(operand.dtype).itemsize > _FULL_RATE_STRIDE_BYTES
    return False


def _role(record, role):
    for o in record.operands:
        if o.role == role:
            return o
    return None


def encode(records, extra_reads=None, extra_writes=None
           ) -> tuple[np.ndarray, np.ndarray, int, float]:
    """(instruction rows, region rows, HBM bytes moved, matmul FLOPs) for _C._nki_schedule;
    `extra_reads`/`extra_writes`: position in `records` -> more regions it reads / writes
    (Note [Redundant instructions])."""
    extra_reads, extra_writes = extra_reads or {}, extra_writes or {}
    rows = np.zeros((len(records), 15), dtype=np.int64)
    regions: list[tuple] = []
    hbm_bytes, flops = 0, 0.0
    for i, r in enumerate(records):
        name = _COST_AS.get(r.name, r.name)
        kind = KINDS.get(name)
        if kind is None:
            raise UnsupportedError(f"{r.source}: no cost model for nisa.{r.name}")
        attrs = dict(r.attrs)
        main = _role(r, _FORMULA_OPERAND.get(r.name, "data")) or r.operands[-1]
        dst = _role(r, "dst") or main
        flags = 0
        in_dtype = _dtype(main.dtype)
        stationary = 0
        if name == "nc_matmul":
            st = _role(r, "stationary")
            stationary = st.elements_per_partition
            if "float32" in (st.dtype, main.dtype):
                in_dtype = 1
            if attrs.get("perf_mode") == "double_row":
                flags |= _DOUBLE_ROW
            flops += 2.0 * st.partitions * st.elements_per_partition * \
                main.elements_per_partition * (4 if r.name == "nc_matmul_mx" else 1)
        elif name == "tensor_tensor":
            other = _role(r, _SECOND_INPUT[r.name])
            if (main.space == "psum") != (other.space == "psum"):
                flags |= _PSUM_AND_SBUF
            if _dtype(other.dtype) != in_dtype:
                in_dtype = 0
        elif r.name == "memset" and attrs.get("zero"):
            flags |= _ZERO_FILL
        if r.engine != "DMA" and any(_strided(o) for o in r.operands):
            flags |= _STRIDED
        for e in attrs.get("engines", ()):
            flags |= 1 << (_ENGINE_CHOICES_SHIFT + _ENGINE_CODE[e])
        nbytes = int(attrs.get("bytes", 0))
        if name == "dma_copy":
            hbm_bytes += nbytes
        op = attrs.get("op") or attrs.get("op0")
        reads = r.reads + tuple(extra_reads.get(i, ()))
        writes = r.writes + tuple(extra_writes.get(i, ()))
        rows[i] = (kind, _ENGINE_CODE[r.engine], r.dma_queue or 0, r.core,
                   main.partitions or 1, int(attrs.get("elements", main.elements_per_partition)),
                   stationary, in_dtype,
                   _dtype(dst.dtype),
                   _OP_CODE.get(op, 0), flags, nbytes, int(attrs.get("descriptors", 0)),
                   len(reads), len(writes))
        for g in reads + writes:
            p0, p1 = g.partitions or (0, 0)
            regions.append((_MEMORY[g.space], g.buffer, p0, p1, g.address[0], g.address[1]))
    region_rows = np.array(regions, dtype=np.int64).reshape(-1, 6)
    return rows, region_rows, hbm_bytes, flops


def schedule(run) -> dict:
    """trnsim's schedule of a KernelRun's records (see _C._nki_schedule for the keys)."""
    from torch_neuron import _C

    records = run.records
    plan = redundancy.find(records)
    position = {index: n for n, index in enumerate(plan.kept)}
    rows, regions, hbm_bytes, flops = encode(
        [records[i] for i in plan.kept],
        {position[i]: g for i, g in plan.reads.items()},
        {position[i]: g for i, g in plan.writes.items()})
    result = _C._nki_schedule(run.target.core, run.target.dma_queues, run.lnc, rows, regions)
    # Back to one entry per record: a dropped instruction takes no time, at the end of the one
    # whose result it repeats.
    kept = np.asarray(plan.kept, dtype=np.int64)
    for key in ("start_ns", "end_ns"):
        full = np.zeros(len(records))
        full[kept] = result[key]
        result[key] = full
    engines = [r.engine for r in records]
    for n, code in zip(plan.kept, result["engines"]):
        engines[n] = ENGINES[int(code)]
    for dropped, index in plan.producer.items():
        result["start_ns"][dropped] = result["end_ns"][dropped] = result["end_ns"][index]
        engines[dropped] = engines[index]
    result["engines"] = engines  # where each record ran (Note [Engine choice])
    result["critical_path"] = [plan.kept[n] for n in result["critical_path"]]
    result["dropped"] = len(plan.producer)
    result["hbm_bytes"], result["flops"] = hbm_bytes, flops
    return result
