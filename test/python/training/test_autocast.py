"""torch.autocast("neuron") follows CUDA's op lists; GradScaler("neuron") works."""

import pytest
import torch
import torch.nn.functional as F

import torch_neuron  # noqa: F401


def test_default_autocast_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("neuron") == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_op_classes_get_the_right_dtypes(dtype):
    a = torch.randn(8, 8, device="neuron")
    w = torch.randn(4, 3, 3, 3, device="neuron")
    img = torch.randn(2, 3, 8, 8, device="neuron")
    with torch.autocast("neuron", dtype=dtype):
        assert (a @ a).dtype == dtype                          # matmul: low precision
        assert F.linear(a, a).dtype == dtype
        assert F.conv2d(img, w).dtype == dtype                 # convolution: low precision
        low = a @ a
        assert torch.softmax(low, -1).dtype == torch.float32   # softmax: float32
        assert F.layer_norm(low, (8,)).dtype == torch.float32  # norms: float32
        assert F.mse_loss(low, a).dtype == torch.float32       # losses: float32
        assert low.sum().dtype == torch.float32                # reductions: float32
        assert torch.addcmul(a, low, a).dtype == torch.float32  # mixed inputs: promote
    assert (a @ a).dtype == torch.float32                      # outside autocast


def test_autocast_matmul_matches_cpu_autocast():
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = a @ b
    with torch.autocast("neuron", dtype=torch.bfloat16):
        got = a.to("neuron") @ b.to("neuron")
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)


def test_binary_cross_entropy_is_refused_under_autocast():
    p = torch.rand(4, device="neuron")
    with torch.autocast("neuron"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, p)


def test_grad_scaler_float16_training_step_matches_cpu():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model.load_state_dict(cpu_model.state_dict())
    model.to("neuron")
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    losses = {}
    for device, m in (("cpu", cpu_model), ("neuron", model)):
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        scaler = torch.amp.GradScaler(device)
        for _ in range(3):
            opt.zero_grad()
            with torch.autocast(device, dtype=torch.float16):
                loss = F.mse_loss(m(x.to(device)).float(), y.to(device))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses[device] = loss.item()
        assert scaler.get_scale() > 0
    assert losses["neuron"] == pytest.approx(losses["cpu"], rel=1e-2)
