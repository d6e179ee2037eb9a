"""A compiled graph's `call` as one scheduled launch (Note [Compiled graph schedule] in
csrc/aten/GraphSchedule.h): the wrapper Inductor generates ends with
`call = _schedule_graph(call, device, name)`."""

from torch_neuron._C import _close_graph, _open_graph


def _schedule_graph(call, device: int, name: str):
    def scheduled_call(args):
        _open_graph(device, name)
        try:
            return call(args)
        finally:
            _close_graph()

    return scheduled_call
