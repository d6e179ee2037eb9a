"""`nki.isa.core_barrier` and `nki.isa.sendrecv`: the two NeuronCores of a Logical NeuronCore
(`kernel[2]`) waiting for and exchanging with each other (Note [Programs that wait for each
other] in cores.py). NeuronCore-v3 and newer, LNC=2 (the release's stub).

Timing. Where the programs meet, each gets a `core_barrier` record (an exchange's is named
`sendrecv_wait`): trnsim starts every program's next phase when the slowest has finished the
previous one (Note [Core barriers] in trnsim's kernel_schedule.h). An exchange then moves its
`dst` bytes as one DMA per core.
"""

from __future__ import annotations

import numpy as np

from torch_neuron.nki.errors import NkiValidationError, ShapeError, TileSizeError
from torch_neuron.nki.instruction import _Instruction
from torch_neuron.nki.instruction import engine as _engine
from torch_neuron.nki.instruction import dma_engine as _dma_engine

_CORES = (0, 1)   # "Currently only cores=(0, 1) is supported"
# gpsimd_dma's limit on bytes per partition, by element size (sendrecv docstring)
_GPSIMD_DMA_MAX_BYTES = {4: 1024, 2: 512, 1: 256}


def _lnc2(ins: _Instruction) -> None:
    ins.needs_core(3)
    if ins.run.lnc != 2:
        raise ins.error(NkiValidationError, f"nisa.{ins.name} synchronizes the two cores of an "
                                            f"LNC=2 launch: call the kernel as kernel[2](...)")


def core_barrier(data, cores, engine=_engine.gpsimd, name=None):
    ins = _Instruction("core_barrier")
    _lnc2(ins)
    if tuple(cores) != _CORES:
        raise ins.error(NkiValidationError, f"cores={tuple(cores)}: only (0, 1) is supported")
    ins.tile(data, "data", on_chip=False, spaces=("shared_hbm",))
    eng = ins.engine(engine, ("TensorE", "VectorE", "ScalarE", "GpSimdE"), "GpSimdE")

    def joined(group):
        for p in sorted(group):
            group[p].record(eng, core=p)

    ins.run.cores.meet("core_barrier", _CORES, ins, ins.source, joined)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=_dma_engine.dma,
             name=None):
    ins = _Instruction("sendrecv")
    _lnc2(ins)
    ins.tile(src, "src", spaces=("sbuf",))
    ins.tile(dst, "dst", spaces=("sbuf",), read=False)
    for role, rank in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if int(rank) not in _CORES:
            raise ins.error(NkiValidationError, f"{role}={rank}: must be 0 or 1")
    ins.same_dtype(src, "src", dst, "dst", "they must match")
    if src.shape != dst.shape:
        raise ins.error(ShapeError, f"src {src.shape} and dst {dst.shape} must have the same "
                                    f"shape")
    if dma_engine == _dma_engine.gpsimd_dma:
        limit = _GPSIMD_DMA_MAX_BYTES.get(src.dt.itemsize)
        if limit is not None and src.free_size * src.dt.itemsize > limit:
            raise ins.error(TileSizeError, f"{src.free_size * src.dt.itemsize} bytes per "
                                           f"partition; gpsimd_dma moves at most {limit}")
    # Unwritten elements travel as unwritten (Note [Results of unwritten memory]): AWS's
    # attention_tkg exchanges a padded buffer whose padding it never reads.
    src_written = np.array(src._written, copy=True)
    values = ins.values(src, "src") if src_written.all() else src._data

    def exchange(group):
        for p, (_, _, _, _, frm, _) in group.items():
            if group[frm][3] != p:
                raise ins.error(NkiValidationError,
                                f"program {p} receives from {frm}, which sends to "
                                f"{group[frm][3]}: the pair's ranks must match")
        sent = {p: (np.array(v) if i.compute else v) for p, (i, v, _, _, _, _) in group.items()}
        for p in sorted(group):
            group[p][0].record("GpSimdE", core=p, name="sendrecv_wait")
        for p in sorted(group):
            i, _, d, _, frm, _ = group[p]
            i.write(d, sent[frm])
            d._written[...] &= group[frm][5].reshape(d.shape)
            nbytes = d.size * d.dt.itemsize
            run = min(d.contiguous_bytes(), group[p][0].operands[0][1].contiguous_bytes())
            i.record("DMA", core=p, bytes=nbytes, descriptor_bytes=run,
                     descriptors=-(-nbytes // run))

    ins.run.cores.meet(f"sendrecv on pipe {pipe_id}", _CORES,
                       (ins, values, dst, int(send_to_rank), int(recv_from_rank), src_written),
                       ins.source,
                       exchange)
