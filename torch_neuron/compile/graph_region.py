"""A compiled graph's `call` as one scheduled launch (Note [Compiled graph schedule] in
csrc/aten/GraphSchedule.h): the wrapper Inductor generates ends with
`call = _schedule_graph(call, device, name)`."""

from torch_neuron._C import _close_graph, _open_graph


def _tensors(values) -> list:
    import torch

    if isinstance(values, torch.Tensor):
        return [values]
    return [v for v in (values or ()) if isinstance(v, torch.Tensor)]


def _schedule_graph(call, device: int, name: str):
    # The graph's inputs and outputs stay in HBM; what else it makes may stay in SBUF
    # (Note [Intermediates in SBUF] in trnsim/schedule.h). Only their address ranges are
    # taken: `call` frees its inputs as it goes (it clears `args`), and still may.
    def scheduled_call(args):
        _open_graph(device, name, _tensors(args))
        outputs = None
        try:
            outputs = call(args)
            return outputs
        finally:
            _close_graph(_tensors(outputs))

    return scheduled_call
