"""Reduces a program with a mismatch to a small one with the same mismatch: drops steps (and
what depends on them), shrinks input shapes, simplifies input values, turns autograd off."""

import math

from .runner import run_program


def defined_names(steps):
    names = set()
    for s in steps:
        names.update(s.outs)
    return names


def prune(steps):
    """Drops steps that refer to names no remaining step defines (before them)."""
    kept, defined = [], set()
    for s in steps:
        if all(r in defined for r in s.refs):
            kept.append(s)
            defined.update(s.outs)
    return kept


def reproduces(program, signature, run=run_program, neuron_hook=None):
    try:
        result = run(program, neuron_hook=neuron_hook) if neuron_hook else run(program)
    except Exception:  # noqa: BLE001
        return None
    m = result.mismatch
    if m is not None and m.signature() == signature:
        return m
    return None


def complexity(program):
    inputs = [s for s in program.steps if s.kind == "input"]
    return (len(program.steps), sum(math.prod(s.params["shape"]) for s in inputs),
            sum(len(s.params["shape"]) for s in inputs),
            sum(1 for s in inputs if s.params.get("grad")),
            sum(1 for s in inputs if s.params.get("dist") not in ("small",) and
                not str(s.params.get("dist")).startswith("range:")),
            int(program.uses_float64), len(program.text()))


def bypass(steps, i):
    """Removes step i, making later steps use its first argument instead of its result."""
    s = steps[i]
    if len(s.outs) != 1 or not s.refs:
        return None
    out, src = s.outs[0], s.refs[0]
    new = []
    for j, t in enumerate(steps):
        if j == i:
            continue
        t = t.copy()
        if j > i:
            t.refs = [src if r == out else r for r in t.refs]
        new.append(t)
    return new


def shrink(program, mismatch, budget=400, neuron_hook=None, log=None):
    """Returns (smaller program, its mismatch). `budget`: program runs allowed. A candidate is
    kept when it has the same mismatch (category, op, lane) and is strictly simpler."""
    signature = mismatch.signature()
    best, best_m = program.copy(), mismatch
    runs = 0

    def attempt(candidate):
        nonlocal best, best_m, runs
        if runs >= budget:
            return False
        candidate.steps = prune(candidate.steps)
        if not candidate.steps or complexity(candidate) >= complexity(best):
            return False
        runs += 1
        m = reproduces(candidate, signature, neuron_hook=neuron_hook)
        if m is None:
            return False
        best, best_m = candidate, m
        if log:
            log(f"  shrunk to {len(best.steps)} steps, size {best.size()}")
        return True

    # Steps after the failing one are not needed.
    if mismatch.step_index is not None:
        attempt(best.copy(best.steps[: mismatch.step_index + 1]))

    changed = True
    while changed and runs < budget:
        changed = False
        # 1. drop chunks of steps, then single steps (from the end: later steps depend on more)
        chunk = max(len(best.steps) // 2, 1)
        while chunk >= 1 and runs < budget:
            i = len(best.steps) - chunk
            while i >= 0 and runs < budget:
                if attempt(best.copy(best.steps[:i] + best.steps[i + chunk:])):
                    changed = True
                    i = min(i, len(best.steps) - chunk)
                else:
                    i -= 1
            chunk //= 2
        # 2. skip a step: its users take its argument instead
        i = len(best.steps) - 1
        while i >= 0 and runs < budget:
            cand = bypass(best.steps, i) if i < len(best.steps) else None
            if cand is not None and attempt(best.copy(cand)):
                changed = True
            i -= 1
        # 3. inputs: smaller shapes, fewer dims, simpler values, no autograd
        for idx in range(len(best.steps)):
            if runs >= budget or idx >= len(best.steps):
                break
            if best.steps[idx].kind != "input":
                continue
            d = 0
            while d < len(best.steps[idx].params["shape"]) and runs < budget:
                cur = list(best.steps[idx].params["shape"])
                for new in sorted({0, 1, cur[d] // 2, cur[d] - 1, None}, key=lambda v: -1 if v is None else v):
                    if new is not None and (new >= cur[d] or new < 0):
                        continue
                    cand = best.copy()
                    s = cur[:d] + cur[d + 1:] if new is None else cur[:d] + [new] + cur[d + 1:]
                    cand.steps[idx].params["shape"] = tuple(s)
                    if attempt(cand):
                        changed = True
                        break
                d += 1
            for key, value in (("grad", False), ("dist", "small")):
                cand = best.copy()
                if cand.steps[idx].params.get(key) != value and not str(
                        cand.steps[idx].params.get("dist")).startswith("range:"):
                    cand.steps[idx].params[key] = value
                    if attempt(cand):
                        changed = True
        # 4. the float64 lanes are only needed if the program touches float64
        if best.uses_float64:
            cand = best.copy()
            cand.uses_float64 = False
            if attempt(cand):
                changed = True
    return best, best_m


def describe_size(program):
    inputs = [s for s in program.steps if s.kind == "input"]
    return f"{len(program.steps)} steps, {sum(math.prod(s.params['shape']) for s in inputs)} input elements"
