"""torch.compile's random-op replay for checkpointed regions, on neuron.

Activation checkpointing under torch.compile replays each random op of a checkpointed region in
the backward with the generator state its forward used: AOTAutograd wraps the forward's op in
the run_and_save_rng_state operator and the backward's in run_with_rng_state
(torch/_prims/rng_prims.py). Their backend choice knows the CPU, CUDA, HPU and XPU only, so on
neuron (dropout, or attention, whose fused op is marked random) compiling a checkpointed layer
failed with "Backend not supported for neuron", whatever the compile backend. install() makes
them save and restore torch.neuron's generator state for neuron tensors, as they do CUDA's.
Installed when torch_neuron is imported (the modules it touches are already loaded by torch);
test/python/compile/test_compile.py fails when PyTorch changes what it patches."""

_PATCHED = "_torch_neuron_patched"


def install() -> None:
    """Once per process: both operators' backend choice sends neuron tensors to neuron's."""
    import torch
    from torch._C import DispatchKey
    from torch._prims import rng_prims

    def save(op, *args, **kwargs):
        from torch._guards import detect_fake_mode
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # the generator's state is real even while tracing
            state = torch.neuron.get_rng_state()
        fake_mode = detect_fake_mode(args)
        if fake_mode is not None:  # a generator's state has one size
            state = fake_mode.from_tensor(state, static_shapes=True)
        return state, op(*args, **kwargs)

    def replay(rng_state, op, *args, **kwargs):
        current = torch.neuron.get_rng_state()
        torch.neuron.set_rng_state(rng_state.cpu())
        try:
            return op(*args, **kwargs)
        finally:
            torch.neuron.set_rng_state(current)

    for hop, neuron_impl, state_args in ((rng_prims.run_and_save_rng_state, save, 0),
                                         (rng_prims.run_with_rng_state, replay, 1)):
        original = hop.py_kernels[DispatchKey.BackendSelect]
        if getattr(original, _PATCHED, False):
            continue

        def backend_select(*args, _original=original, _neuron=neuron_impl, _skip=state_args,
                           **kwargs):
            if rng_prims.get_device(args[_skip + 1:], kwargs) == "neuron":
                return _neuron(*args, **kwargs)
            return _original(*args, **kwargs)

        setattr(backend_select, _PATCHED, True)
        # The fake-tensor and tracing implementations call the backend choice directly, as a
        # variable of their enclosing function: replace it there too.
        for impl in (*hop.python_key_table.values(), *_fake_impls(hop)):
            for cell in getattr(impl, "__closure__", None) or ():
                if cell.cell_contents is original:
                    cell.cell_contents = backend_select
        hop.py_kernels[DispatchKey.BackendSelect] = backend_select
        hop.py_impl(DispatchKey.PrivateUse1)(neuron_impl)
        hop._dispatch_cache.clear()


def _fake_impls(hop):
    from torch._higher_order_ops.utils import registered_hop_fake_fns

    impl = registered_hop_fake_fns.get(hop)
    return (impl,) if impl is not None else ()
