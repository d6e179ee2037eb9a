"""`nki.isa.constants`: the enums of `nki.isa` under the module path AWS's NKI package also
gives them (`from nki.isa.constants import oob_mode`, as aws-neuron/nki-library's kernels
import them). The same objects as `nki.isa.oob_mode` and the others."""

from torch_neuron.nki.instruction import (  # noqa: F401
    dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd)
