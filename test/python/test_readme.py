"""Every Python example in README.md and in the manual (docs/*.md) runs as written, and the
outputs they show are what a run prints now.

A ```python block runs in a fresh interpreter. A ```python torchrun block runs under torchrun
with 2 ranks. A ```python no-run block is skipped, with the reason given by the HTML comment
`<!-- no-run: REASON -->` on the line before it; any other fence info is an error."""

import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```$", re.S | re.M)
NO_RUN_REASON = re.compile(r"<!-- no-run: (.+?) -->\n*$", re.S)


def text(page):
    return (ROOT / page).read_text()


def python_blocks():
    """(page, index on the page, line, fence info, code) of every ```python block."""
    blocks = []
    for page in PAGES:
        source = text(page)
        for index, match in enumerate(FENCE.finditer(source)):
            line = source.count("\n", 0, match.start()) + 1
            blocks.append((page, index, line, match.group(1).strip(), match.group(2),
                           source[:match.start()]))
    return blocks


BLOCKS = python_blocks()


def block_params(kinds):
    return [pytest.param(page, line, info, code, before, id=f"{page}#{index}")
            for page, index, line, info, code, before in BLOCKS if info.split(" ")[0] in kinds]


def run(args, cwd=ROOT):
    import subprocess

    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_pages_have_examples():
    pages = {page for page, *_ in BLOCKS}
    assert len([b for b in BLOCKS if b[0] == "README.md"]) >= 3
    assert len(pages) >= 8, pages


def test_fence_infos_are_known():
    unknown = [f"{page}:{line}: ```python {info}" for page, _, line, info, _, _ in BLOCKS
               if info not in ("", "torchrun", "no-run")]
    assert not unknown, "unknown fence info (use ```python, ```python torchrun or ```python no-run)"


@pytest.mark.parametrize("page, line, info, code, before", block_params({"", "no-run"}))
def test_python_example_runs(page, line, info, code, before, tmp_path):
    if info == "no-run":
        reason = NO_RUN_REASON.search(before)
        assert reason, f"{page}:{line}: a no-run block needs <!-- no-run: REASON --> before it"
        compile(code, f"{page}:{line}", "exec")  # not run, but it must still be Python
        pytest.skip(f"{page}:{line}: {reason.group(1)}")
    run(["-c", code], cwd=tmp_path)  # examples may write files (traces, saved models)


@pytest.mark.parametrize("page, line, info, code, before", block_params({"torchrun"}))
def test_torchrun_example_runs(page, line, info, code, before, tmp_path):
    """The torchrun scripts of the docs, with 2 ranks on loopback."""
    from conftest import assert_ok, run_torchrun

    script = tmp_path / "script.py"
    script.write_text(code)
    result = assert_ok(run_torchrun(str(script), 2, timeout=180))
    if "dist.all_reduce(x)" in code:  # docs/distributed.md's script: what its comments say
        # Both ranks print 0 + 1 = 1.0 (their lines may interleave on the shared pipe).
        assert result.stdout.count("1.0") >= 2, result.stdout
        assert "64 MiB all-reduce: ring on-chip" in result.stdout, result.stdout


def test_relative_links_resolve():
    """Links between README.md, docs/ and the sources point at files that exist."""
    broken = []
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text(page)):
            if re.match(r"[a-z]+:", target):
                continue
            path = (ROOT / page).parent / target
            if not path.exists():
                broken.append(f"{page}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
                broken.append(f"{page}: {target}#{anchor}")
    assert not broken, broken


def heading_anchors(path):
    """The anchors GitHub gives the headings of a markdown file."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M),
                          re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_quickstart_matches_cpu():
    out = run(["examples/quickstart.py"])
    result = re.search(r"result: (\S+) \(CPU says (\S+) \)", out)
    assert result, out
    assert float(result.group(1)) == pytest.approx(float(result.group(2)), rel=1e-5)
    assert "devices: 4 x NeuronCore-v3" in out


def test_readme_main_job_runs(tmp_path):
    """The README's main job: train under `python -m torch_neuron run` with a trace."""
    assert "python -m torch_neuron run examples/train.py --trace trace.json" in text("README.md")
    trace = tmp_path / "trace.json"
    out = run(["-m", "torch_neuron", "run", str(ROOT / "examples" / "train.py"), "--steps", "3",
               "--trace", str(trace)], cwd=tmp_path)
    assert "torch_neuron report" in out and "CPU fallback ops: none" in out
    assert trace.stat().st_size > 0


def test_report_is_what_a_run_prints():
    """The report of examples/train.py in docs/performance-model.md is deterministic simulation
    output: it must be what a run prints now, so that it cannot go stale."""
    shown = re.search(r"A real report \(`python -m torch_neuron run examples/train.py`.*?```\n(.*?)```",
                      text("docs/performance-model.md"), re.S).group(1)
    out = run(["-m", "torch_neuron", "run", str(ROOT / "examples" / "train.py")])
    report = out[out.index("Simulated "):]
    report = report[:report.index("CPU fallback ops:")] + report[report.index("CPU fallback ops:"):].splitlines()[0] + "\n"
    assert report == shown


def test_distributed_report_is_what_a_run_prints():
    """The (shortened) report of the distributed main job in docs/distributed.md is
    deterministic simulation output: each line it shows must be in a fresh run's report, in
    order."""
    from conftest import assert_ok, loopback_env, run_process_group

    shown = re.search(r"\(a real run, shortened\):\n\n```\n(.*?)```", text("docs/distributed.md"),
                      re.S).group(1)
    result = assert_ok(run_process_group(
        [sys.executable, "-m", "torch_neuron", "run", "--nproc-per-node", "4",
         str(ROOT / "examples" / "train_fsdp.py")], env=loopback_env(), timeout=300))
    lines = result.stdout[result.stdout.index("Simulated "):].splitlines()
    position = 0
    for line in shown.splitlines():
        if line == "...":
            continue
        assert line in lines[position:], f"not in the fresh report (in order): {line!r}"
        position = lines.index(line, position) + 1


@pytest.mark.parametrize("page", ["README.md", "docs/distributed.md"])
def test_documents_the_distributed_main_job(page):
    """The distributed main job is run by test_distributed_launcher.py; this keeps the docs'
    command the one that test runs."""
    assert ("python -m torch_neuron run --nproc-per-node 4 examples/train_fsdp.py "
            "--trace trace.json") in text(page)


def test_full_size_prediction_is_what_a_run_prints():
    """The predict-only example's lines in docs/performance-model.md (all but the host time)
    are a fresh run's."""
    shown = re.search(r"```\n(predicted on .*?)```", text("docs/performance-model.md"),
                      re.S).group(1).splitlines()
    out = run(["examples/predict_full_size.py"]).splitlines()
    assert [line for line in out if not line.startswith("(host")] == \
        [line for line in shown if not line.startswith("(host")]


def test_conformance_tables_are_the_committed_report():
    """The OpInfo table in docs/ops.md and in the README's measured results is the committed
    report's (test_opinfo.py checks the README's against the same report)."""
    import json

    sys.path.insert(0, str(ROOT / "test" / "conformance"))
    import opinfo_sweep

    report = json.loads((ROOT / "test" / "conformance" / "opinfo_report.json").read_text())
    table = opinfo_sweep.markdown_table(report["summary"])
    for page in ("README.md", "docs/ops.md"):
        assert table in text(page), page


def test_fidelity_table_lives_in_docs_fidelity():
    """The fidelity table is in docs/fidelity.md alone (test/python/fidelity checks it lists
    every anchor); the README and the performance model link it."""
    for page in ("README.md", "docs/performance-model.md"):
        assert "fidelity.md" in text(page), page
        assert "```\nanchor " not in text(page), page
