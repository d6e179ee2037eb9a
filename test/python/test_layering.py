"""The house rules of docs/architecture.md, checked on the sources: dependencies point down only
(python -> (profiler, distributed) -> aten -> runtime -> trnsim), no include or import cycle,
trnsim knows nothing of PyTorch or torch_neuron, and only the settings table reads the
environment."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
TRNSIM = ROOT / "third_party" / "trnsim"
PACKAGE = ROOT / "torch_neuron"

# csrc folders by layer: a file may include its own folder and the layers below it.
LAYERS = {"runtime": 1, "aten": 2, "amp": 3, "profiler": 3, "distributed": 3, "python": 4,
          "api": 4, "include": 4}
INCLUDE = re.compile(r'^#include\s+"([^"]+)"', re.M)


def sources(root, suffixes=(".h", ".cpp")):
    return sorted(p for p in root.rglob("*") if p.suffix in suffixes)


def csrc_includes():
    """{module: {included modules}}, a module being a path without its extension (a .cpp and
    its .h are one module), relative to csrc/."""
    graph = {}
    for path in sources(CSRC):
        module = str(path.relative_to(CSRC).with_suffix(""))
        deps = graph.setdefault(module, set())
        for target in INCLUDE.findall(path.read_text()):
            if (CSRC / target).exists():
                dep = str(pathlib.Path(target).with_suffix(""))
                if dep != module:
                    deps.add(dep)
    return graph


def find_cycle(graph):
    """One cycle of `graph` as a list of nodes, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep, stack)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return None


def test_csrc_includes_point_down_only():
    upward = []
    for module, deps in csrc_includes().items():
        folder = module.split("/")[0]
        for dep in deps:
            dep_folder = dep.split("/")[0]
            if dep_folder == "torch_neuron":  # the public headers under csrc/include
                dep_folder = "include"
            if dep_folder != folder and LAYERS[dep_folder] >= LAYERS[folder]:
                upward.append(f"{module} includes {dep}")
    assert not upward, "includes that point up or sideways:\n" + "\n".join(sorted(upward))


def test_csrc_has_no_include_cycle():
    assert find_cycle(csrc_includes()) is None, " -> ".join(find_cycle(csrc_includes()))


def test_trnsim_knows_nothing_of_pytorch_or_torch_neuron():
    offenders = []
    for path in sources(TRNSIM, (".h", ".cpp", ".txt")):  # the README may say who uses it
        text = path.read_text()
        for word in ("torch_neuron", "TORCH_NEURON", "getenv(", "<torch/", "<ATen/", "<c10/"):
            if word in text:
                offenders.append(f"{path.relative_to(ROOT)}: {word}")
    assert not offenders, "\n".join(offenders)


def test_only_the_settings_table_reads_the_environment():
    readers = [str(p.relative_to(ROOT)) for p in sources(CSRC) if "getenv(" in p.read_text()]
    assert readers == ["csrc/runtime/Settings.cpp"]
    # Python: reading os.environ (get, [key] not assigned, `in`, getenv). Copying it into a
    # child process's environment and setting a variable for a library are not reading.
    read = re.compile(r"os\.getenv|os\.environ\.get|in os\.environ|os\.environ\[[^\]]+\](?!\s*=)")
    python_readers = [f"{p.relative_to(ROOT)}: {m.group(0)}"
                      for p in sorted(PACKAGE.rglob("*.py"))
                      for m in read.finditer(p.read_text())]
    assert not python_readers, "\n".join(python_readers)


def python_imports():
    """{module: {torch_neuron modules it imports, at any depth of the file}}."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    known = set(modules) | {"torch_neuron._C"}
    graph = {}
    for name, path in modules.items():
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from a import b` imports a.b when b is a module, else a.
                targets = [f"{node.module}.{alias.name}"
                           if f"{node.module}.{alias.name}" in known else node.module
                           for alias in node.names]
            for target in targets:
                if target in known and target != name:
                    deps.add(target)
    return graph


def test_python_has_no_import_cycle():
    graph = python_imports()
    assert "torch_neuron.compile.backend" in graph  # the walk found the package
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_architecture_doc_indexes_every_note():
    """docs/architecture.md lists every Note [...] the code refers to, where it is written."""
    code = [p for root in (CSRC, TRNSIM, PACKAGE)
            for p in root.rglob("*") if p.suffix in (".h", ".cpp", ".py")]
    # A name may wrap onto the next comment line.
    cited = {re.sub(r"\s+(?:(?://|#)\s*)?", " ", name)
             for p in code for name in re.findall(r"Note \[([^\]]+)\]", p.read_text())}
    page = (ROOT / "docs" / "architecture.md").read_text()
    index = dict(re.findall(r"^\| ([^|]+?) \| `([^`]+)` \|$", page, re.M))
    pytorch_notes = {"Seed and Offset"}  # PyTorch's own, cited where we follow it
    assert set(index) == cited - pytorch_notes
    for name, where in index.items():
        text = (ROOT / where).read_text()
        assert re.search(rf"Note \[{re.escape(name)}\](:|\n| and)", text), (
            f"Note [{name}] is not written in {where}")
