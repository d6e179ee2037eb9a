"""A time limit per test: a test whose run (setup + call + teardown, wall clock) takes longer
than TORCH_NEURON_TEST_TIME_LIMIT seconds (default 60; 0 turns the limit off) fails.

The README's test command must finish in 12 minutes on a 2-core machine without AVX-512, so
no single test may take minutes. A test that only reads simulated time (events, profiles,
simulated_time_ns, MFU, costs) gets it without computing: torch_neuron.predict_only(), or
TORCH_NEURON_EXECUTE=0 for a subprocess. A test that compares values must compute, on inputs
small enough.

Loaded by test/python/conftest.py and test/fidelity/conftest.py (pytest_plugins), so it
applies however the tests are run. Time spent in a fixture shared by several tests (module or
session scope) is counted in the setup of the first test that uses it.
"""

import os

import pytest

ENV = "TORCH_NEURON_TEST_TIME_LIMIT"
DEFAULT_S = 60.0

_spent = pytest.StashKey[float]()
_flagged = pytest.StashKey[bool]()


def limit_s():
    """The limit in seconds (0: none)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return DEFAULT_S
    try:
        limit = float(value)
    except ValueError:
        raise pytest.UsageError(f"{ENV}={value!r}: expected seconds (a number; 0 = no limit)")
    if limit < 0:
        raise pytest.UsageError(f"{ENV}={value!r}: expected seconds (a number; 0 = no limit)")
    return limit


def pytest_configure(config):
    limit_s()  # a bad value stops the run at once


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    spent = item.stash.get(_spent, 0.0) + call.duration
    item.stash[_spent] = spent
    limit = limit_s()
    if not limit or spent <= limit or item.stash.get(_flagged, False) or not report.passed:
        return
    item.stash[_flagged] = True
    report.outcome = "failed"
    phases = {"setup": "setup", "call": "setup + call"}.get(call.when, "setup + call + teardown")
    report.longrepr = (
        f"{item.nodeid} took {spent:.1f} s ({phases}), over the limit of {limit:g} s per test "
        f"(setup + call + teardown; {ENV}, see test/README.md). "
        "If it only needs simulated time (events, profiles, simulated_time_ns, MFU, costs), "
        "make it predict-only (torch_neuron.predict_only(), or TORCH_NEURON_EXECUTE=0 for a "
        "subprocess); otherwise make it smaller.")
