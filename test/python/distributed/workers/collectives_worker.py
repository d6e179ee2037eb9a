"""Every collective and point-to-point op on neuron tensors, compared bit for bit with the
same op on CPU tensors through a Gloo group of the same ranks. Run under torchrun; prints
"collectives ok: N checks" on success and raises on the first mismatch.

A floating-point SUM or PRODUCT over more than 2 ranks depends on the order of its terms: a
small one carries its data and adds in rank order on every rank (Note [Collectives that carry
their data]), where Gloo's ring adds in another order. Those are compared bit for bit with the
terms gathered here and reduced in rank order.

dist.reduce defines only the destination's tensor (Gloo leaves partial sums on the others,
small reduces leave them as they were: Note [Collectives that carry their data]): it is
compared there only."""

import gc
import os

import torch
import torch.distributed as dist

import torch_neuron  # noqa: F401  (registers the backend)

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group(backend="neuron")
cpu_group = dist.new_group(backend="gloo")
DEVICE = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
checks = 0

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
REDUCIBLE = FLOAT_DTYPES + (torch.int32, torch.int64)


def make(shape, dtype, seed):
    g = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def gathered(x):
    """Every rank's x (a CPU tensor), in rank order."""
    out = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(out, x.contiguous(), group=cpu_group)
    return out


def in_rank_order(terms, op):
    acc = terms[0].clone()
    for x in terms[1:]:
        acc.mul_(x) if op == dist.ReduceOp.PRODUCT else acc.add_(x)
    return acc


def order_matters(dtype, op):
    return world > 2 and dtype.is_floating_point and op in (dist.ReduceOp.SUM,
                                                            dist.ReduceOp.PRODUCT)


def rank_order_reference(fn, args, op):
    """What fn leaves in its CPU arguments `args` when every rank reduces in rank order."""
    if fn in (dist.all_reduce, dist.reduce):
        args[0].copy_(in_rank_order(gathered(args[0]), op))
    elif fn is dist.reduce_scatter_tensor:
        out, full = args
        out.copy_(in_rank_order(gathered(full), op).chunk(world)[rank])
    elif fn is dist.reduce_scatter:
        out, chunks = args
        out.copy_(in_rank_order([g[rank] for g in gathered(torch.stack(chunks))], op))
    else:
        raise AssertionError(fn)


def on_both(fn, *inputs, **kwargs):
    """Runs fn(*tensors, group=...) on neuron copies and CPU copies; compares every tensor
    argument afterwards (outputs and mutated inputs) and the return values."""
    global checks
    neuron_args = [to_device(x, DEVICE) for x in inputs]
    cpu_args = [to_device(x, "cpu") for x in inputs]
    fn(*neuron_args, **kwargs)
    op = kwargs.get("op", dist.ReduceOp.SUM)
    if fn in (dist.all_reduce, dist.reduce, dist.reduce_scatter_tensor, dist.reduce_scatter) \
            and order_matters(inputs[0].dtype, op):
        rank_order_reference(fn, cpu_args, op)
    else:
        fn(*cpu_args, group=cpu_group, **kwargs)
    if fn is dist.reduce and rank != kwargs["dst"]:
        return
    for n, c in zip(neuron_args, cpu_args):
        assert_same(n, c, fn)
    checks += 1


def to_device(x, device):
    if isinstance(x, list):
        return [to_device(t, device) for t in x]
    if not isinstance(x, torch.Tensor):
        return x
    # Gloo on CPU cannot move float8 ("Invalid scalar type"): its reference moves the bytes.
    if device == "cpu" and x.dtype == torch.float8_e4m3fn:
        return x.clone().view(torch.uint8)
    return x.clone().to(device)


def assert_same(n, c, fn):
    if isinstance(n, list):
        for a, b in zip(n, c):
            assert_same(a, b, fn)
        return
    if not isinstance(n, torch.Tensor):
        return
    assert n.device.type == "neuron", n.device
    got = n.cpu()
    if got.dtype == torch.float8_e4m3fn:
        got = got.view(torch.uint8)
    assert got.dtype == c.dtype and got.shape == c.shape, (fn, got.dtype, got.shape, c.shape)
    assert torch.equal(got, c), f"{getattr(fn, '__name__', fn)}: rank {rank}\n{got}\n!=\n{c}"


for seed, dtype in enumerate(REDUCIBLE):
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
        on_both(dist.all_reduce, make((5, 3), dtype, seed), op=op)
        on_both(dist.reduce, make((4,), dtype, seed), dst=1, op=op)
        on_both(dist.reduce_scatter_tensor, make((2,), dtype, seed),
                make((2 * world,), dtype, seed + 7), op=op)
        on_both(dist.reduce_scatter, make((3,), dtype, seed),
                [make((3,), dtype, seed + i) for i in range(world)], op=op)
    if dtype.is_floating_point:
        on_both(dist.all_reduce, make((6,), dtype, seed), op=dist.ReduceOp.AVG)
        on_both(dist.reduce_scatter_tensor, make((2,), dtype, seed),
                make((2 * world,), dtype, seed + 3), op=dist.ReduceOp.AVG)

# PREMUL_SUM: multiply by the factor, then sum. Gloo has no PREMUL_SUM, so the CPU reference
# is the definition: scale each rank's input, then SUM.
for dtype in (torch.float32, torch.bfloat16):
    x = make((8,), dtype, 11)
    n = x.to(DEVICE)
    dist.all_reduce(n, op=dist.ReduceOp.PREMUL_SUM(0.25))
    ref = (x * 0.25).clone()
    if order_matters(dtype, dist.ReduceOp.SUM):
        rank_order_reference(dist.all_reduce, [ref], dist.ReduceOp.SUM)
    else:
        dist.all_reduce(ref, group=cpu_group)
    assert torch.equal(n.cpu(), ref), (dtype, n.cpu(), ref)
    out = torch.empty(2, dtype=dtype, device=DEVICE)
    src = make((2 * world,), dtype, 12)
    dist.reduce_scatter_tensor(out, src.to(DEVICE),
                               op=dist.ReduceOp.PREMUL_SUM(0.5))
    ref_out = torch.empty(2, dtype=dtype)
    if order_matters(dtype, dist.ReduceOp.SUM):
        rank_order_reference(dist.reduce_scatter_tensor, [ref_out, src * 0.5],
                             dist.ReduceOp.SUM)
    else:
        dist.reduce_scatter_tensor(ref_out, src * 0.5, group=cpu_group)
    assert torch.equal(out.cpu(), ref_out)
    checks += 2

# Non-reducing ops move every dtype, bool and float8 included.
for seed, dtype in enumerate(REDUCIBLE + (torch.bool, torch.uint8, torch.float8_e4m3fn)):
    mk = (lambda shape, s: make(shape, torch.float32, s).to(dtype)) \
        if dtype == torch.float8_e4m3fn else (lambda shape, s: make(shape, dtype, s))
    on_both(dist.broadcast, mk((3, 2), seed), src=world - 1)
    on_both(dist.all_gather, [mk((2, 2), seed) for _ in range(world)], mk((2, 2), seed + 1))
    on_both(dist.all_gather_into_tensor, mk((world * 3,), seed), mk((3,), seed + 2))
    on_both(dist.all_to_all_single, mk((world * 2, 3), seed), mk((world * 2, 3), seed + 3))
    on_both(dist.all_to_all, [mk((2,), seed) for _ in range(world)],
            [mk((2,), seed + i) for i in range(world)])
    gather_list = [mk((4,), seed) for _ in range(world)] if rank == 0 else None
    on_both(dist.gather, mk((4,), seed + 4), gather_list, dst=0)
    scatter_list = [mk((4,), seed + i) for i in range(world)] if rank == 0 else None
    on_both(dist.scatter, mk((4,), seed + 5), scatter_list, src=0)

# Either side of the most a collective that sends each peer what Gloo would carries for one
# peer (4 MiB; broadcast and all_to_all 1 MiB: Note [Collectives that carry their data]):
# 256 KiB per peer rides in the agreement messages, 5 MiB goes to Gloo. Integer sums: exact in
# any order.
for per_peer in (256 << 10, 5 << 20):
    n = per_peer // 4
    on_both(dist.broadcast, make((n,), torch.float32, 48), src=world - 1)
    on_both(dist.all_to_all_single, make((world * n,), torch.float32, 49),
            make((world * n,), torch.float32, 58))
    on_both(dist.all_gather_into_tensor, make((world * n,), torch.float32, 50),
            make((n,), torch.float32, 51))
    on_both(dist.all_gather, [make((n,), torch.float32, 52) for _ in range(world)],
            make((n,), torch.float32, 53))
    on_both(dist.reduce_scatter_tensor, make((n,), torch.int32, 54),
            make((world * n,), torch.int32, 55))
    on_both(dist.reduce_scatter, make((n,), torch.int32, 56),
            [make((n,), torch.int32, 57 + i) for i in range(world)])

# float8 cannot be reduced: a clear error, and the group stays usable.
try:
    dist.all_reduce(torch.ones(4, device=DEVICE).to(torch.float8_e5m2))
    raise AssertionError("float8 all_reduce did not raise")
except TypeError as e:
    assert "cannot reduce" in str(e) and "bfloat16" in str(e), e

# all_to_all_single with uneven splits: rank r sends r + i + 1 rows to rank i.
in_splits = [rank + i + 1 for i in range(world)]
out_splits = [i + rank + 1 for i in range(world)]
on_both(dist.all_to_all_single, make((sum(out_splits), 2), torch.float32, 20),
        make((sum(in_splits), 2), torch.float32, 21),
        output_split_sizes=out_splits, input_split_sizes=in_splits)

# Non-contiguous inputs and outputs (a transposed matrix, a strided slice). Integer-valued
# floats: Gloo's order of summation depends on the layout it is given, so only exact sums can
# be compared bit for bit here.
on_both(dist.all_reduce, make((4, 6), torch.int32, 30).float().t())
on_both(dist.broadcast, make((4, 6), torch.float32, 31)[:, ::2], src=0)
on_both(dist.all_gather, [make((4, 3), torch.float32, 32).t() for _ in range(world)],
        make((4, 3), torch.float32, 33).t())

# Async ops: the Work's future completes with the neuron outputs.
t = torch.full((4,), float(rank + 1), device=DEVICE)
work = dist.all_reduce(t, async_op=True)
work.wait()
result = work.get_future().value()
assert result[0].device == DEVICE and torch.equal(result[0].cpu(), torch.full((4,), float(sum(range(1, world + 1)))))
checks += 1

# Coalesced all-reduce (several tensors, one dtype each) through the coalescing manager.
tensors = [make((3,), torch.float32, 40), make((5,), torch.bfloat16, 41)]
neuron_tensors = [t.to(DEVICE) for t in tensors]
with dist._coalescing_manager(async_ops=True) as cm:
    for t in neuron_tensors:
        dist.all_reduce(t)
cm.wait()
for t, n in zip(tensors, neuron_tensors):  # coalesced: Gloo's order at every size
    ref = t.clone()
    dist.all_reduce(ref, group=cpu_group)
    assert torch.equal(n.cpu(), ref)
checks += 1

# Coalesced all_gather_into_tensor and reduce_scatter_tensor (FSDP-style flat buffers).
ins = [make((3,), torch.float32, 42), make((5,), torch.float32, 43)]
gathered = [torch.empty(world * 3, device=DEVICE), torch.empty(world * 5, device=DEVICE)]
with dist._coalescing_manager(async_ops=True) as cm:
    for out, x in zip(gathered, ins):
        dist.all_gather_into_tensor(out, x.to(DEVICE))
cm.wait()
fulls = [make((world * 2,), torch.int32, 44).float(), make((world * 4,), torch.int32, 45).float()]
scattered = [torch.empty(2, device=DEVICE), torch.empty(4, device=DEVICE)]
with dist._coalescing_manager(async_ops=True) as cm:
    for out, x in zip(scattered, fulls):
        dist.reduce_scatter_tensor(out, x.to(DEVICE))
cm.wait()
for out, x in zip(gathered, ins):
    ref = torch.empty(out.shape)
    dist.all_gather_into_tensor(ref, x, group=cpu_group)
    assert torch.equal(out.cpu(), ref)
for out, x in zip(scattered, fulls):
    ref = torch.empty(out.shape)
    dist.reduce_scatter_tensor(ref, x, group=cpu_group)
    assert torch.equal(out.cpu(), ref)
checks += 2

# Point to point: a ring of isend/irecv, blocking send/recv, and batch_isend_irecv.
right, left = (rank + 1) % world, (rank - 1) % world
send_t = torch.arange(6, dtype=torch.float32, device=DEVICE).reshape(2, 3) + 10 * rank
recv_t = torch.empty(2, 3, device=DEVICE)
reqs = [dist.irecv(recv_t, left), dist.isend(send_t, right)]
for r in reqs:
    r.wait()
assert torch.equal(recv_t.cpu(), torch.arange(6.0).reshape(2, 3) + 10 * left)
if rank == 0:
    dist.send(torch.tensor([7, 8, 9], device=DEVICE), dst=1)
elif rank == 1:
    got = torch.zeros(3, dtype=torch.int64, device=DEVICE)
    dist.recv(got, src=0)
    assert got.cpu().tolist() == [7, 8, 9]
# A receive from any rank names its source. Its own tag: a receive from any rank takes the
# first message of its tag from anyone, and the ring below may already be sending.
if rank == 1:
    dist.send(torch.tensor([1.5, 2.5], device=DEVICE), dst=0, tag=7)
elif rank == 0:
    got = torch.zeros(2, device=DEVICE)
    assert dist.recv(got, tag=7) == 1 and got.cpu().tolist() == [1.5, 2.5]
recv_t = torch.empty(2, 3, device=DEVICE).t()  # a non-contiguous receive buffer
ops = [dist.P2POp(dist.irecv, recv_t, left), dist.P2POp(dist.isend, send_t.t(), right)]
for r in dist.batch_isend_irecv(ops):
    r.wait()
assert torch.equal(recv_t.cpu(), (torch.arange(6.0).reshape(2, 3) + 10 * left).t())
checks += 3

# Object collectives and barrier.
objects = [None] * world
dist.all_gather_object(objects, {"rank": rank})
assert objects == [{"rank": r} for r in range(world)]
box = [f"from {rank}"]
dist.broadcast_object_list(box, src=0)
assert box == ["from 0"]
dist.barrier()
checks += 3

# Subgroups: new_group over even ranks, and every rank's split into pairs.
evens = dist.new_group(ranks=list(range(0, world, 2)))
if rank % 2 == 0:
    t = torch.tensor([float(rank)], device=DEVICE)
    dist.all_reduce(t, group=evens)
    assert t.item() == sum(range(0, world, 2))
    checks += 1
pairs, _ = dist.new_subgroups(group_size=2)
t = torch.tensor([float(rank)], device=DEVICE)
dist.all_reduce(t, group=pairs)
first = rank - rank % 2
assert t.item() == first + first + 1, t
checks += 1

# Collectives under PyTorch's profiler, twice, while the group's receives posted for the next
# calls (Note [Receives posted in advance]) are pending across the sessions: once a segmentation
# fault when a session's result was freed.
for session in range(2):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t = torch.ones(4, device=DEVICE)
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        ops = [dist.P2POp(dist.isend, t, (rank + 1) % world),
               dist.P2POp(dist.irecv, torch.empty(4, device=DEVICE), (rank - 1) % world)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
    seen = {e.key for e in prof.key_averages()}
    assert "c10d::allreduce_" in seen and "c10d::broadcast_" in seen, seen
    del prof
    gc.collect()
t = torch.ones(4, device=DEVICE)
dist.all_reduce(t)
assert t.cpu().tolist() == [float(world)] * 4
checks += 1

assert dist.get_backend() == "neuron", dist.get_backend()
dist.destroy_process_group()
print(f"collectives ok: {checks} checks on rank {rank}", flush=True)
