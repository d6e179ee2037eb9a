"""The settings table (Note [Settings table] in csrc/runtime/Settings.h): every setting is
declared once, read through it, reported with its source, documented from it, and a bad value
raises naming the variable and what it accepts."""

import pathlib
import re
import subprocess
import sys

import pytest

import torch_neuron
from conftest import run_python, run_python_json

ROOT = pathlib.Path(__file__).resolve().parents[3]
TABLE = {name: (kind, default, choices) for name, kind, default, choices, _doc
         in torch_neuron._C._setting_specs()}


def test_sources_are_default_environment_and_api():
    got = run_python_json("""
        import json, torch_neuron
        before = torch_neuron.settings()
        torch_neuron.set_execute(False)
        torch_neuron.set_fallback_error(True)
        after = torch_neuron.settings()
        print(json.dumps([before["TORCH_NEURON_EXECUTE"], before["TORCH_NEURON_FLOAT64"],
                          after["TORCH_NEURON_EXECUTE"], after["TORCH_NEURON_FALLBACK"],
                          before["TORCH_NEURONX_DEBUG_DIR"]]))
    """, env={"TORCH_NEURON_FLOAT64": "exact", "TORCH_NEURONX_DEBUG_DIR": "/tmp/x"})
    assert got == [["1", "default"], ["exact", "environment"], ["0", "api"],
                   ["error", "api"], ["/tmp/x", "environment"]]


def test_an_api_call_wins_over_the_environment():
    got = run_python_json("""
        import json, torch_neuron
        torch_neuron.set_float64_mode("narrow")
        print(json.dumps([torch_neuron.settings()["TORCH_NEURON_FLOAT64"],
                          torch_neuron.get_float64_mode()]))
    """, env={"TORCH_NEURON_FLOAT64": "exact"})
    assert got == [["narrow", "api"], "narrow"]


@pytest.mark.parametrize("spelling, value", [("TRUE", True), ("yes", True), ("On", True),
                                             ("0", False), ("no", False), ("off", False)])
def test_booleans_have_one_rule(spelling, value):
    """The same spellings for every boolean, whether C++ or Python reads it."""
    got = run_python_json("""
        import json, torch_neuron
        print(json.dumps([torch_neuron._C._setting("TORCH_NEURONX_COMPLEX_DECOMPOSE"),
                          torch_neuron.get_complex_decompose(),
                          torch_neuron._C._setting("TORCH_NEURONX_NEFF_DISABLE_CACHE")]))
    """, env={"TORCH_NEURONX_COMPLEX_DECOMPOSE": spelling,
              "TORCH_NEURONX_NEFF_DISABLE_CACHE": spelling})
    assert got == [value, value, value]


@pytest.mark.parametrize("name, value, message", [
    ("TORCH_NEURON_EXECUTE", "maybe", "TORCH_NEURON_EXECUTE='maybe' is not a boolean; set it to 1 or 0"),
    ("TORCH_NEURON_FLOAT64", "double", "TORCH_NEURON_FLOAT64='double' is not valid; use one of narrow|exact"),
    ("RANK", "first", "RANK='first' is not valid; use an integer"),
])
def test_a_bad_value_names_the_variable_and_what_it_accepts(name, value, message):
    result = run_python(f"import torch_neuron; torch_neuron._C._setting({name!r})", env={name: value})
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert "RuntimeError" in result.stderr


def test_unknown_settings_are_refused():
    with pytest.raises(ValueError, match="'NO_SUCH' is not a torch_neuron setting"):
        torch_neuron._C._setting("NO_SUCH")


def test_env_command_prints_one_line_per_setting():
    env = {"TORCH_NEURON_EXECUTE": "0"}
    result = run_python("import runpy, sys; sys.argv = ['torch_neuron', 'env']; "
                        "runpy.run_module('torch_neuron', run_name='__main__')", env=env)
    lines = result.stdout.splitlines()
    assert [line.split("=", 1)[0] for line in lines] == list(TABLE)
    assert "TORCH_NEURON_EXECUTE=0  (environment)  0: predict-only mode" in lines[1]


def test_docs_table_is_the_settings_table():
    markdown = subprocess.run([sys.executable, "-m", "torch_neuron", "env", "--markdown"],
                              capture_output=True, text=True, check=True).stdout.strip()
    page = (ROOT / "docs" / "settings.md").read_text()
    block = re.search(r"<!-- settings-table:begin -->\n(.*?)\n<!-- settings-table:end -->", page,
                      re.S)
    assert block and block.group(1) == markdown, (
        "docs/settings.md is out of date: paste `python -m torch_neuron env --markdown` between "
        "its settings-table markers")

