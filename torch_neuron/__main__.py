"""Command line of torch_neuron.

    python -m torch_neuron cmake-prefix-path   # for cmake -DCMAKE_PREFIX_PATH=... (C++ programs)
    python -m torch_neuron info                # the simulated Trainium instance
"""

import argparse

import torch

import torch_neuron


def cmake_prefix_path(args: argparse.Namespace) -> None:
    # find_package(TorchNeuron) also needs Torch's config, so both directories are printed.
    print(f"{torch_neuron.cmake_prefix_path};{torch.utils.cmake_prefix_path}")


def info(args: argparse.Namespace) -> None:
    inst = torch_neuron._C._instance_info()
    count = torch.neuron.device_count()
    print(f"instance:      {inst['name']} ({inst['chips']} x {inst['chip']}, {inst['core_version']})")
    print(f"devices:       {count} (neuron:0..neuron:{count - 1})")
    print(f"HBM per core:  {torch.neuron.get_device_properties(0).total_memory / 2**30:.1f} GiB")
    print(f"peak BF16:     {inst['bf16_tflops_per_chip']:g} TFLOPS per chip")
    print(f"peak FP32:     {inst['fp32_tflops_per_chip']:g} TFLOPS per chip")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m torch_neuron", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "cmake-prefix-path", help="print the CMAKE_PREFIX_PATH for find_package(TorchNeuron)"
    ).set_defaults(run=cmake_prefix_path)
    commands.add_parser("info", help="describe the simulated Trainium instance").set_defaults(run=info)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except RuntimeError as e:  # a bad TORCH_NEURON_INSTANCE or NEURON_RT_VISIBLE_CORES
        parser.exit(1, f"{parser.prog}: error: {e}\n")


if __name__ == "__main__":
    main()
