"""Results keep the CPU's layout (strides), not only its values: the CI slice of the layout sweep
(test/conformance/layout_sweep.py; every sample: `python test/conformance/opinfo_sweep.py
--layout`), and the cases that made it (Note [Composite kernels on neuron]).
"""

import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_neuron
from conftest import on_shallow_stack

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "conformance"))
import layout_sweep  # noqa: E402

# Samples per OpInfo in CI (one of them the one with the most dimensions), in four layouts each.
SLICE_SAMPLES = 2


@pytest.fixture(scope="module")
def layout_slice():
    def run():
        ops = layout_sweep.select_ops()
        return ops, layout_sweep.sweep(ops, max_samples=SLICE_SAMPLES, progress=False)
    return on_shallow_stack(run)


def test_every_opinfo_keeps_the_cpu_layout(layout_slice):
    ops, report = layout_slice
    assert len(ops) > 600  # the whole float32 OpInfo database, not a few ops
    problems = layout_sweep.check_against_expected(report, ops,
                                                   layout_sweep.load_expected_differences())
    assert not problems, "\n".join(problems)


def test_expected_differences_have_reasons():
    for key, kinds in layout_sweep.load_expected_differences().items():
        assert kinds and set(kinds) <= {"outputs", "gradients"}, key
        assert all(len(reason) > 40 for reason in kinds.values()), key


def test_the_sweep_gives_each_device_the_sample_strides():
    x = torch.randn(3, 4, 5)
    for layout in (layout_sweep.transposed, layout_sweep.non_dense):
        sample = layout(x)
        for device in ("cpu", "neuron"):
            copy = layout_sweep.copy_with_strides(device)(sample)
            assert copy.stride() == sample.stride() and copy.device.type == device
            assert copy.data_ptr() != sample.data_ptr()  # a fresh copy
            assert torch.equal(copy.cpu(), x)


def test_ops_with_a_cpu_kernel_run_it_rather_than_a_composite():
    # Kind 1 of the Note: an op with both a CPU kernel and a composite kernel, and no neuron
    # kernel, would decompose on neuron where the CPU runs its kernel.
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    composites = ("CompositeImplicitAutograd", "CompositeExplicitAutograd",
                  "CompositeExplicitAutogradNonFunctional")
    missing = [name for name in torch._C._dispatch_get_all_op_names()
               if name.startswith("aten::") and has(name, "CPU")
               and any(has(name, key) for key in composites) and not has(name, "PrivateUse1")]
    assert not missing, missing


def test_max_pool1d_of_a_transposed_input_is_contiguous_as_on_cpu():
    x = torch.randn(1, 8, 3).transpose(1, 2)
    expected = F.max_pool1d(x, 1)
    result = F.max_pool1d(x.to("neuron"), 1)
    assert expected.stride() == result.stride() == (24, 8, 1)
    assert torch.equal(result.view(-1).cpu(), expected.view(-1))
    with torch.inference_mode():
        assert F.max_pool1d(x.to("neuron"), 2).stride() == F.max_pool1d(x, 2).stride()
    torch_neuron.clear_op_tracking()
    F.max_pool1d(x.to("neuron"), 2)
    assert torch_neuron.get_fallback_ops() == {}


def test_max_pool1d_under_autograd_decomposes_as_on_cpu():
    # The CPU records the gradient through max_pool2d_with_indices, whose result keeps the
    # input's stride order; neuron does the same, and the gradients are equal.
    x = torch.randn(2, 8, 6).transpose(1, 2)
    cpu_x = x.clone().requires_grad_()
    neuron_x = x.to("neuron").requires_grad_()
    expected, result = F.max_pool1d(cpu_x, 2), F.max_pool1d(neuron_x, 2)
    assert result.stride() == expected.stride() and result.grad_fn is not None
    expected.sum().backward()
    result.sum().backward()
    assert neuron_x.grad.stride() == cpu_x.grad.stride()
    assert torch.equal(neuron_x.grad.cpu(), cpu_x.grad)
    with torch.no_grad():  # nothing to record: the CPU's direct kernel again
        assert F.max_pool1d(neuron_x, 2).stride() == F.max_pool1d(cpu_x, 2).stride()


def test_native_channel_shuffle_keeps_channels_last_as_on_cpu():
    x = torch.randn(2, 6, 3, 4).to(memory_format=torch.channels_last)
    expected = torch.native_channel_shuffle(x, 2)
    result = torch.native_channel_shuffle(x.to("neuron"), 2)
    assert result.stride() == expected.stride()
    assert torch.equal(result.cpu(), expected)
