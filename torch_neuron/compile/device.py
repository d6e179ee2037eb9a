"""What Dynamo and Inductor ask of the neuron device at compile time."""

import torch
from torch._dynamo.device_interface import CpuInterface
from torch._inductor.codegen.common import DeviceOpOverrides


class NeuronInterface(CpuInterface):
    """Dynamo's view of the device. Inductor sizes its split reductions from the device's
    properties; the kernels are CPU code, so the CPU's answers (its core count) are the right
    ones, and only the device bookkeeping is neuron's."""

    @staticmethod
    def is_available() -> bool:
        return torch.neuron.is_available()

    @staticmethod
    def device_count() -> int:
        return torch.neuron.device_count()

    @staticmethod
    def current_device() -> int:
        return torch.neuron.current_device()

    @staticmethod
    def set_device(device) -> None:
        torch.neuron.set_device(device)

    @staticmethod
    def synchronize(device=None) -> None:
        torch.neuron.synchronize(device)


class NeuronDeviceOpOverrides(DeviceOpOverrides):
    """Lines the generated Python wrapper uses for device bookkeeping. The kernels take no
    stream: they run on the host, and their launch goes to the current neuron stream."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"def {name}(device): return 0"

    def set_device(self, device_idx: int) -> str:
        return f"torch.neuron.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.neuron.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.neuron.device({device_idx})"

    def cpp_kernel_type(self) -> str:
        return "void*"
