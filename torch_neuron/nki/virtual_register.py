"""`nki.isa.VirtualRegister`, on its own so tensor.py (its `.ap(scalar_offset=register)`) and
registers.py (the instructions that set registers) can both use it."""

from __future__ import annotations

from typing import Optional

import numpy as np

from torch_neuron.nki.errors import UnsupportedError


class VirtualRegister:
    """A sequencer register (nki.isa.VirtualRegister): a 32-bit integer."""

    def __init__(self, value: Optional[int] = None, source=None,
                 known: bool = True):
        self._value = None if value is None else int(np.int32(value))
        self._source = source    # the tensor its value was loaded from, if any
        self._known = known and value is not None

    def value(self, what: str) -> int:
        if not self._known:
            if self._source is not None:
                raise UnsupportedError(f"{what}: the register was loaded from {self._source!r}, "
                                       f"whose values predict-only mode does not compute; run "
                                       f"the kernel with execution on")
            raise UnsupportedError(f"{what}: the register was never given a value "
                                   f"(register_move or register_load it first)")
        return self._value

    def __index__(self):
        raise TypeError("a VirtualRegister's value is known only on the device: use it as a "
                        "loop bound (nl.fori_loop, nl.dynamic_range, while reg:) or as a "
                        "scalar_offset, not as a number")

    __int__ = __index__

    # How many times one register may be tested (`while reg:`) before the loop counts as
    # endless: a while_loop's limit (registers.WHILE_LOOP_LIMIT), so a body that never clears
    # its register raises instead of hanging the process.
    TESTS_LIMIT = 1 << 20

    def __bool__(self):
        """`while reg:` ("bare while reg: [is] supported by the parser frontend", the stub's
        VirtualRegister note): the register's value is not zero."""
        self._tests = getattr(self, "_tests", 0) + 1
        if self._tests > self.TESTS_LIMIT:
            raise UnsupportedError(f"a register was tested {self.TESTS_LIMIT} times without "
                                   f"becoming 0: a `while reg:` body must update it "
                                   f"(register_load or register_move)")
        return self.value("while reg:") != 0

    def __repr__(self):
        return f"VirtualRegister({self._value if self._known else '?'})"
