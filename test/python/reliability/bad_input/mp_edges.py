"""Edge cases of neuron tensors through torch.multiprocessing, for test_bad_input_suite.py
(test_multiprocessing.py covers the ordinary queue round trip; this covers what can go wrong).

One spawned consumer that sees only three NeuronCores (NEURON_RT_VISIBLE_CORES=0-2) receives:
a tensor from neuron:3, which does not exist there (a clear error in the consumer, and the
queue keeps working); a tensor on a device both have; a tensor through a Pipe; a zero-element
tensor. It sends a tensor it made back to the parent, and stays alive until the parent has it
(the copy travels through CPU shared memory the sender hands out, as for CPU tensors). Everything has a timeout; the parent kills
the consumer if it is still alive. Prints one JSON object as its last line.
"""

import json
import os
import sys

import torch
import torch.multiprocessing as mp

TIMEOUT_S = 60


def consumer(q, back, conn):
    report = {"count": torch.neuron.device_count()}
    try:
        t = q.get(timeout=TIMEOUT_S)
        report["missing_device"] = ["ok", str(t.device)]
    except Exception as e:  # noqa: BLE001 - reported to the parent
        report["missing_device"] = [type(e).__name__, str(e)]
    t = q.get(timeout=TIMEOUT_S)
    report["after_error"] = [str(t.device), t.cpu().tolist()]
    t = q.get(timeout=TIMEOUT_S)
    report["empty"] = [str(t.device), list(t.shape)]
    if conn.poll(TIMEOUT_S):
        t = conn.recv()
        report["pipe"] = [str(t.device), t.cpu().tolist()]
    back.put(torch.arange(3.0, device="neuron:2") * 2)
    back.put(json.dumps(report))
    # Stay alive until the parent has unpickled the tensor: as with CPU tensors (and CUDA's
    # IPC), the copy travels through shared memory whose descriptor this process hands out.
    conn.poll(TIMEOUT_S)


def main():
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    parent_conn, child_conn = ctx.Pipe()
    x3 = torch.arange(4.0, device="neuron:3")
    x1 = torch.arange(4.0, device="neuron:1") + 10
    os.environ["NEURON_RT_VISIBLE_CORES"] = "0-2"   # only for the consumer
    p = ctx.Process(target=consumer, args=(q, back, child_conn))
    p.start()
    del os.environ["NEURON_RT_VISIBLE_CORES"]
    result = {}
    try:
        q.put(x3)
        q.put(x1)
        q.put(torch.empty(0, 5, device="neuron:0"))
        parent_conn.send(torch.ones(2, device="neuron:2") * 7)
        t = back.get(timeout=TIMEOUT_S * 2)
        result["from_child"] = [str(t.device), t.cpu().tolist()]
        result["child"] = json.loads(back.get(timeout=TIMEOUT_S))
        parent_conn.send("done")
        p.join(TIMEOUT_S)
    finally:
        if p.is_alive():
            p.kill()
            p.join(5)
    result["exitcode"] = p.exitcode
    result["parent_ok"] = (x3 + x1.to("neuron:3")).cpu().tolist()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
