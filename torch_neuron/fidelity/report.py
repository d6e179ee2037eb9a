"""The comparison: ratios, the goals per kind, the physical-peak check, and the table in text
and in Markdown (docs/fidelity.md)."""

import statistics

from torch_neuron.fidelity.anchor import COUNTS, GOALS, KINDS

# A prediction may sit this little under its bound and still pass: the bound is computed in
# float64 from the same shapes, so only rounding separates a prediction at the peak from it.
BOUND_TOLERANCE = 1e-9


def ratio(anchor, result: dict):
    p = result.get("predicted")
    return None if p is None else p / anchor.measured


def below_peak(anchor, result: dict) -> bool:
    """The prediction is faster than the physical peak allows."""
    p, bound = result.get("predicted"), result.get("bound")
    return p is not None and bound is not None and p < bound * (1 - BOUND_TOLERANCE)


def summary(anchors, results: dict) -> dict:
    """Per kind: the counting anchors' median |ratio - 1|, the ones outside the band, and
    whether the goals are met; the anchors faster than a physical peak; errors."""
    out = {"kinds": {}, "below_peak": [], "errors": []}
    for a in anchors:
        if "error" in results[a.name]:
            out["errors"].append(a.name)
        elif below_peak(a, results[a.name]):
            out["below_peak"].append(a.name)
    for kind in KINDS:
        mine = [a for a in anchors if a.kind == kind]
        if not mine:
            continue
        counting = [a for a in mine if a.status == COUNTS]
        ratios = {a.name: ratio(a, results[a.name]) for a in counting
                  if "error" not in results[a.name]}
        entry = {"anchors": len(mine), "counting": len(counting),
                 "not_counting": len(mine) - len(counting),
                 "failed": len(counting) - len(ratios)}
        if ratios:
            entry["median_abs_error"] = statistics.median(abs(r - 1) for r in ratios.values())
            worst = max(ratios, key=lambda n: max(ratios[n], 1 / ratios[n]))
            entry["worst"] = {"name": worst, "ratio": ratios[worst]}
        goal = GOALS.get(kind)
        if goal:
            low, high = goal["band"]
            entry["outside_band"] = sorted(n for n, r in ratios.items() if not low <= r <= high)
            entry["goals_met"] = bool(ratios) and not entry["outside_band"] and (
                entry["median_abs_error"] <= goal["median_abs_error"]) and not any(
                results[a.name].get("error") for a in mine if a.status == COUNTS)
        out["kinds"][kind] = entry
    out["goals_met"] = (all(e.get("goals_met", True) for e in out["kinds"].values())
                        and not out["below_peak"] and not out["errors"])
    return out


def fmt(value, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "%":
        return f"{value:.2f}%"
    return f"{value * 1e3:.1f}us" if value < 1 else f"{value:.2f}ms"


def _row(a, result: dict, eager: bool) -> list[str]:
    r = ratio(a, result)
    cells = [a.name, a.kind, a.status, a.instance, fmt(a.measured, a.unit)]
    if "error" in result:
        cells += ["error", "-", "-"]
    else:
        flag = " <peak" if below_peak(a, result) else ""
        cells += [fmt(result.get("predicted"), a.unit),
                  "-" if r is None else f"{r:.2f}{flag}", fmt(result.get("bound"), a.unit)]
    if eager:
        e = result.get("eager")
        cells += [fmt(e, a.unit), "-" if e is None else f"{e / a.measured:.2f}"]
    return cells


HEADER = ["anchor", "kind", "status", "instance", "measured", "predicted", "ratio", "peak bound"]


def goal_lines(s: dict) -> list[str]:
    lines = []
    for kind, e in s["kinds"].items():
        goal = GOALS.get(kind)
        median = e.get("median_abs_error")
        failed = f" ({e['failed']} failed to run)" if e["failed"] else ""
        text = (f"{kind}: {e['counting']} counting anchors{failed}, {e['not_counting']} "
                "printed only"
                + (f"; median |error| {median:.1%}" if median is not None else ""))
        if goal:
            low, high = goal["band"]
            verdict = "met" if e["goals_met"] else "NOT met"
            text += (f"; goal: median <= {goal['median_abs_error']:.0%}, every anchor within "
                     f"{low}x-{high}x: {verdict}")
            if e["outside_band"]:
                text += f" ({len(e['outside_band'])} outside the band)"
        else:
            text += "; no goal (every row is loose)"
        if "worst" in e:
            text += f"; worst {e['worst']['name']} ({e['worst']['ratio']:.2f})"
        lines.append(text)
    lines.append("never faster than a physical peak: " + (
        "met" if not s["below_peak"] else f"NOT met ({', '.join(s['below_peak'])})"))
    if s["errors"]:
        lines.append(f"errors: {', '.join(s['errors'])}")
    lines.append("all goals met" if s["goals_met"] else "goals NOT met")
    return lines


def table(anchors, results: dict, eager: bool = False) -> str:
    header = HEADER + (["eager", "eager ratio"] if eager else [])
    rows = [header] + [_row(a, results[a.name], eager) for a in anchors]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i < 4 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    return "\n".join(lines + [""] + goal_lines(summary(anchors, results)))


def reasons(anchors) -> str:
    """Each reason once, with the anchors it keeps out of the goals."""
    grouped: dict[tuple, list[str]] = {}
    for a in anchors:
        if a.reason:
            grouped.setdefault((a.status, a.reason), []).append(a.name)
    return "\n".join(f"{status} ({len(names)}: {', '.join(names) if len(names) <= 3 else names[0] + ' ... ' + names[-1]}): {reason}"
                     for (status, reason), names in grouped.items())


def sources(anchors) -> str:
    return "\n".join(f"{a.name}: {a.workload}; measured as {a.measured_as}; {a.source}"
                     + (f"; {a.note}" if a.note else "") for a in anchors)


def markdown(anchors, results: dict) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for a in anchors:
        cells = _row(a, results[a.name], eager=False)
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [f"- {line}" for line in goal_lines(summary(anchors, results))]
    return "\n".join(lines)
