"""Failures under the neuron process group must raise, not hang. Started as independent
processes (conftest.run_ranks); the scenario is the first argument:

  rank_exits   rank 1 exits after joining; the others' all_reduce raises naming rank 1
  mismatch     ranks all-reduce tensors of different sizes; every rank raises
  no_peer      only rank 0 is started; init_process_group raises after its timeout
  teardown     HBM goes back to its baseline after destroy_process_group
"""

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import torch_neuron  # noqa: F401

scenario = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
timeout = timedelta(seconds=float(os.environ.get("TEST_PG_TIMEOUT", "15")))

if scenario == "no_peer":
    start = time.monotonic()
    try:
        dist.init_process_group("neuron", timeout=timeout)
    except Exception as e:  # torch's rendezvous error (a DistStoreError)
        print(f"raised after {time.monotonic() - start:.0f} s: {type(e).__name__}: {e}")
        sys.exit(0)
    sys.exit("init_process_group returned without its peer")

baseline = torch.neuron.memory_allocated(device)
dist.init_process_group("neuron", timeout=timeout)
t = torch.ones(1024, device=device)
dist.all_reduce(t)  # everyone is up

if scenario == "rank_exits":
    if rank == 1:
        os._exit(3)
    time.sleep(1)
    start = time.monotonic()
    try:
        for _ in range(3):
            dist.all_reduce(t)
    except Exception as e:
        print(f"raised after {time.monotonic() - start:.0f} s: {type(e).__name__}: {e}")
        sys.exit(0)
    sys.exit("all_reduce returned although rank 1 exited")
elif scenario == "mismatch":
    odd = torch.ones(8 if rank == 0 else 16, device=device)
    try:
        dist.all_reduce(odd)
        dist.all_reduce(t)
    except Exception as e:
        print(f"raised: {type(e).__name__}: {e}")
        os._exit(0)  # the group is broken; don't wait for its teardown
    sys.exit("mismatched all_reduce did not raise")
elif scenario == "teardown":
    for _ in range(3):
        dist.all_gather_into_tensor(torch.empty(1024 * world, device=device), t)
        dist.reduce_scatter_tensor(torch.empty(1024 // world, device=device), t)
    del t
    dist.destroy_process_group()
    now = torch.neuron.memory_allocated(device)
    assert now == baseline, f"HBM after destroy_process_group: {now} bytes, before: {baseline}"
    print("teardown ok")
else:
    sys.exit(f"unknown scenario {scenario}")
