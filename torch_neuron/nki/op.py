"""`nki_op`: an NKI kernel call as a PyTorch operator, as TorchNeuron's `@nki_op` registers one
(aws-neuron-sdk nki/get-started/about/index.rst: `@nki_op("mylib::my_op", mutates_args={})` on a
function that allocates its outputs and calls @nki.jit kernels on them).

It is `torch.library.custom_op`: the returned op has `register_autograd` (forward and backward
kernels in training), `register_fake` (the output shapes torch.compile traces with) and
`mutates_args`. Under torch.compile(backend="neuron") the op stays one opaque node: Inductor
calls it as an extern kernel, and each kernel it calls is one launch that joins the graph's
schedule as an op ordering against the rest (Note [NKI kernels on the stream] in kernel.py).
"""

from __future__ import annotations


def nki_op(name: str, fn=None, *, mutates_args=(), device_types=None, schema=None):
    """`@nki_op("lib::name", mutates_args={})`: registers `fn` (type-annotated, as
    torch.library.custom_op requires) as the operator `torch.ops.lib.name`."""
    import torch

    if not isinstance(name, str) or "::" not in name:
        raise ValueError(f"nki_op name {name!r} must be 'namespace::op_name', e.g. "
                         f"'mylib::my_op'")

    def register(f):
        return torch.library.custom_op(name, f, mutates_args=mutates_args,
                                       device_types=device_types, schema=schema)

    return register if fn is None else register(fn)
