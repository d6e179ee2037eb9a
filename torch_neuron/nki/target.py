"""NeuronCore versions a kernel can target, with the on-chip limits the simulator enforces.

Sources (aws-neuron-sdk, `nki/guides/architecture/`): NeuronCore-v2 (Trn1/Inf2) has a 24 MiB
SBUF (128 partitions of 192 KiB) and a 2 MiB PSUM (128 partitions of 16 KiB), a PSUM bank
holding 512 fp32 elements per partition (`trainium_inferentia2_arch.rst`, "NeuronCore-v2
consists of two software-managed on-chip SRAMs" and the matmul tile-size rules): 2 KiB, so 8
banks per partition. NeuronCore-v3 (Trn2): SBUF 28 MiB (128 x 224 KiB), PSUM unchanged
(`trainium2_arch.rst`). NeuronCore-v4 (Trn3): SBUF 32 MiB (128 x 256 KiB), PSUM unchanged
(`trainium3_arch.rst`). Tile limits (128 partitions, stationary free size <= 128, moving free
size <= 512 on v2/v3 and up to the whole PSUM on v4, double-row FP8 from v3, LNC=2 from v3) are
in the `nc_matmul` docstring of `nki/api/nki/isa/__init__.py` and `nki/get-started/about/lnc.rst`.
"""

from __future__ import annotations

import dataclasses

KIB = 1024


@dataclasses.dataclass(frozen=True)
class Target:
    name: str                 # "trn1" | "trn2" | "trn3"
    nc_version: int           # 2, 3, 4 (nki.isa.nc_version values)
    core: str                 # "NeuronCore-v2" ...
    sbuf_partition_bytes: int
    psum_partition_bytes: int = 16 * KIB
    psum_bank_bytes: int = 2 * KIB
    partitions: int = 128
    gemm_stationary_fmax: int = 128
    gemm_moving_fmax: int = 512      # the tile_size constant (one fp32 PSUM bank)
    moving_fmax_fp32_dst: int = 512  # what nc_matmul accepts (v4: the whole PSUM)
    bn_stats_fmax: int = 512         # nki.isa.bn_stats docstring
    vector_transpose_max: int = 32   # nki.isa.nc_transpose docstring: VectorE up to 32x32
    double_row_fp8: bool = False
    max_lnc: int = 1
    # DMA engines per NeuronCore: 16 (trainium_inferentia2_arch.rst, data movement section;
    # trainium2_arch.rst). Instruction records name a queue by round robin over them.
    dma_queues: int = 16

    @property
    def psum_banks(self) -> int:
        return self.psum_partition_bytes // self.psum_bank_bytes


TARGETS = {
    "trn1": Target("trn1", 2, "NeuronCore-v2", 192 * KIB),
    "trn2": Target("trn2", 3, "NeuronCore-v3", 224 * KIB, double_row_fp8=True, max_lnc=2),
    "trn3": Target("trn3", 4, "NeuronCore-v4", 256 * KIB, moving_fmax_fp32_dst=4096,
                   double_row_fp8=True, max_lnc=2),
}
_ALIASES = {"inf2": "trn1", "gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}
_BY_CORE = {t.core: t.name for t in TARGETS.values()}


def resolve(platform_target) -> Target:
    """A name accepted by NKI's platform_target; `None` is NEURON_PLATFORM_TARGET_OVERRIDE
    when set (as in AWS's simulator), else the NeuronCore of the simulated instance
    (TORCH_NEURON_INSTANCE; the default trn2.3xlarge has NeuronCore-v3)."""
    if platform_target is None:
        from torch_neuron import _C

        override = _C._setting("NEURON_PLATFORM_TARGET_OVERRIDE")
        if override:
            name = _ALIASES.get(override, override)
            if name not in TARGETS:
                raise ValueError(f"NEURON_PLATFORM_TARGET_OVERRIDE={override!r} is not an NKI "
                                 f"target: use one of {', '.join(list(TARGETS) + list(_ALIASES))}")
            return TARGETS[name]
        core = _C._instance_info()["core_version"]
        return TARGETS[_BY_CORE.get(core, "trn2")]
    if isinstance(platform_target, Target):
        return platform_target
    name = _ALIASES.get(str(platform_target), str(platform_target))
    if name not in TARGETS:
        raise ValueError(f"unknown NKI platform_target {platform_target!r}: use one of "
                         f"{', '.join(list(TARGETS) + list(_ALIASES))}")
    return TARGETS[name]
