"""The time limit per test of the Python tests (test/pytest_time_limit.py) applies here too.

test/fidelity is a package (its __init__.py) so that this conftest is imported as
fidelity.conftest, not as a second top-level `conftest` that would hide test/python's helpers
(`from conftest import ...`) when both folders run in one session."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytest_plugins = ("pytest_time_limit",)
