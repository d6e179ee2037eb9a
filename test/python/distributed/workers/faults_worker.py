"""Failures under the neuron process group must raise, not hang. Started as independent
processes (conftest.run_ranks); the scenario is the first argument:

  rank_exits   rank 1 exits after joining; the others' all_reduce raises naming rank 1
  mismatch     ranks all-reduce tensors of different sizes; every rank raises
  mismatch_kinds
               every collective whose data rides in its agreement (Note [Collectives that
               carry their data]) called with different sizes (small and large), dtypes,
               reduce ops, roots or collectives on the two ranks: both raise, and the group
               stays usable
  p2p_sizes    rank 0 sends 8 floats, rank 1 receives 16, then 16 into 8, 40000 into 20000,
               20000 into 40000, then 4 into 2 from any rank: both ranks raise a
               DistBackendError naming both ranks and sizes; then matching exchanges (small
               and large) work, waited for in either order
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
elif scenario == "mismatch_kinds":
    def tensor(n, dtype=torch.float32):
        return torch.full((n,), 7, dtype=dtype, device=device)

    def cases(n, dtype=torch.float32, op=dist.ReduceOp.SUM, root=0):
        """Per collective, a call on this rank's n elements (n a multiple of world)."""
        out = tensor(n * world, dtype)
        chunk = tensor(n // world, dtype)
        return {
            "all_reduce": lambda: dist.all_reduce(tensor(n, dtype), op=op),
            "reduce": lambda: dist.reduce(tensor(n, dtype), dst=root, op=op),
            "broadcast": lambda: dist.broadcast(tensor(n, dtype), src=root),
            "all_gather_into_tensor": lambda: (dist.all_gather_into_tensor(out, tensor(n, dtype)),
                                               out)[1],
            "all_gather": lambda: dist.all_gather([tensor(n, dtype) for _ in range(world)],
                                                  tensor(n, dtype)),
            "reduce_scatter_tensor": lambda: (dist.reduce_scatter_tensor(
                chunk, tensor(n, dtype), op=op), chunk)[1],
            "reduce_scatter": lambda: dist.reduce_scatter(
                tensor(n, dtype), [tensor(n, dtype) for _ in range(world)], op=op),
            "all_to_all_single": lambda: (dist.all_to_all_single(out, tensor(n * world, dtype)),
                                          out)[1],
        }

    # (what differs, rank 0's arguments, rank 1's arguments)
    differences = [
        ("size", dict(n=8), dict(n=16)),
        ("small and large size", dict(n=8), dict(n=1 << 16)),
        ("dtype", dict(n=8), dict(n=8, dtype=torch.int32)),
        ("reduce op", dict(n=8), dict(n=8, op=dist.ReduceOp.MAX)),
        ("root", dict(n=8), dict(n=8, root=1)),
    ]
    for name in cases(8):
        for what, mine, theirs in differences:
            if what == "reduce op" and "reduce" not in name:
                what, theirs = "collective", dict(n=8)  # another collective instead
                call = cases(**mine)["broadcast" if name != "broadcast" else "all_reduce"]
            elif what == "root" and name not in ("reduce", "broadcast"):
                continue
            else:
                call = cases(**(mine if rank == 0 else theirs))[name]
            if what == "collective" and rank == 0:
                call = cases(**mine)[name]
            try:
                call()
                sys.exit(f"{name} with a different {what} did not raise on rank {rank}")
            except RuntimeError as e:
                assert "called a different collective" in str(e), e
                print(f"raised: {name}, different {what}")
        # Nothing moved: the group still works, and the next call gets the right data.
        x = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(x)
        assert x.tolist() == [world * (world + 1) / 2] * 4, x
    print("group usable")
elif scenario == "p2p_sizes":
    # Small sizes, then sizes above the 64 KiB a message carries inline (kInlineBytes).
    for sent, received in ((8, 16), (16, 8), (40000, 20000), (20000, 40000)):
        try:
            if rank == 0:
                dist.send(torch.arange(float(sent), device=device), 1)
            else:
                dist.recv(torch.zeros(received, device=device), 0)
            sys.exit(f"a send of {sent} floats into a receive of {received} did not raise")
        except dist.DistBackendError as e:
            print(f"raised: {e}")
    # From any rank: the receiver learns the sender's size from the header it receives.
    try:
        if rank == 0:
            dist.send(torch.arange(4.0, device=device), 1, tag=5)
        else:
            dist.recv(torch.zeros(2, device=device), tag=5)
        sys.exit("a send of 4 floats into a receive of 2 from any rank did not raise")
    except dist.DistBackendError as e:
        print(f"raised: {e}")
    # The group is still usable: isend/irecv both ways, each rank waiting for its send first,
    # then each waiting for its receive first (neither wait may depend on the other rank's).
    out = torch.full((4,), float(rank), device=device)
    into = torch.zeros(4, device=device)
    ops = [dist.P2POp(dist.isend, out, 1 - rank), dist.P2POp(dist.irecv, into, 1 - rank)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert into.tolist() == [float(1 - rank)] * 4, into
    into.zero_()
    works = [dist.irecv(into, 1 - rank), dist.isend(out, 1 - rank)]
    for work in works:
        work.wait()
    assert into.tolist() == [float(1 - rank)] * 4, into
    # A large exchange after the large mismatches gets its own data, not what they left.
    big = torch.arange(50000.0, device=device) + rank
    into_big = torch.zeros(50000, device=device)
    works = [dist.isend(big, 1 - rank), dist.irecv(into_big, 1 - rank)]
    for work in works:
        work.wait()
    assert torch.equal(into_big.cpu(), torch.arange(50000.0) + (1 - rank)), into_big
    dist.all_reduce(t)
    print("group usable")
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
