"""Probes the machine-shaping environment variables (TORCH_NEURON_INSTANCE,
NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES, NEURON_LOGICAL_NC_CONFIG) cheaply, for
test_bad_input_suite.py.

They are read once, when the first device is used, and a failed read stays failed for the life of
the process, so every value needs a process of its own. Starting an interpreter per value costs
about 2 s of CPU; this script imports torch once, never touches the device, and forks one child
per case (fork before the device is initialized is supported), which sets the variables and
reports what the device then does. The result equals that of a fresh interpreter per case, and
the children double as the "fork before init works" check.

Usage: python env_probe.py CASES_JSON [CHECKPOINT]. CASES_JSON is a list of
{"id": ..., "env": {...}, "probe": "basic" | "load"}. Prints one JSON object (id -> result) as
its last line. Every child has a deadline; a child that misses it is killed and reported.
"""

import json
import os
import select
import signal
import sys
import time

import torch

CHILD_DEADLINE_S = 30


def _error(e):
    return [type(e).__name__, str(e)]


def probe_basic():
    r = {}
    try:
        r["available"] = torch.neuron.is_available()
    except Exception as e:  # noqa: BLE001 - reported to the test
        r["available_error"] = _error(e)
    try:
        count = torch.neuron.device_count()
        r["count"] = count
        r["result"] = (torch.arange(4.0, device="neuron") * 2 + 1).cpu().tolist()
        r["last_device"] = str(torch.ones(1, device=f"neuron:{count - 1}").device)
        r["total_memory"] = torch.neuron.get_device_properties(0).total_memory
    except Exception as e:  # noqa: BLE001
        r["error"] = _error(e)
    # A failed configuration must fail again the same way, not crash or half-work.
    try:
        torch.ones(1, device="neuron")
        r["second_use"] = "ok"
    except Exception as e:  # noqa: BLE001
        r["second_use"] = _error(e)
    r["cpu_still_works"] = (torch.arange(3.0) * 2).tolist() == [0.0, 2.0, 4.0]
    return r


def probe_load(checkpoint):
    r = {"count": torch.neuron.device_count()}
    try:
        t = torch.load(checkpoint)
        r["plain"] = ["ok", str(t.device)]
    except Exception as e:  # noqa: BLE001
        r["plain"] = _error(e)
    t = torch.load(checkpoint, map_location="neuron:1")
    r["mapped"] = [str(t.device), t.cpu().tolist()]
    return r


def run_child(case, checkpoint, w):
    signal.alarm(CHILD_DEADLINE_S)
    for key, value in case["env"].items():
        os.environ[key] = value
    if case["probe"] == "load":
        result = probe_load(checkpoint)
    else:
        result = probe_basic()
    os.write(w, json.dumps(result).encode())


def run_case(case, checkpoint):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            run_child(case, checkpoint, w)
        except BaseException as e:  # noqa: BLE001
            os.write(w, json.dumps({"child_crashed": _error(e)}).encode())
        finally:
            os._exit(0)
    os.close(w)
    data, deadline = b"", time.monotonic() + CHILD_DEADLINE_S + 5
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([r], [], [], max(remaining, 0))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            data = json.dumps({"timeout": True}).encode()
            break
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    result = json.loads(data or b'{"no_output": true}')
    result["exit_code"] = os.waitstatus_to_exitcode(status)
    return result


def main():
    cases = json.loads(sys.argv[1])
    checkpoint = sys.argv[2] if len(sys.argv) > 2 else None
    assert not torch.neuron.is_initialized(), "the parent must not initialize neuron"
    results = {case["id"]: run_case(case, checkpoint) for case in cases}
    # The parent, which never used the device, still can after forking.
    results["_parent"] = {
        "result": (torch.arange(4.0, device="neuron") * 2 + 1).cpu().tolist(),
        "count": torch.neuron.device_count()}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
