# find_package(TorchNeuron) for libtorch programs. Defines the imported target
# TorchNeuron::torch_neuron (libtorch_neuron.so with its headers; brings in Torch).
#
#   cmake -DCMAKE_PREFIX_PATH="$(python -m torch_neuron cmake-prefix-path)" ..
#
# This file is installed as torch_neuron/share/cmake/TorchNeuron/TorchNeuronConfig.cmake.
include(CMakeFindDependencyMacro)
find_dependency(Torch)

get_filename_component(_TORCH_NEURON_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT EXISTS "${_TORCH_NEURON_PREFIX}/lib/libtorch_neuron.so")
  set(TorchNeuron_FOUND FALSE)
  set(TorchNeuron_NOT_FOUND_MESSAGE "${_TORCH_NEURON_PREFIX}/lib/libtorch_neuron.so is missing: \
the torch_neuron package is not built (pip install --no-build-isolation -e .)")
  return()
endif()
if(NOT TARGET TorchNeuron::torch_neuron)
  # The neuron device registers itself when libtorch_neuron.so loads; a program may use it
  # through libtorch alone (torch::Device("neuron:0")) and reference no symbol of it. With
  # --as-needed (Ubuntu's default) the linker would then drop the library, so it is linked with
  # --no-as-needed, as Torch's own targets link torch_cpu (Caffe2Targets.cmake), and found at
  # run time through an rpath.
  set(_TORCH_NEURON_LIBRARY "${_TORCH_NEURON_PREFIX}/lib/libtorch_neuron.so")
  add_library(TorchNeuron::torch_neuron INTERFACE IMPORTED)
  set_target_properties(TorchNeuron::torch_neuron PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_TORCH_NEURON_PREFIX}/include"
    INTERFACE_LINK_LIBRARIES
      "-Wl,--no-as-needed,\"${_TORCH_NEURON_LIBRARY}\" -Wl,--as-needed;${TORCH_LIBRARIES}"
    INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_TORCH_NEURON_PREFIX}/lib")
  unset(_TORCH_NEURON_LIBRARY)
endif()
unset(_TORCH_NEURON_PREFIX)
set(TorchNeuron_FOUND TRUE)
