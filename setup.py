"""Builds the native parts with CMake (Ninja, ccache when present) and places them in the package:

    torch_neuron/_C.*.so                     the Python extension
    torch_neuron/lib/libtorch_neuron.so      the backend, for Python and for C++ programs
    torch_neuron/include/torch_neuron/       the C++ API headers
    torch_neuron/share/cmake/TorchNeuron/    find_package(TorchNeuron) config

The CMake build directory is build/ (ctest runs there).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
BUILD_DIR = ROOT / "build"


def replace_file(source, target):
    """Copies `source` over `target` by renaming a copy into place: a process that has the old
    library loaded (a test run during a rebuild) keeps its file, where copying over it in
    place would change the code under it and crash it."""
    target = Path(target)
    if target.is_dir():
        target = target / Path(source).name
    staged = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copy2(source, staged)
    os.replace(staged, target)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_type = os.environ.get("TORCH_NEURON_BUILD_TYPE", "Release")
        tests = os.environ.get("TORCH_NEURON_BUILD_TESTS", "ON")
        subprocess.check_call(
            ["cmake", "-S", str(ROOT), "-B", str(BUILD_DIR), "-G", "Ninja",
             f"-DCMAKE_BUILD_TYPE={build_type}", f"-DTORCH_NEURON_BUILD_TESTS={tests}",
             f"-DPython3_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", str(BUILD_DIR)])

        ext_path = Path(self.get_ext_fullpath(ext.name))
        ext_path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(next(BUILD_DIR.glob("_C*.so")), ext_path)
        # Editable installs import the package from the source tree; wheels from build_lib.
        targets = {ext_path.parent}
        if self.inplace or getattr(self, "editable_mode", False):
            targets.add(ROOT / "torch_neuron")
        for package_dir in targets:
            self._install_native_files(package_dir)

    @staticmethod
    def _install_native_files(package_dir):
        (package_dir / "lib").mkdir(parents=True, exist_ok=True)
        replace_file(BUILD_DIR / "libtorch_neuron.so", package_dir / "lib" / "libtorch_neuron.so")
        shutil.copytree(ROOT / "csrc" / "include", package_dir / "include", dirs_exist_ok=True)
        cmake_dir = package_dir / "share" / "cmake" / "TorchNeuron"
        cmake_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "cmake" / "TorchNeuronConfig.cmake", cmake_dir)

setup(ext_modules=[Extension("torch_neuron._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
