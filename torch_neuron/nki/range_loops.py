"""Plain `for ... in range(...)` loops of a kernel as tile scopes (Note [Tile lifetimes]).

The current NKI stub deprecates `nl.affine_range` and friends in favour of Python's `range`
(aws-neuron-sdk `nki/api/nki/language/__init__.py`), and NKI compiles a kernel from its source.
So, as NKI reads the kernel's source, this module recompiles the kernel function (not the
helpers it calls) with every `for` over a call of the builtin `range` iterating through
`scopes.scoped`, which makes each iteration a scope. Line numbers and the file name stay the
kernel's, so errors and records name the same lines. A kernel whose source cannot be read or
recompiled runs unchanged (its `range` loops are not scopes).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import tokenize
import types
import weakref

_HOOK = "__nki_range_scope__"
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _ScopeRangeLoops(ast.NodeTransformer):
    def __init__(self):
        self.changed = False

    def visit_For(self, node: ast.For):
        self.generic_visit(node)
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            node.iter = ast.copy_location(
                ast.Call(func=ast.Name(id=_HOOK, ctx=ast.Load()), args=[it], keywords=[]), it)
            self.changed = True
        return node


def _recompile(fn, hook):
    code = fn.__code__
    if fn.__globals__.get("range", builtins.range) is not builtins.range:
        return fn  # `range` is not the builtin here
    lines, first = inspect.getsourcelines(code)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    fdef = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) or fdef.name != code.co_name:
        return fn
    transformer = _ScopeRangeLoops()
    transformer.visit(fdef)
    if not transformer.changed:
        return fn
    fdef.decorator_list = []
    # The kernel's free variables (and the hook) are the enclosing function's locals, so the
    # recompiled code takes them from closure cells as the original does.
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    names = list(code.co_freevars) + [_HOOK]
    outer = ast.FunctionDef(
        name="__nki_kernel_factory__",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None)
    module = ast.Module(body=[outer], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, first - 1)
    namespace: dict = {}
    exec(compile(module, code.co_filename, "exec"), fn.__globals__.copy(), namespace)
    placeholder = namespace["__nki_kernel_factory__"](*([None] * len(names)))
    new_code = placeholder.__code__
    hook_cell = types.CellType(hook)
    closure = tuple(hook_cell if n == _HOOK else cells[n] for n in new_code.co_freevars)
    new = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__dict__.update(fn.__dict__)
    new.__annotations__ = fn.__annotations__
    return new


def with_scoped_range_loops(fn, hook):
    """`fn` recompiled so its `range` loops go through `hook` (cached per function); `fn`
    itself when that is not possible."""
    if not isinstance(fn, types.FunctionType):
        return fn
    try:
        return _CACHE[fn]
    except KeyError:
        pass
    try:
        new = _recompile(fn, hook)
    except (OSError, TypeError, SyntaxError, KeyError, IndexError, ValueError,
            tokenize.TokenError):
        new = fn
    _CACHE[fn] = new
    return new
