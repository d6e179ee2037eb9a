"""DataLoader feeding neuron: pinned batches (pin_memory=True) copied with non_blocking=True,
and worker processes (num_workers=2, the default start method) that only touch CPU tensors.

In torch 2.13 DataLoader pins for the current accelerator (torch.accelerator), which is neuron:
pin_memory=True is all it takes. pin_memory_device is deprecated; passing "neuron" still works
but warns that it is ignored.
"""

import multiprocessing
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

import torch_neuron


class Squares(Dataset):
    """Samples computed in the worker (CPU only): (features, label, index)."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.arange(6.0) * i, i * i, torch.tensor(i)


def expected_samples():
    return {i: (torch.arange(6.0) * i, i * i) for i in range(40)}


def check_batches(batches, device="neuron:0"):
    want = expected_samples()
    seen = []
    for x, label, index in batches:
        assert x.device == torch.device(device) and label.device == torch.device(device)
        for row, lab, i in zip(x.cpu(), label.cpu(), index.tolist()):
            assert torch.equal(row, want[i][0])
            assert lab.item() == want[i][1]
            seen.append(i)
    assert sorted(seen) == list(range(40))


def to_neuron(batch):
    return [t.to("neuron", non_blocking=True) for t in batch]


def test_default_start_method_is_fork():
    # The case the worker tests below cover: workers forked from a process that uses neuron.
    # (A worker that touches neuron itself is refused, naming 'spawn': test_bad_input.py.)
    assert multiprocessing.get_start_method() == "fork"


@pytest.mark.parametrize("num_workers", [0, 2])
def test_pinned_batches_copy_to_neuron_non_blocking(num_workers):
    torch.ones(1, device="neuron")  # neuron is in use before the workers start
    loader = DataLoader(Squares(), batch_size=8, shuffle=True, pin_memory=True,
                        num_workers=num_workers, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no accelerator is found" or deprecation warning
        batches = []
        for batch in loader:
            assert all(t.is_pinned() for t in batch)
            batches.append(to_neuron(batch))
    torch.neuron.synchronize()
    assert len(batches) == 5
    check_batches(batches)


def test_shuffle_order_does_not_depend_on_workers():
    def order(num_workers):
        loader = DataLoader(Squares(), batch_size=8, shuffle=True, pin_memory=True,
                            num_workers=num_workers,
                            generator=torch.Generator().manual_seed(3))
        return [i for _, _, index in loader for i in index.tolist()]

    assert order(2) == order(0)


def test_pin_memory_device_neuron_is_deprecated_but_works():
    loader = DataLoader(TensorDataset(torch.arange(12.0).reshape(6, 2)), batch_size=3,
                        pin_memory=True, pin_memory_device="neuron")
    with pytest.warns(UserWarning, match="pin_memory_device is deprecated"):
        batches = [b.to("neuron", non_blocking=True) for (b,) in loader]
    assert torch.equal(torch.cat(batches).cpu(), torch.arange(12.0).reshape(6, 2))


def test_non_blocking_copy_on_a_side_stream_is_ordered_by_an_event():
    # The CUDA prefetch idiom: copy on a side stream, make the compute stream wait for it.
    loader = DataLoader(Squares(), batch_size=10, pin_memory=True)
    side = torch.neuron.Stream()
    results = []
    for batch in loader:
        with torch.neuron.stream(side):
            x, label, index = to_neuron(batch)
            copied = torch.neuron.Event()
            copied.record()
        torch.neuron.current_stream().wait_event(copied)
        for t in (x, label, index):
            t.record_stream(torch.neuron.current_stream())
        results.append((x * 1, label, index))
    check_batches(results)


def test_training_from_a_worker_loader_matches_in_process_loading():
    def losses(num_workers):
        torch.manual_seed(0)
        model = torch.nn.Linear(6, 1).to("neuron")
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        loader = DataLoader(Squares(), batch_size=8, shuffle=True, pin_memory=True,
                            num_workers=num_workers,
                            generator=torch.Generator().manual_seed(1))
        out = []
        torch_neuron.clear_op_tracking()
        for x, label, _ in loader:
            x, label = to_neuron((x, label))
            loss = (model(x / 40).squeeze(1) - label.float() / 1600).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        assert torch_neuron.get_fallback_ops() == {}
        return out

    assert losses(2) == losses(0)
