"""torch.neuron: the device module, shaped like torch.cuda."""

from torch import OutOfMemoryError  # torch.neuron.OutOfMemoryError, as torch.cuda.OutOfMemoryError

from torch_neuron.neuron.device import (
    NeuronDeviceProperties,
    can_device_access_peer,
    current_device,
    device,
    device_count,
    device_of,
    get_amp_supported_dtype,
    get_device_capability,
    get_device_name,
    get_device_properties,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    set_device,
    simulated_time_ns,
    synchronize,
    _is_in_bad_fork,
    _lazy_init,
)
from torch_neuron.neuron.memory import (
    caching_allocator_alloc,
    caching_allocator_delete,
    empty_cache,
    get_per_process_memory_fraction,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from torch_neuron.neuron.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_neuron.neuron.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    is_current_stream_capturing,
    set_stream,
    stream,
)


def __getattr__(name):
    # torch.neuron._initialized, read like torch.cuda._initialized by torch.utils.checkpoint: it
    # stashes and restores the device's RNG state around recomputation only when this is true,
    # so without it dropout inside a checkpointed block recomputes with a different mask.
    if name == "_initialized":
        return is_initialized()
    # torch.neuron.default_generators: one generator per device, as torch.cuda has.
    if name == "default_generators":
        from torch_neuron.neuron.random import _generator

        return tuple(_generator(i) for i in range(device_count()))
    # The code generators TorchInductor looks up for a PrivateUse1 device (torch_neuron.compile).
    if name in ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen"):
        from torch_neuron.compile import codegen_for

        return codegen_for(name)
    raise AttributeError(f"module 'torch.neuron' has no attribute '{name}'")
