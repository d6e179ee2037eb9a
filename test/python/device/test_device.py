"""The device itself: autoloading, torch.neuron's device functions, torch.accelerator, and the
generated `.neuron()` / `.is_neuron` methods."""

import threading
import warnings

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

import torch_neuron
from conftest import run_python_json

GiB = 1 << 30


# Autoloading --------------------------------------------------------------------------------


def test_plain_import_torch_autoloads_neuron():
    # No `import torch_neuron`: torch's backend autoloading (the torch.backends entry point)
    # must register the device.
    out = run_python_json("""
        import json, sys, torch
        initialized_before = torch.neuron.is_initialized()
        x = torch.zeros(1, device="neuron")
        print(json.dumps({"device": str(x.device), "value": x.cpu().tolist(),
                          "loaded": "torch_neuron" in sys.modules,
                          "count": torch.neuron.device_count(),
                          "initialized": [initialized_before, torch.neuron.is_initialized()]}))
    """)
    assert out == {"device": "neuron:0", "value": [0.0], "loaded": True, "count": 4,
                   "initialized": [False, True]}


def test_import_torch_neuron_first():
    out = run_python_json("""
        import json
        import torch_neuron
        import torch
        x = torch.ones(3, device="neuron").cpu()
        print(json.dumps({"value": x.tolist(), "module": torch.neuron is torch_neuron.neuron}))
    """)
    assert out == {"value": [1.0, 1.0, 1.0], "module": True}


def test_explicit_import_when_autoload_is_off():
    out = run_python_json("""
        import json, torch
        try:
            torch.zeros(1, device="neuron")
            before = "no error"
        except RuntimeError:
            before = "RuntimeError"
        import torch_neuron
        print(json.dumps({"before": before, "after": str(torch.zeros(1, device="neuron").device)}))
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out == {"before": "RuntimeError", "after": "neuron:0"}


# Device count and selection -----------------------------------------------------------------


def test_device_count_and_availability():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 4
    assert torch.accelerator.device_count() == 4
    assert torch.accelerator.is_available()


def test_current_accelerator_is_neuron():
    acc = torch.accelerator.current_accelerator()
    assert acc == torch.device("neuron")
    assert acc.type == "neuron"
    assert torch.get_device_module("neuron") is torch.neuron


def test_default_current_device_is_zero():
    assert torch.neuron.current_device() == 0
    assert torch.accelerator.current_device_index() == 0
    assert torch.empty(1, device="neuron").device == torch.device("neuron", 0)


@pytest.mark.parametrize("spec", [2, "neuron:2", torch.device("neuron", 2)])
def test_set_device(spec):
    torch.neuron.set_device(spec)
    assert torch.neuron.current_device() == 2
    assert torch.accelerator.current_device_index() == 2
    # A device without an index means the current device.
    assert torch.zeros(2, device="neuron").device == torch.device("neuron", 2)
    assert torch.tensor([1.0]).to("neuron").device == torch.device("neuron", 2)
    torch.neuron.set_device(0)
    assert torch.zeros(2, device="neuron").device == torch.device("neuron", 0)


def test_set_device_to_invalid_index_keeps_current():
    torch.neuron.set_device(1)
    with pytest.raises(RuntimeError, match=r"neuron:0\.\.neuron:3"):
        torch.neuron.set_device(4)
    assert torch.neuron.current_device() == 1


def test_current_device_is_per_thread():
    torch.neuron.set_device(2)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(
        (torch.neuron.current_device(), torch.ones(1, device="neuron").device.index)))
    thread.start()
    thread.join()
    assert seen == [(0, 0)]  # a new thread starts on neuron:0, as with CUDA
    assert torch.neuron.current_device() == 2



@pytest.mark.parametrize("local_rank, want", [("1", 1), ("3", 3), ("4", 0), ("x", 0), ("", 0)])
def test_a_launched_rank_starts_on_its_local_rank(local_rank, want):
    # torchrun/accelerate set LOCAL_RANK; accelerate takes a neuron rank's device from
    # current_device(), so every thread of rank k starts on neuron:k. A LOCAL_RANK naming no
    # visible core (trn2.3xlarge has 4) leaves neuron:0.
    got = run_python_json("""
        import json, threading, torch
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.neuron.current_device()))
        t.start(); t.join()
        print(json.dumps([torch.neuron.current_device(), torch.ones(1, device="neuron").device.index,
                          seen[0], torch.accelerator.current_device_index()]))
    """, env={"LOCAL_RANK": local_rank})
    assert got == [want] * 4

def test_device_context_manager_nests_and_restores():
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        with torch.neuron.device("neuron:3"):
            assert torch.neuron.current_device() == 3
            assert torch.ones(1, device="neuron").device.index == 3
        assert torch.neuron.current_device() == 1
        with torch.neuron.device(None):  # no-op
            assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0


def test_device_context_manager_restores_on_exception():
    with pytest.raises(ZeroDivisionError):
        with torch.neuron.device(2):
            1 / 0
    assert torch.neuron.current_device() == 0


def test_device_of():
    t = torch.ones(1, device="neuron:3")
    with torch.neuron.device_of(t):
        assert torch.neuron.current_device() == 3
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        with torch.neuron.device_of(torch.ones(1)):  # CPU tensor: no change
            assert torch.neuron.current_device() == 1


# Names and properties -----------------------------------------------------------------------


def test_device_name():
    name = torch.neuron.get_device_name()
    assert "NeuronCore-v3" in name and "trn2.3xlarge" in name
    assert torch.neuron.get_device_name(3) == name


@pytest.mark.parametrize("index", range(4))
def test_device_properties(index):
    for spec in (index, f"neuron:{index}", torch.device("neuron", index)):
        props = torch.neuron.get_device_properties(spec)
        assert props.index == index
        assert props.core == index  # all cores visible: device i is core i
        assert props.total_memory == 24 * GiB  # 96 GiB HBM per Trainium2 chip / 4 logical cores
        assert props.instance_type == "trn2.3xlarge"
        assert props.chip == "Trainium2"
        assert props.core_version == "NeuronCore-v3"
        assert props.core_count == 4
        assert props.chips == 1
        assert props.chip_index == 0
        assert props.name == torch.neuron.get_device_name(index)


def test_device_capability_is_the_neuroncore_version():
    assert torch.neuron.get_device_capability() == (3, 0)  # NeuronCore-v3 on trn2.3xlarge
    assert torch.neuron.get_device_capability("neuron:2") == (3, 0)


QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}


def test_accelerator_capability_lists_the_dtypes_neuron_tensors_can_have():
    # torch.accelerator's contract: tensors of these dtypes can be allocated, and converted
    # between them (where PyTorch converts them at all, which it checks on the CPU here).
    dtypes = torch.accelerator.get_device_capability("neuron:1")["supported_dtypes"]
    assert not dtypes & QUANTIZED  # refused (Unsupported.cpp)
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
                  torch.bool, torch.complex64, torch.float8_e4m3fn, torch.uint8):
        assert dtype in dtypes
    source = torch.arange(-3, 5, dtype=torch.float32) / 2
    for dtype in dtypes:
        assert torch.empty(3, dtype=dtype, device="neuron:1").dtype == dtype
        try:
            want = source.to(dtype)
        except (RuntimeError, TypeError):  # no conversion for bit types, not even on the CPU
            continue
        got = source.to("neuron:1").to(dtype)
        assert got.dtype == dtype and torch.equal(got.cpu().view(torch.uint8),
                                                  want.view(torch.uint8)), dtype
    with pytest.raises(RuntimeError, match="valid devices are neuron:0..neuron:3"):
        torch.accelerator.get_device_capability("neuron:7")


def test_device_properties_of_current_device():
    with torch.neuron.device(2):
        assert torch.neuron.get_device_properties().index == 2


def test_amp_dtypes_and_bf16():
    dtypes = torch.neuron.get_amp_supported_dtype()
    assert torch.bfloat16 in dtypes and torch.float16 in dtypes
    assert torch.neuron.is_bf16_supported()


def test_init_and_is_initialized():
    torch.neuron.init()
    assert torch.neuron.is_initialized()



# CUDA's sentence with the device's name: tools that match CUDA's (and XPU's, and PyTorch's
# reference backend's) text must find it whichever call the child makes first.
FORKED_CHILD_MESSAGE = ("Cannot re-initialize neuron in forked subprocess. To use neuron with "
                        "multiprocessing, you must use the 'spawn' start method")


def test_child_forked_after_init_gets_cudas_message_word_for_word():
    got = run_python_json("""
        import json, os, signal, torch
        import torch.multiprocessing as mp

        inherited = torch.arange(3.0, device="neuron:1")
        calls = {
            "init": lambda: torch.neuron.init(),                      # Python's lazy init
            "set_device": lambda: torch.neuron.set_device(1),
            "new_tensor": lambda: torch.ones(2, device="neuron"),     # the runtime, in C++
            "inherited_tensor": lambda: inherited.cpu(),
            "synchronize": lambda: torch.neuron.synchronize(),
        }

        def child(name, w):
            signal.alarm(30)  # a backstop: the child always ends
            try:
                calls[name]()
                out = "no error"
            except BaseException as e:
                out = f"{type(e).__name__}: {e}"
            os.write(w, out.encode())

        def in_fork(name):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    child(name, w)
                finally:
                    os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                out = f.read().decode()
            os.waitpid(pid, 0)
            return out

        got = {name: in_fork(name) for name in calls}
        # torch.multiprocessing with the "fork" start method: the child's exception.
        ctx = mp.get_context("fork")
        q = ctx.SimpleQueue()
        def target(q):
            try:
                torch.zeros(1, device="neuron")
                q.put("no error")
            except BaseException as e:
                q.put(f"{type(e).__name__}: {e}")
        p = ctx.Process(target=target, args=(q,))
        p.start()
        got["mp_fork"] = q.get()
        p.join(30)
        if p.is_alive():
            p.kill()
        print(json.dumps(got))
    """)
    want = f"RuntimeError: {FORKED_CHILD_MESSAGE}"
    assert got == {name: want for name in got} and len(got) == 6, got

# Generated methods ---------------------------------------------------------------------------


def test_tensor_neuron_method_and_is_neuron():
    cpu = torch.arange(6.0).reshape(2, 3)
    assert not cpu.is_neuron
    n = cpu.neuron()
    assert n.is_neuron
    assert n.device == torch.device("neuron", 0)
    assert torch.equal(n.cpu(), cpu)
    assert cpu.neuron(2).device == torch.device("neuron", 2)
    assert cpu.neuron("neuron:1").device == torch.device("neuron", 1)
    with torch.neuron.device(3):
        assert cpu.neuron().device == torch.device("neuron", 3)


def test_module_neuron_method():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    reference = [t.clone() for t in module.state_dict().values()]
    assert module.neuron() is module
    for param in module.parameters():
        assert param.is_neuron and param.device.index == 0
    for buf in module.buffers():
        assert buf.is_neuron
    for got, want in zip(module.state_dict().values(), reference):
        assert torch.equal(got.cpu(), want)
    module.neuron(1)
    assert all(p.device == torch.device("neuron", 1) for p in module.parameters())


def test_storage_neuron_method():
    cpu = torch.UntypedStorage(16)
    assert not cpu.is_neuron
    n = cpu.neuron()
    assert n.is_neuron and n.device == torch.device("neuron", 0)
    assert n.nbytes() == 16
    t = torch.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        typed = t.storage().neuron()
        assert typed.is_neuron and typed.device == torch.device("neuron", 0)
        assert typed.tolist() == t.tolist()


def test_packed_sequence_neuron_method():
    data = torch.randn(3, 2, 4)
    packed = pack_padded_sequence(data, torch.tensor([3, 2]))
    assert not packed.is_neuron
    moved = packed.neuron()
    assert moved.is_neuron
    assert moved.data.device == torch.device("neuron", 0)
    assert torch.equal(moved.data.cpu(), packed.data)


def test_public_package_api():
    for name in ("neuron", "get_executed_ops", "get_fallback_ops", "clear_op_tracking",
                 "set_fallback_error", "cmake_prefix_path"):
        assert hasattr(torch_neuron, name)


def test_module_to_neuron_keeps_parameter_objects():
    # As with CUDA, Module.to() swaps the data under the same Parameters, so an optimizer
    # built before the move still updates the model.
    model = torch.nn.Linear(4, 2)
    weight = model.weight
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.to("neuron")
    assert model.weight is weight and weight.device.type == "neuron"
    model(torch.randn(3, 4, device="neuron")).sum().backward()
    before = weight.detach().cpu().clone()
    opt.step()
    assert not torch.equal(weight.detach().cpu(), before)
    model.cpu()
    assert model.weight is weight and weight.device.type == "cpu"


@pytest.mark.parametrize("api", [
    "synchronize", "simulated_time_ns", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_stats", "mem_get_info", "memory_summary",
    "reset_peak_memory_stats", "reset_accumulated_memory_stats", "get_device_properties",
    "get_device_name", "get_device_capability", "current_stream", "default_stream",
    "get_rng_state", "memory_stats_as_nested_dict",
    "get_per_process_memory_fraction"])
@pytest.mark.parametrize("index", [4, 128, 200, -2, "neuron:9"])
def test_device_apis_refuse_an_invalid_device(api, index):
    # trn2.3xlarge has neuron:0..neuron:3; the message says so and how to change it.
    with pytest.raises(RuntimeError, match=r"valid devices are neuron:0\.\.neuron:3"):
        getattr(torch.neuron, api)(index)
    assert torch.neuron.memory_allocated(0) >= 0  # the device API is still usable


def test_peer_access_and_stream_capture():
    """Different NeuronCores of the instance copy to each other directly (a device is not its
    own peer, as with CUDA), and no stream is ever capturing: neuron has no graph capture."""
    assert torch.neuron.can_device_access_peer(0, 3)
    assert torch.neuron.can_device_access_peer("neuron:1", torch.device("neuron:0"))
    assert not torch.neuron.can_device_access_peer(2, 2)
    with pytest.raises(RuntimeError, match=r"valid devices are neuron:0\.\.neuron:3"):
        torch.neuron.can_device_access_peer(0, 4)
    assert torch.neuron.is_current_stream_capturing() is False
    a = torch.arange(6.0, device="neuron:0")
    torch.testing.assert_close(a.to("neuron:3").cpu(), torch.arange(6.0))


def test_device_apis_refuse_what_is_not_a_neuron_device():
    with pytest.raises(ValueError, match="expected a neuron device, got cpu"):
        torch.neuron.memory_allocated("cpu")
    with pytest.raises(TypeError, match="expected a neuron device"):
        torch.neuron.synchronize(1.0)


def test_negative_device_changes_nothing_as_with_cuda():
    torch.neuron.set_device(1)
    torch.neuron.set_device(-1)
    with torch.neuron.device(-1):
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 1
