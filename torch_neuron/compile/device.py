"""What Dynamo and Inductor ask of the neuron device at compile time."""

from typing import Any

import torch
from torch._dynamo.device_interface import (CpuInterface, caching_worker_current_devices,
                                            caching_worker_device_properties)
from torch._inductor.codegen.common import DeviceOpOverrides


class NeuronInterface(CpuInterface):
    """Dynamo's view of the device. Inductor sizes its split reductions from the device's
    properties; the kernels are CPU code, so the CPU's answers (its core count) are the right
    ones, and only the device bookkeeping is neuron's."""

    class Worker:
        """What Inductor asks without the device runtime: the current device (to give a
        default "neuron" an index, utils.decode_device) and the properties, which Inductor
        records in the main process before it forks its compile workers. CpuInterface's
        Worker has only the properties, so it cannot be inherited."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["neuron"] = device

        @staticmethod
        def current_device() -> int:
            if "neuron" in caching_worker_current_devices:
                return caching_worker_current_devices["neuron"]
            return torch.neuron.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            # The CPU's properties for every core (see the class comment above), one entry
            # per visible device so that an index the device would refuse is refused here.
            if "neuron" not in caching_worker_device_properties:
                cpu = CpuInterface.Worker.get_device_properties()
                caching_worker_device_properties["neuron"] = [cpu] * torch.neuron.device_count()
            properties = caching_worker_device_properties["neuron"]
            if device is None:
                index = NeuronInterface.Worker.current_device()
            elif isinstance(device, (str, torch.device)):
                device = torch.device(device)
                if device.type != "neuron":
                    raise ValueError(f"expected a neuron device, got {device}")
                index = NeuronInterface.Worker.current_device() if device.index is None \
                    else device.index
            elif isinstance(device, int) and not isinstance(device, bool):
                index = device
            else:
                raise TypeError("expected a neuron device (an int, 'neuron:N' or a "
                                f"torch.device), got {type(device).__name__}")
            if not 0 <= index < len(properties):
                raise ValueError(f"invalid device neuron:{index}: valid devices are "
                                 f"neuron:0..neuron:{len(properties) - 1}")
            return properties[index]

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
