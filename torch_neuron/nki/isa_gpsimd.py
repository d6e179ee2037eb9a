"""GpSimd Engine data-movement instructions of `nki.isa`: `nc_n_gather` (within each
partition), `local_gather` (across the 16 partitions of each GpSimd core),
`nonzero_with_count` (NeuronCore-v3 and newer) and `sequence_bounds`.

Signatures and rules from the current release's stub, aws-neuron-sdk `nki/api/nki/isa/__init__.py`
(the snapshot docs/nki.md names); each instruction checks its operands, computes inside the
thunk predict-only skips (Note [Predict-only instructions]) and appends its record. Their
pages publish no cost: timing.py costs each as a GpSimd pass over its output (an assumption).
"""

from __future__ import annotations

import numpy as np

from torch_neuron.nki.errors import DtypeError, MemorySpaceError, ShapeError
from torch_neuron.nki.instruction import _Instruction
from torch_neuron.nki.tensor import MemoryRegion

# "Each of the eight GpSimd cores ... connects to 16 contiguous SBUF partitions" (local_gather
# and nonzero_with_count docstrings).
_CORE_PARTITIONS = 16
_LOCAL_GATHER_RUNS = (1, 2, 4, 8, 16, 32)   # num_elem_per_idx values local_gather accepts
_LOCAL_GATHER_MAX_INDICES = 4096            # indices per GpSimd core


def _sbuf_only(ins: _Instruction):
    for role, t in ins.operands:
        if t.buffer is not MemoryRegion.sbuf:
            raise ins.error(MemorySpaceError, f"{role} {t!r} is in {t.buffer.space}; "
                                              f"{ins.name} reads and writes SBUF only")


def nc_n_gather(dst, data, indices, name=None):
    """dst[p, j] = data[p] (free dims flattened) at indices[p, j], partition by partition."""
    ins = _Instruction("nc_n_gather")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.tile(indices, "indices")
    _sbuf_only(ins)
    P, F = ins.pf(data)
    if ins.pf(indices)[0] != P or ins.pf(dst)[0] != P:
        raise ins.error(ShapeError, f"data {data.shape}, indices {indices.shape} and dst "
                                    f"{dst.shape} must have the same partitions")
    if dst.free_size != indices.free_size:
        raise ins.error(ShapeError, f"dst {dst.shape} must have as many elements per partition "
                                    f"as indices {indices.shape}")
    if indices.dtype != "uint32":
        raise ins.error(DtypeError, f"indices are {indices.dtype}; they must be uint32")
    ins.same_dtype(dst, "dst", data, "data", "a gather keeps the dtype")
    x = ins.values(data, "data")
    idx = ins.values(indices, "indices")

    def gathered():
        where = idx.reshape(P, -1).astype(np.int64)
        if where.size and (where.min() < 0 or where.max() >= F):
            raise ins.error(ShapeError, f"an index is outside [0, {F}), the elements of a "
                                        f"partition of data")
        return np.take_along_axis(x.reshape(P, F), where, axis=1)

    ins.write(dst, gathered)
    ins.record("GpSimdE")


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None,
                 name=None):
    """Each GpSimd core reads the indices of its 16 partitions of `index`, flattened partition
    first, keeps the first num_valid_indices, and every one of its 16 partitions gathers, from
    its own elements of src_buffer, num_elem_per_idx contiguous elements at each index (an
    element offset), in order. As the numpy reference of the release's example
    (aws-neuron-sdk nki/test/test_nki_isa_local_gather.py) computes it."""
    ins = _Instruction("local_gather")
    ins.tile(dst, "dst", read=False)
    ins.tile(src_buffer, "src_buffer")
    ins.tile(index, "index")
    _sbuf_only(ins)
    P, F = ins.pf(src_buffer)
    if index.shape[0] != P or P % _CORE_PARTITIONS:
        raise ins.error(ShapeError, f"src_buffer {src_buffer.shape} and index {index.shape} "
                                    f"must have the same partitions, a multiple of 16")
    if num_elem_per_idx not in _LOCAL_GATHER_RUNS:
        raise ins.error(ShapeError, f"num_elem_per_idx={num_elem_per_idx} must be one of "
                                    f"{_LOCAL_GATHER_RUNS}")
    if index.dtype != "uint16":
        raise ins.error(DtypeError, f"index is {index.dtype}; it must be uint16")
    ins.same_dtype(dst, "dst", src_buffer, "src_buffer", "no cast is allowed")
    per_core = index.free_size * _CORE_PARTITIONS
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < valid <= min(per_core, _LOCAL_GATHER_MAX_INDICES):
        raise ins.error(ShapeError, f"{valid} indices per GpSimd core; at most "
                                    f"{min(per_core, _LOCAL_GATHER_MAX_INDICES)}")
    if ins.pf(dst) != (P, valid * num_elem_per_idx):
        # The release notes' known issue: num_elem_per_idx is honoured only when
        # num_valid_indices * num_elem_per_idx == dst.size / dst.shape[0]; required here.
        raise ins.error(ShapeError, f"dst {dst.shape} must have {P} partitions of "
                                    f"{valid * num_elem_per_idx} elements (num_valid_indices "
                                    f"x num_elem_per_idx)")
    x = ins.values(src_buffer, "src_buffer")
    idx = ins.values(index, "index")
    cores = P // _CORE_PARTITIONS

    def gather(src):
        src = src.reshape(P, F)
        out = np.empty((P, valid * num_elem_per_idx), dtype=src.dtype)
        run = np.arange(num_elem_per_idx)
        for c in range(cores):
            rows = slice(c * _CORE_PARTITIONS, (c + 1) * _CORE_PARTITIONS)
            starts = idx.reshape(P, -1)[rows].flatten(order="F")[:valid].astype(np.int64)
            where = (starts[:, None] + run[None, :]).reshape(-1)
            if where.min() < 0 or where.max() >= F:
                raise ins.error(ShapeError, f"an index reaches past the {F} elements of a "
                                            f"partition of src_buffer")
            out[rows] = src[rows][:, where]
        return out

    if ins.unwritten:
        # Note [Results of unwritten memory]: an element gathered from one never written is
        # itself unwritten (AWS's moe_tkg gathers from a tile it wrote 2 partitions of).
        # Predict-only knows no indices: what it gathers counts as written.
        (_, _, mask), = ins.unwritten
        ins.gather_unwritten = gather(mask) if ins.compute else \
            np.zeros((P, valid * num_elem_per_idx), dtype=bool)
    ins.write(dst, lambda: gather(x))
    ins.record("GpSimdE")


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """On partitions 0, 16, ..., 112: the positions of src's nonzero elements (plus
    index_offset), then padding_val, then their count in the extra last element."""
    ins = _Instruction("nonzero_with_count")
    ins.needs_core(3)
    ins.tile(dst, "dst", read=False)
    ins.tile(src, "src")
    _sbuf_only(ins)
    P, F = ins.pf(src)
    if ins.pf(dst) != (P, F + 1):
        raise ins.error(ShapeError, f"dst {dst.shape} must have {P} partitions of {F + 1} "
                                    f"elements (src's {F} and the count)")
    if src.dtype not in ("float32", "int32") or dst.dtype != "int32":
        raise ins.error(DtypeError, f"src is {src.dtype} and dst {dst.dtype}; src must be "
                                    f"float32 or int32 and dst int32")
    # Only each GpSimd core's first partition is read and written; the others keep their values.
    x = ins.values(src[0:P:_CORE_PARTITIONS], "src").reshape(-1, F)
    for p in range(0, P, _CORE_PARTITIONS):
        def found(p=p):
            hits = np.flatnonzero(x[p // _CORE_PARTITIONS] != 0)
            out = np.full(F + 1, int(padding_val), dtype=np.int64)
            out[:hits.size] = hits + int(index_offset)
            out[F] = hits.size
            return out
        ins.write(dst[p:p + 1], found)
    ins.record("GpSimdE")


def sequence_bounds(dst, segment_ids, name=None):
    """dst[p, 0, i], dst[p, 1, i] = the first index of element i's segment and one past its
    last; padding (segment ID 0) gets n and -1, n the elements per partition (the docstring,
    and its NumPy reference in aws-neuron-sdk nki/test/test_nki_isa_sequence_bounds.py)."""
    ins = _Instruction("sequence_bounds")
    ins.tile(dst, "dst", read=False)
    ins.tile(segment_ids, "segment_ids")
    _sbuf_only(ins)
    P, n = ins.pf(segment_ids)
    if ins.pf(dst) != (P, 2 * n):
        raise ins.error(ShapeError, f"dst {dst.shape} must be [{P}, 2, {n}]: a start and an "
                                    f"end per segment ID")
    for role, t in (("segment_ids", segment_ids), ("dst", dst)):
        if t.dtype not in ("float32", "int32"):
            raise ins.error(DtypeError, f"{role} is {t.dtype}; sequence_bounds takes float32 or "
                                        f"int32")
    ids = ins.values(segment_ids, "segment_ids")

    def bounds():
        x = ids.reshape(P, n)
        index = np.arange(n)
        # A segment starts where the ID differs from the one before, ends where it differs
        # from the one after; a running maximum / minimum carries the bound along it.
        starts = np.ones((P, n), dtype=bool)
        starts[:, 1:] = x[:, 1:] != x[:, :-1]
        ends = np.ones((P, n), dtype=bool)
        ends[:, :-1] = x[:, :-1] != x[:, 1:]
        first = np.maximum.accumulate(np.where(starts, index, 0), axis=1)
        last = np.minimum.accumulate(np.where(ends, index + 1, n)[:, ::-1], axis=1)[:, ::-1]
        padding = x == 0
        return np.stack([np.where(padding, n, first), np.where(padding, -1, last)], axis=1)

    ins.write(dst, bounds)
    ins.record("GpSimdE")


# topk's bounds (its docstring): 8 <= n < 65536, 1 <= K < 32768.
_TOPK_N = (8, 65536)
_TOPK_K = (1, 32768)


def topk(val_dst, idx_dst, src, n, name=None):
    """The K largest of each 16-partition group's n-element snake and their snake positions
    (the docstring: "elements 0..15 fill partitions 0..15 of free-dim column 0, elements 16..31
    fill column 1"), K the free size of val_dst. The results are written as a snake too:
    result i (ascending) at partition i % 16, column i // 16 of the group, the layout AWS's
    gpsimd_topk kernel de-snakes (nki-library, experimental/topk/gpsimd_topk.py: "the topk
    leaves the unwritten snake positions [k, k_pad)" at "val_snake[pos % 16, pos // 16]"; it
    trusts the set, not the hardware's order, which the docstring calls ascending)."""
    ins = _Instruction("topk")
    ins.tile(val_dst, "val_dst", read=False)
    ins.tile(idx_dst, "idx_dst", read=False)
    ins.tile(src, "src")
    _sbuf_only(ins)
    P, F = ins.pf(src)
    K = val_dst.free_size
    n = int(n)
    if src.dtype != "bfloat16" or val_dst.dtype != "bfloat16" or idx_dst.dtype != "uint32":
        raise ins.error(DtypeError, f"src {src.dtype}, val_dst {val_dst.dtype}, idx_dst "
                                    f"{idx_dst.dtype}: topk takes bfloat16 values and uint32 "
                                    f"indices")
    if P % _CORE_PARTITIONS or ins.pf(val_dst) != (P, K) or ins.pf(idx_dst) != (P, K):
        raise ins.error(ShapeError, f"src {src.shape}, val_dst {val_dst.shape}, idx_dst "
                                    f"{idx_dst.shape}: the same partitions, a multiple of 16, "
                                    f"and val_dst and idx_dst [partitions, K]")
    if not (_TOPK_N[0] <= n < _TOPK_N[1] and _TOPK_K[0] <= K < _TOPK_K[1] and K <= n
            and F * _CORE_PARTITIONS >= n):
        raise ins.error(ShapeError, f"n={n}, K={K}, src free size {F}: topk needs "
                                    f"8 <= n < 65536, 1 <= K < 32768, K <= n and src holding "
                                    f"ceil(n / 16) columns")
    columns = -(-K // _CORE_PARTITIONS)
    groups = P // _CORE_PARTITIONS
    x = ins.values(src, "src")

    def selected():
        snake = x.reshape(groups, _CORE_PARTITIONS, F).transpose(0, 2, 1).reshape(groups, -1)
        snake = snake[:, :n].astype(np.float32)
        top = np.argsort(-snake, axis=1, kind="stable")[:, :K][:, ::-1]   # ascending values
        values = np.take_along_axis(snake, top, axis=1)
        return values, top

    def as_snake(a):
        """[groups, K] results into each group's [16, ceil(K/16)] snake of dst's layout."""
        out = np.zeros((groups, columns * _CORE_PARTITIONS), dtype=a.dtype)
        out[:, :K] = a
        return out.reshape(groups, columns, _CORE_PARTITIONS).transpose(0, 2, 1).reshape(
            P, columns)

    result = {}

    def pick(which):
        if not result:
            result["values"], result["index"] = selected()
        return as_snake(result[which])

    # Only snake positions [0, K) are written: the first ceil(K / 16) columns, less the
    # positions past K in the last one; the rest keep what they held.
    position = np.arange(columns)[None, :] * _CORE_PARTITIONS + \
        (np.arange(P) % _CORE_PARTITIONS)[:, None]
    for dst, which in ((val_dst, "values"), (idx_dst, "index")):
        cols = dst.reshape((P, K))[:, 0:columns]
        kept = np.array(cols._data, copy=True), np.array(cols._written, copy=True)
        ins.write(cols, lambda which=which: pick(which))
        if (position >= K).any():
            cols._data[...] = np.where(position >= K, kept[0], cols._data)
            cols._written[...] = np.where(position >= K, kept[1], cols._written)
    ins.record("GpSimdE", elements=4 * n + K)
