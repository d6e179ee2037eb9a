"""Errors of the NKI simulator: each names the hardware rule, the values and the kernel line.

`NkiValidationError` is the name AWS's `nki.isa` gives the error raised "when hardware
constraints are violated"; every rule has a subclass so tests and users can catch one kind.
"""

from __future__ import annotations

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def kernel_source_line() -> str:
    """`file:line` of the innermost frame outside this package: the kernel's line (or that of a
    helper the kernel called) that issued the current instruction."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>:0"


class NkiValidationError(AssertionError):
    """A kernel broke a rule of the hardware or of the NKI API. Also an AssertionError: AWS's
    simulator reports these rules as assertions (nki/guides/nki_simulator.rst: "AssertionError:
    tensor_tensor data1 partition dimension 256 exceeds maximum 128"), so tests written
    against it catch ours."""

    rule = "NKI rule"

    def __init__(self, message: str, instruction: str | None = None,
                 source: str | None = None):
        self.source = source or kernel_source_line()
        self.instruction = instruction
        self.detail = message
        where = f"{instruction}: " if instruction else ""
        super().__init__(f"{self.source}: {where}{self.rule}: {message}")


class PartitionLimitError(NkiValidationError):
    rule = "partition dimension exceeds the 128 SBUF/PSUM partitions"


class TileSizeError(NkiValidationError):
    rule = "tile size limit"


class CapacityError(NkiValidationError):
    rule = "on-chip memory capacity per partition"


class PsumBankError(NkiValidationError):
    rule = "PSUM bank"


class DtypeError(NkiValidationError):
    rule = "dtype rule"


class MemorySpaceError(NkiValidationError):
    rule = "memory space rule"


class ShapeError(NkiValidationError):
    rule = "shape rule"


class OutOfBoundsError(NkiValidationError, IndexError):
    rule = "out-of-bounds access"


class UninitializedReadError(NkiValidationError):
    rule = "read of memory never written"


class ReleasedTileError(NkiValidationError):
    rule = "use of a tile after its scope ended"


class UnsupportedError(NkiValidationError, NotImplementedError):
    rule = "not supported by this simulator"
