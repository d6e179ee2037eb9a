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
  add_library(TorchNeuron::torch_neuron SHARED IMPORTED)
  set_target_properties(TorchNeuron::torch_neuron PROPERTIES
    IMPORTED_LOCATION "${_TORCH_NEURON_PREFIX}/lib/libtorch_neuron.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_TORCH_NEURON_PREFIX}/include"
    INTERFACE_LINK_LIBRARIES "${TORCH_LIBRARIES}")
endif()
unset(_TORCH_NEURON_PREFIX)
set(TorchNeuron_FOUND TRUE)
