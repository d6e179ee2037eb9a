"""The operators of `nki.language`: what an `op=` argument names and how it computes.

Each operator is one object: `nl.add` is both the value passed as `op=nl.add` to an `nki.isa`
instruction and the function `nl.add(x, y)` that issues an instruction and returns a new tile
(`nki.language` binds the call; this module only describes the math). Kinds follow the tables of
aws-neuron-sdk `nki/api/nki.api.shared.rst`: "bitvec" and "arithmetic" ALU operators (with the
legal reduction ones marked), unary arithmetic ALU operators, and Scalar Engine activation
functions. Math is NumPy in float32 (the engines compute in float32, same page); activation
functions are evaluated exactly, not with the Scalar Engine's piece-wise polynomials.
"""

from __future__ import annotations

import math

import numpy as np


def _erf(x):
    import torch

    return torch.erf(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))).numpy()


class Operator:
    def __init__(self, name: str, fn, *, alu: str | None = None, reducible: bool = False,
                 activation: bool = False, arity: int = 2, identity=None):
        self.name, self.fn, self.alu, self.reducible = name, fn, alu, reducible
        self.activation, self.arity, self.identity = activation, arity, identity
        self._call = None  # set by nki.language: the tile-level function

    def __call__(self, *args, **kwargs):
        if self._call is None:
            raise TypeError(f"nl.{self.name} is called through nki.language")
        return self._call(*args, **kwargs)

    def __repr__(self):
        return f"nl.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def bitvec(self) -> bool:
        return self.alu == "bitvec"


def _by_name(name):
    return OPERATORS[name]


def _binary(name, fn, alu="arith", reducible=False, identity=None):
    return Operator(name, fn, alu=alu, reducible=reducible, identity=identity)


def _cmp(fn):
    return lambda a, b: fn(a, b).astype(np.float32)


def _abs_max(a, b):
    return np.where(np.abs(a) > np.abs(b), a, b)


def _abs_min(a, b):
    return np.where(np.abs(a) < np.abs(b), a, b)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


# GELU's sigmoid approximation, x * sigmoid(1.702 x) (Hendrycks and Gimpel, "Gaussian Error
# Linear Units", arXiv:1606.08415, section 2), and the derivatives the activation table lists
# (aws-neuron-sdk `nki/api/nki.api.shared.rst`), written out from their functions.
_GELU_SIGMOID_SLOPE = 1.702


def _gelu_sigmoid(x):
    return x * _sigmoid(_GELU_SIGMOID_SLOPE * x)


def _gelu_sigmoid_dx(x):
    s = _sigmoid(_GELU_SIGMOID_SLOPE * x)
    return s + _GELU_SIGMOID_SLOPE * x * s * (1.0 - s)


def _gelu_dx(x):
    # d/dx x * Phi(x) = Phi(x) + x * phi(x)
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _silu_dx(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _erf_dx(x):
    return 2.0 / math.sqrt(math.pi) * np.exp(-x * x)


def _act(name, fn, alu=None):
    return Operator(name, fn, alu=alu, activation=True, arity=1)


_ALL = [
    # bitvec ALU operators (integer bit patterns)
    _binary("bitwise_and", np.bitwise_and, "bitvec", True),
    _binary("bitwise_or", np.bitwise_or, "bitvec", True),
    _binary("bitwise_xor", np.bitwise_xor, "bitvec", True),
    _binary("left_shift", np.left_shift, "bitvec"),
    _binary("right_shift", np.right_shift, "bitvec"),
    Operator("invert", np.invert, alu="bitvec", arity=1),
    # arithmetic ALU operators
    _binary("add", np.add, reducible=True, identity=0.0),
    _binary("subtract", np.subtract, reducible=True),
    _binary("multiply", np.multiply, reducible=True, identity=1.0),
    _binary("divide", np.divide),
    _binary("maximum", np.maximum, reducible=True, identity=-np.inf),
    _binary("minimum", np.minimum, reducible=True, identity=np.inf),
    _binary("equal", _cmp(np.equal)),
    _binary("not_equal", _cmp(np.not_equal)),
    _binary("greater", _cmp(np.greater)),
    _binary("greater_equal", _cmp(np.greater_equal)),
    _binary("less", _cmp(np.less)),
    _binary("less_equal", _cmp(np.less_equal)),
    _binary("logical_and", _cmp(np.logical_and), reducible=True),
    _binary("logical_or", _cmp(np.logical_or), reducible=True),
    _binary("logical_xor", _cmp(np.logical_xor), reducible=True),
    _binary("power", np.power),
    _binary("abs_max", _abs_max),
    _binary("abs_min", _abs_min),
    _binary("fmod", np.fmod),
    _binary("mod", np.mod),
    # no operation: the data passes through (activate2's tensor-scalar stages)
    _binary("bypass", lambda a, b: a),
    # unary arithmetic ALU operators that are also activation functions
    _act("abs", np.abs, "arith"),
    _act("square", np.square, "arith"),
    _act("relu", lambda x: np.maximum(x, 0.0), "arith"),
    # PReLU: x, or relu_param * x below 0 (activate2's "parameterized activation functions
    # (e.g., PReLU)"); without a parameter (activation, or relu_param=0) it is relu.
    _act("prelu", lambda x: np.maximum(x, 0.0)),
    _act("rsqrt", lambda x: 1.0 / np.sqrt(x), "arith"),
    _act("reciprocal", lambda x: 1.0 / x, "arith"),
    # activation functions (Scalar Engine)
    _act("copy", lambda x: x),
    _act("sigmoid", _sigmoid),
    _act("gelu", _gelu),
    _act("gelu_dx", _gelu_dx),
    _act("gelu_apprx_tanh", _gelu_tanh),
    _act("gelu_apprx_sigmoid", _gelu_sigmoid),
    _act("gelu_apprx_sigmoid_dx", _gelu_sigmoid_dx),
    _act("silu", lambda x: x * _sigmoid(x)),
    _act("silu_dx", _silu_dx),
    _act("tanh", np.tanh),
    _act("softplus", _softplus),
    _act("mish", lambda x: x * np.tanh(_softplus(x))),
    _act("erf", _erf),
    _act("erf_dx", _erf_dx),
    _act("exp", np.exp),
    _act("log", np.log),
    _act("sin", np.sin),
    _act("arctan", np.arctan),
    _act("sqrt", np.sqrt),
    _act("sign", np.sign),
    # unary operators that are neither (nl functions built from other instructions)
    Operator("negative", np.negative, arity=1),
    Operator("cos", np.cos, arity=1),
    Operator("tan", np.tan, arity=1),
    Operator("ceil", np.ceil, arity=1),
    Operator("floor", np.floor, arity=1),
    Operator("trunc", np.trunc, arity=1),
    # nl.average: reduction across partitions (tensor_partition_reduce)
    Operator("average", None, alu="arith", reducible=True),
]
OPERATORS = {op.name: op for op in _ALL}

# Reductions named by their nl function are accepted where a reduction operator is expected.
REDUCTION_ALIASES = {"sum": "add", "max": "maximum", "min": "minimum"}


def apply(op: Operator, *args) -> np.ndarray:
    """The operator on float32 (arithmetic) or integer (bitvec) NumPy operands."""
    with np.errstate(all="ignore"):
        return np.asarray(op.fn(*args))
