"""`nki.typing`: annotations of kernel tensor parameters, `nt.tensor[128, 512]`.

The NKI release notes introduce the module "for type-annotating kernel tensor parameters"
(aws-neuron-sdk `nki/migration/index.rst`, "nki.typing module"); a kernel called here checks
that an annotated argument has the declared shape.
"""

from __future__ import annotations


class TensorAnnotation:
    def __init__(self, shape):
        self.shape = tuple(int(s) for s in shape) if shape is not None else None

    def __repr__(self):
        return f"nt.tensor[{', '.join(map(str, self.shape))}]" if self.shape else "nt.tensor"


class _TensorType(TensorAnnotation):
    """`nt.tensor` (any shape) and `nt.tensor[d0, d1, ...]`."""

    def __getitem__(self, shape) -> TensorAnnotation:
        return TensorAnnotation(shape if isinstance(shape, tuple) else (shape,))


tensor = _TensorType(None)
