"""nn.DataParallel over the neuron cores of one process (torch_neuron/_data_parallel.py): the
batch is scattered over the cores, the module replicated on each, the outputs gathered on the
first and the gradients summed back there, as on CUDA. With no batch statistics the training
is the same math as one device on the whole batch, on the CPU; only the order of the gradient
sums differs (each core sums its rows, then the cores' sums are added), so the comparison is at
float32 tolerance."""
import copy

import torch
import torch.nn as nn

import torch_neuron  # noqa: F401


def test_data_parallel_trains_as_one_device_on_the_whole_batch():
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    inner = copy.deepcopy(reference).to("neuron")
    seen = set()
    inner[0].register_forward_hook(lambda module, args, out: seen.add(str(out.device)))
    model = nn.DataParallel(inner)
    assert model.device_ids == list(range(torch.neuron.device_count()))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)
        out = model(x.to("neuron"))
        assert out.device == torch.device("neuron", 0)
        loss = ((out - y.to("neuron")) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_ref = ((reference(x) - y) ** 2).mean()
        opt_ref.zero_grad()
        loss_ref.backward()
        opt_ref.step()
        torch.testing.assert_close(loss.cpu(), loss_ref.detach(), rtol=1e-6, atol=0)
    # Every core ran a replica.
    assert seen == {f"neuron:{i}" for i in model.device_ids}
    for (name, p), q in zip(inner.named_parameters(), reference.parameters()):
        assert p.device == torch.device("neuron", 0)
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-6, atol=1e-7,
                                   msg=lambda m: f"{name}: {m}")


def test_data_parallel_function_and_comm_helpers():
    x = torch.arange(12.0).reshape(6, 2)
    out = nn.parallel.data_parallel(nn.Identity(), x.to("neuron"), device_ids=[0, 1, 2])
    assert out.device == torch.device("neuron", 0) and torch.equal(out.cpu(), x)
    comm = nn.parallel.comm
    a = x.to("neuron:1")
    parts = comm.scatter(a, [0, 2], chunk_sizes=[2, 4])
    assert [p.device.index for p in parts] == [0, 2]
    assert torch.equal(comm.gather(parts, destination=3).cpu(), x)
    assert comm.gather(parts, destination=3).device == torch.device("neuron", 3)
    copies = comm.broadcast_coalesced([a, a[0]], [1, 3])
    assert copies[0][0] is a  # on its own device, the tensor itself (as CUDA's helper)
    assert [t.device.index for t in copies[1]] == [3, 3]
    assert torch.equal(copies[1][1].cpu(), x[0])
    assert [t.device.index for t in comm.broadcast(a, [0, 3])] == [0, 3]
    # CPU tensors still take PyTorch's path (which needs CUDA for these).
    assert comm.scatter.__wrapped__ is not comm.scatter
