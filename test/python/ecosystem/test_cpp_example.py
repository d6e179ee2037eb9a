"""The C++ example (examples/cpp) builds with find_package(TorchNeuron) and runs; the command
line `python -m torch_neuron` prints what C++ users and humans need."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

import torch_neuron
from conftest import NEURON_ENV_VARS

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cpp"


# The example and the command line run on the default machine unless a test picks one.
def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in NEURON_ENV_VARS}
    env.update(extra)
    return env


def run(args, timeout=600, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, (
        f"{args} exited with {result.returncode}\nstdout:\n{result.stdout}\n"
        f"stderr:\n{result.stderr}")
    return result.stdout


def torch_neuron_cli(*args, env=None):
    return run([sys.executable, "-m", "torch_neuron", *args], cwd=ROOT, env=env or clean_env())


def build_with_find_package(source, tmp_path_factory):
    """Configures and builds a CMake project the way examples/cpp/CMakeLists.txt tells users
    to; returns its build directory."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed: the C++ example cannot be built")
    build = tmp_path_factory.mktemp(source.name + "-build")
    configure = ["cmake", "-S", str(source), "-B", str(build),
                 f"-DCMAKE_PREFIX_PATH={torch_neuron_cli('cmake-prefix-path').strip()}"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    if shutil.which("ccache"):
        configure += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    run(configure)
    run(["cmake", "--build", str(build)])
    return build


@pytest.fixture(scope="module")
def example_binary(tmp_path_factory):
    return build_with_find_package(EXAMPLE, tmp_path_factory) / "neuron_example"


@pytest.mark.extended  # a second CMake build against libtorch: about 22 s
def test_a_program_that_only_uses_libtorch_gets_the_neuron_device(tmp_path_factory):
    # test/cpp_link links TorchNeuron::torch_neuron with --as-needed and calls no torch_neuron
    # function: the library must stay linked so that "neuron" exists when main() runs.
    binary = build_with_find_package(ROOT / "test" / "cpp_link", tmp_path_factory)
    out = run([str(binary / "neuron_link_check")], env=clean_env())
    assert "device: neuron:0" in out and "sum: 30" in out, out


def test_cpp_example_matches_cpu(example_binary):
    out = run([str(example_binary)], env=clean_env())
    result = re.search(r"result: (\S+) \(CPU: (\S+)\)", out)
    assert result, out
    assert float(result.group(1)) == pytest.approx(float(result.group(2)), rel=1e-4)
    assert "devices: 4 on trn2.3xlarge" in out
    device_us = re.search(r"simulated device time: (\S+) us", out)
    assert device_us and float(device_us.group(1)) > 0, out
    assert out.rstrip().endswith("OK"), out


def test_cpp_example_follows_the_instance_variable(example_binary):
    out = run([str(example_binary)], env=clean_env(TORCH_NEURON_INSTANCE="trn1.2xlarge"))
    assert "devices: 2 on trn1.2xlarge" in out


def test_cmake_prefix_path_names_torch_neuron_and_torch():
    out = torch_neuron_cli("cmake-prefix-path")
    assert out == f"{torch_neuron.cmake_prefix_path};{torch.utils.cmake_prefix_path}\n"
    neuron_dir, torch_dir = out.strip().split(";")
    assert (pathlib.Path(neuron_dir) / "TorchNeuron" / "TorchNeuronConfig.cmake").is_file()
    assert (pathlib.Path(torch_dir) / "Torch" / "TorchConfig.cmake").is_file()


def test_info_describes_the_default_instance():
    out = torch_neuron_cli("info")
    assert re.search(r"instance:\s+trn2\.3xlarge \(1 x Trainium2, NeuronCore-v3\)", out), out
    assert re.search(r"devices:\s+4 \(neuron:0\.\.neuron:3\)", out), out
    assert re.search(r"HBM per core:\s+24\.0 GiB", out), out
    assert re.search(r"peak BF16:\s+157\.3 TFLOPS per core \(product page: 667 per chip\)", out), out
    assert re.search(r"peak FP32:\s+39\.3 TFLOPS per core", out), out


def test_info_follows_the_instance_variable():
    out = torch_neuron_cli("info", env=clean_env(TORCH_NEURON_INSTANCE="trn1.32xlarge"))
    assert re.search(r"instance:\s+trn1\.32xlarge \(16 x Trainium1", out), out
    assert re.search(r"devices:\s+32 ", out), out
    assert re.search(r"peak BF16:\s+91\.8 TFLOPS per core \(product page: 190 per chip\)", out), out
    assert re.search(r"HBM streaming:\s+272 GB/s per core", out), out


def test_cli_without_command_prints_usage():
    result = subprocess.run([sys.executable, "-m", "torch_neuron"], capture_output=True,
                            text=True, cwd=ROOT, env=clean_env(), timeout=120)
    assert result.returncode == 2
    assert "cmake-prefix-path" in result.stderr and "info" in result.stderr
