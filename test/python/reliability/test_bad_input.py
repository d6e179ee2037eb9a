"""Misuse gives a clear error and leaves the device usable: invalid devices, mixed devices,
out of memory, wrong-shape copies, and device use in a forked child."""

import pytest
import torch

from conftest import run_python_json

GiB = 1 << 30


def assert_device_works(device="neuron"):
    x = torch.randn(4, 5)
    n = x.to(device)
    n.fill_(2).add_(torch.ones(4, 5, device=device))
    assert torch.equal(n.cpu(), torch.full((4, 5), 3.0))


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(2, device="neuron:99"),
    lambda: torch.empty(2, device="neuron:4"),
    lambda: torch.ones(2).to("neuron:99"),
    lambda: torch.ones(2, device="neuron").to("neuron:4"),
    lambda: torch.neuron.set_device(99),
    lambda: torch.neuron.get_device_properties(99),
    lambda: torch.neuron.memory_allocated(99),
    lambda: torch.neuron.Stream(device=99),
    lambda: torch.Generator(device="neuron:99"),
], ids=["zeros", "empty", "to", "device-to-device", "set_device", "properties",
        "memory_allocated", "stream", "generator"])
def test_invalid_device_index_names_valid_range(make):
    with pytest.raises(RuntimeError, match=r"neuron:0\.\.neuron:3"):
        make()
    assert torch.neuron.current_device() == 0
    assert_device_works()


def test_invalid_device_inside_device_context():
    with pytest.raises(RuntimeError, match=r"neuron:0\.\.neuron:3"):
        with torch.neuron.device(42):
            pass
    assert torch.neuron.current_device() == 0
    assert_device_works()


def test_mixing_neuron_devices_raises():
    a = torch.ones(3, device="neuron:0")
    b = torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(a.view(3, 1), b.view(1, 3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.cat([a, b])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a.add_(b)
    assert torch.equal(a.cpu(), torch.ones(3))  # untouched
    assert_device_works("neuron:0")
    assert_device_works("neuron:1")


def test_mixing_neuron_and_cpu_tensor_raises():
    n = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        n + torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3) * n
    # A 0-dim CPU tensor is a scalar and is allowed, as with CUDA.
    got = n + torch.tensor(2.0)
    assert got.device.type == "neuron"
    assert torch.equal(got.cpu(), torch.full((3,), 3.0))
    assert_device_works()


def test_out_of_memory_then_normal_allocation():
    with pytest.raises(torch.OutOfMemoryError, match="30.00 GiB"):
        torch.empty(30 * GiB, dtype=torch.uint8, device="neuron")
    assert_device_works()


def test_wrong_shape_copy_then_normal_copy():
    dst = torch.zeros(2, 3, device="neuron")
    with pytest.raises(RuntimeError):
        dst.copy_(torch.ones(3, 2))
    with pytest.raises(RuntimeError):
        dst.copy_(torch.ones(4, 3, device="neuron"))
    dst.copy_(torch.ones(2, 3))
    assert torch.equal(dst.cpu(), torch.ones(2, 3))
    assert_device_works()


def test_unsupported_layout_raises():
    with pytest.raises(RuntimeError, match=r"only strided .*\.to_dense\(\)"):
        torch.zeros(2, 2, device="neuron", layout=torch.sparse_coo)
    assert_device_works()


def test_item_of_many_elements_raises():
    with pytest.raises(RuntimeError):
        torch.ones(3, device="neuron").item()
    assert_device_works()


def test_invalid_stream_for_event_raises():
    e = torch.neuron.Event()
    e.record(torch.neuron.current_stream(0))
    with pytest.raises(RuntimeError):
        e.record(torch.neuron.current_stream(1))  # an event belongs to one device
    assert_device_works()


# Fork ---------------------------------------------------------------------------------------

# The child reports through its exit code: 0 = what the test expects, other = what went wrong.
FORK_SCRIPT = """
    import json, os, torch
    use_before_fork = {use_before_fork}
    if use_before_fork:
        x = torch.ones(2, device="neuron") * 2
    pid = os.fork()
    if pid == 0:
        code = 9
        try:
            y = torch.ones(2, device="neuron") + 1
            code = 0 if y.cpu().tolist() == [2.0, 2.0] else 3   # 0: the child could use neuron
        except RuntimeError as e:
            code = 1 if "spawn" in str(e) else 2                # 1: refused, mentioning spawn
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    parent_ok = (torch.ones(2, device="neuron") * 3).cpu().tolist() == [3.0, 3.0]
    print(json.dumps({{"child": os.waitstatus_to_exitcode(status), "parent_ok": parent_ok,
                      "bad_fork_in_parent": torch.neuron._is_in_bad_fork()}}))
"""


def test_forked_child_after_neuron_use_raises_mentioning_spawn():
    out = run_python_json(FORK_SCRIPT.format(use_before_fork=True))
    assert out["child"] == 1, "child exit code: 0 = used neuron, 2 = error without 'spawn'"
    assert out["parent_ok"]
    assert out["bad_fork_in_parent"] is False


def test_forked_child_before_neuron_use_can_use_neuron():
    out = run_python_json(FORK_SCRIPT.format(use_before_fork=False))
    assert out["child"] == 0, "child exit code: 1/2 = refused, 3 = wrong result"
    assert out["parent_ok"]


# Index out of range in gather/scatter-style ops: the CPU's exception type for the same call
# (which depends on the op, the dtype and the path its kernel takes), with a message naming
# the bad index and the valid range, and the device keeps working.
@pytest.mark.parametrize("call, bad", [
    (lambda d: torch.nn.functional.embedding(torch.tensor([5], device=d),
                                           torch.randn(3, 4, device=d)), "index 5"),
    (lambda d: torch.gather(torch.randn(3, device=d), 0,
                          torch.tensor([9], device=d)), "index 9"),
    (lambda d: torch.randn(3, 4, device=d).index_select(
        1, torch.tensor([-1], device=d)), "index -1"),
    (lambda d: torch.zeros(3, device=d).scatter_(
        0, torch.tensor([4], device=d), 1.0), "index 4"),
    (lambda d: torch.take(torch.randn(3, device=d), torch.tensor([3], device=d)),
     "index 3"),
    (lambda d: torch.zeros(3, device=d).scatter_add_(
        0, torch.tensor([0, 3], device=d), torch.ones(2, device=d)), "index 3"),
    (lambda d: torch.zeros(3, 2, device=d).index_add_(
        0, torch.tensor([-4], device=d), torch.ones(1, 2, device=d)), "index -4"),
    # Large, strided and int32 indices take the other ways of finding the extremes.
    (lambda d: torch.randn(3, device=d).index_select(
        0, torch.cat([torch.zeros(5000, dtype=torch.long), torch.tensor([7])]).to(d)),
     "index 7"),
    (lambda d: torch.randn(3, device=d).index_select(
        0, torch.tensor([[0, 1], [8, 2]], device=d).t()[0]), "index 8"),
    (lambda d: torch.randn(3, device=d).index_select(
        0, torch.tensor([1, -2], dtype=torch.int32, device=d)), "index -2"),
], ids=["embedding", "gather", "index_select", "scatter_", "take", "scatter_add_", "index_add_",
        "large", "strided", "int"])
def test_index_out_of_range_raises_the_cpus_error(call, bad):
    with pytest.raises(Exception) as cpu_info:
        call("cpu")
    with pytest.raises(Exception, match=bad) as info:
        call("neuron")
    assert type(info.value) is type(cpu_info.value)
    assert "valid indices are" in str(info.value)
    assert torch.equal((torch.ones(2, device="neuron") * 2).cpu(), torch.full((2,), 2.0))
