"""Quickstart: unchanged PyTorch code on a simulated Trainium NeuronCore.

    python examples/quickstart.py
"""

import torch
import torch_neuron

x = torch.randn(1024, 1024).to("neuron")  # lives in the simulated HBM of neuron:0
y = (x @ x).relu().sum()  # runs on the simulated NeuronCore, charged to its clock
print("result:", y.item(), "(CPU says", (x.cpu() @ x.cpu()).relu().sum().item(), ")")

props = torch.neuron.get_device_properties()
print(f"devices: {torch.neuron.device_count()} x {props.name}, "
      f"{props.total_memory / 2**30:.0f} GiB HBM each")
print(f"HBM in use: {torch.neuron.memory_allocated() / 2**20:.1f} MiB")
torch.neuron.synchronize()
print(f"simulated device time so far: {torch.neuron.simulated_time_ns() / 1e3:.1f} us")
print("ops run on the device:", sorted(torch_neuron.get_executed_ops()))
print("ops that fell back to the CPU:", torch_neuron.get_fallback_ops())
