"""Complex tensors on neuron. Trainium has no complex arithmetic; TorchNeuron on PyTorch >= 2.13
decomposes complex ops into real ones on the device (TORCH_NEURONX_COMPLEX_DECOMPOSE, on by
default). So complex64 ops run as device ops, with results equal to the CPU's; complex128 and
complex32 always fall back, and with decomposition off every op on complex tensors does."""

import pytest
import torch

import torch_neuron
from conftest import run_python_json


@pytest.fixture(autouse=True)
def decomposition_restored():
    yield
    torch_neuron.set_complex_decompose(True)


def cplx(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(seed))


COMPLEX64_OPS = {
    "mul": lambda a, b: a * b,
    "add_scalar": lambda a, b: a + 2.5,
    "matmul": lambda a, b: a @ b.mT,
    "abs_angle": lambda a, b: torch.stack([a.abs(), a.angle()]),
    "exp": lambda a, b: torch.exp(a),
    "sum": lambda a, b: a.sum(dim=0),
    "conj_mul": lambda a, b: a.conj() * b,
    "view_as_real": lambda a, b: torch.view_as_real(a * b) * 2,
}


@pytest.mark.parametrize("name", COMPLEX64_OPS)
def test_complex64_ops_run_on_the_device_like_cpu(name):
    a, b = cplx(4, 6, seed=1), cplx(4, 6, seed=2)
    want = COMPLEX64_OPS[name](a, b)
    torch_neuron.clear_op_tracking()
    got = COMPLEX64_OPS[name](a.to("neuron"), b.to("neuron"))
    assert torch_neuron.get_fallback_ops() == {}
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), want)


def test_rotary_embedding_with_polar_runs_on_the_device():
    # The complex-number RoPE of Llama 4 and DeepSeek-V2: polar, view_as_complex, mul, view_as_real.
    x = torch.randn(2, 8, 4, 16)
    freqs = torch.outer(torch.arange(8.0), 1.0 / 10000 ** (torch.arange(0, 16, 2) / 16))

    def rope(x, freqs):
        rotation = torch.polar(torch.ones_like(freqs), freqs)[None, :, None, :]
        pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * rotation).flatten(3)

    torch_neuron.clear_op_tracking()
    got = rope(x.to("neuron"), freqs.to("neuron"))
    assert torch_neuron.get_fallback_ops() == {}
    torch.testing.assert_close(got.cpu(), rope(x, freqs))


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex32])
def test_other_complex_dtypes_fall_back(dtype):
    a = torch.ones(4, dtype=dtype)
    torch_neuron.clear_op_tracking()
    got = a.to("neuron") * a.to("neuron")
    assert torch_neuron.get_fallback_ops() == {"aten::mul.Tensor": 1}
    torch.testing.assert_close(got.cpu(), a * a)


def test_complex_ffts_stay_on_the_cpu():
    x = torch.randn(16)
    torch_neuron.clear_op_tracking()
    got = torch.fft.fft(x.to("neuron"))
    assert "aten::_fft_r2c" in torch_neuron.get_fallback_ops()
    torch.testing.assert_close(got.cpu(), torch.fft.fft(x))


def test_switching_decomposition_off_sends_complex_ops_to_the_cpu():
    a = cplx(3, seed=3)
    torch_neuron.set_complex_decompose(False)
    assert torch_neuron.get_complex_decompose() is False
    torch_neuron.clear_op_tracking()
    got = a.to("neuron") * 2
    assert torch_neuron.get_fallback_ops() == {"aten::mul.Tensor": 1}
    torch.testing.assert_close(got.cpu(), a * 2)
    torch_neuron.set_complex_decompose(True)
    torch_neuron.clear_op_tracking()
    a.to("neuron") * 2
    assert torch_neuron.get_fallback_ops() == {}


@pytest.mark.parametrize("value, decomposed",
                         [("0", False), ("false", False), ("no", False), ("1", True), ("", True)])
def test_torchneuron_environment_variable(value, decomposed):
    out = run_python_json("""
        import json, torch, torch_neuron
        torch_neuron.clear_op_tracking()
        torch.ones(2, dtype=torch.complex64, device="neuron") * 2
        print(json.dumps([torch_neuron.get_complex_decompose(), torch_neuron.get_fallback_ops()]))
    """, env={"TORCH_NEURONX_COMPLEX_DECOMPOSE": value})
    assert out[0] is decomposed
    assert (out[1] == {}) is decomposed


def test_a_bad_environment_value_names_the_variable():
    out = run_python_json("""
        import json, torch, torch_neuron
        try:
            torch.ones(2, dtype=torch.complex64, device="neuron") * 2
            error = ""
        except RuntimeError as e:
            error = str(e).splitlines()[0]
        print(json.dumps([error, (torch.ones(2, device="neuron") + 1).sum().item()]))
    """, env={"TORCH_NEURONX_COMPLEX_DECOMPOSE": "maybe"})
    assert "TORCH_NEURONX_COMPLEX_DECOMPOSE='maybe' is not a boolean" in out[0]
    assert out[1] == 4.0  # the device stays usable
