"""torch.compile(backend="neuron"): TorchNeuron's compile backend name.

Dynamo captures the graph and AOTAutograd splits forward and backward, as for any backend;
the resulting ATen graphs then run op by op on the neuron device, where each op is a device
op with its simulated cost. This gives compiled programs the same results and the same
performance report as eager ones. (Graph-level fusion for the simulated device is future work.)

Registered through the `torch_dynamo_backends` entry point, so Dynamo is imported only when a
program compiles.
"""

import torch


def _run_graph_eagerly(graph_module: torch.fx.GraphModule, example_inputs):
    return graph_module.forward


def neuron_backend(graph_module: torch.fx.GraphModule, example_inputs):
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_run_graph_eagerly)(graph_module, example_inputs)
