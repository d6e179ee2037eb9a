"""Backend metadata of neuron tensors (csrc/runtime/BackendMeta.cpp): named boolean flags set
and read with torch._C._set_tensor_metadata / _get_tensor_metadata, kept by detach(),
torch.save/torch.load, functionalization and FakeTensor conversion."""

import io

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_neuron._backend_meta as backend_meta

FLAGS = {"pinned_layout": True, "checked": False}


def flagged():
    t = torch.arange(6.0).reshape(2, 3).to("neuron")
    torch._C._set_tensor_metadata(t, FLAGS)
    return t


def test_round_trip():
    t = torch.arange(3.0, device="neuron")
    assert torch._C._get_tensor_metadata(t) == {}
    torch._C._set_tensor_metadata(t, FLAGS)
    assert torch._C._get_tensor_metadata(t) == FLAGS
    torch._C._set_tensor_metadata(t, {"checked": True})  # updates one flag, keeps the other
    assert torch._C._get_tensor_metadata(t) == {"pinned_layout": True, "checked": True}


def test_pytorch_keys_stay_pytorch_s():
    z = torch.ones(2, dtype=torch.complex64, device="neuron")
    torch._C._set_tensor_metadata(z, {"conj": True, "pinned_layout": True})
    assert z.is_conj()  # PyTorch's own key set the conj bit, as on the CPU
    assert torch._C._get_tensor_metadata(z) == {"conj": True, "pinned_layout": True}


def test_detach_keeps_it_and_a_new_tensor_has_none():
    t = flagged()
    assert torch._C._get_tensor_metadata(t.detach()) == FLAGS
    assert torch._C._get_tensor_metadata(t + 1) == {}


def test_save_and_load_keep_it_on_any_device():
    buffer = io.BytesIO()
    torch.save(flagged(), buffer)
    for where in ("neuron:0", "neuron:1"):
        buffer.seek(0)
        loaded = torch.load(buffer, map_location=where)
        assert loaded.device == torch.device(where)
        assert torch._C._get_tensor_metadata(loaded) == FLAGS


def test_functionalization_keeps_it():
    seen = []

    def fn(x):
        seen.append(torch._C._get_tensor_metadata(x))
        return x * 2

    out = torch.func.functionalize(fn)(flagged())
    assert seen == [FLAGS]
    assert torch.equal(out.cpu(), torch.arange(6.0).reshape(2, 3) * 2)


def test_fake_tensor_conversion_keeps_it():
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(flagged())
    assert fake.device.type == "neuron"
    assert torch._C._get_tensor_metadata(fake) == FLAGS


def test_fake_tensor_of_a_functional_tensor_keeps_it():
    # What torch.compile's AOT autograd does: functionalize, then fake.
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

    real = flagged()
    with FunctionalTensorMode():
        functional = FunctionalTensor.to_functional(real)
    fake = FakeTensorMode().from_tensor(functional)
    assert fake.device.type == "neuron"
    assert torch._C._get_tensor_metadata(fake) == FLAGS


def test_the_fake_tensor_patch_is_in_place():
    # torch_neuron wraps FakeTensorConverter.from_real_tensor (a PyTorch internal); if PyTorch
    # renames or moves it, this fails instead of the metadata silently getting lost.
    method = fake_tensor.FakeTensorConverter.from_real_tensor
    assert hasattr(method, "__wrapped__")
    backend_meta.install()  # idempotent
    assert fake_tensor.FakeTensorConverter.from_real_tensor is method
