# Checks of the CUDA build (a CUDA PyTorch's libtorch, scripts/setup-cuda.sh), run after
# find_package(Torch). Debian's libtorch-dev (CPU, 1.13) is installed too, and TorchConfig looks
# for its Caffe2 config and libraries in the default paths before its own folder: without the
# PyTorch folder first in CMAKE_PREFIX_PATH a build would mix 2.x headers with Debian's 1.13
# libraries. Refuse that mix here, naming both.
get_filename_component(_conveyor_torch_prefix "${Torch_DIR}/../../.." ABSOLUTE)
foreach(_conveyor_path IN ITEMS "${TORCH_LIBRARY}" "${Caffe2_DIR}" "${C10_CUDA_LIBRARY}")
  file(RELATIVE_PATH _conveyor_rel "${_conveyor_torch_prefix}" "${_conveyor_path}")
  if(_conveyor_rel MATCHES "^\\.\\./" OR IS_ABSOLUTE "${_conveyor_rel}")
    message(FATAL_ERROR
      "The CUDA build found TorchConfig in ${Torch_DIR} but ${_conveyor_path} outside "
      "${_conveyor_torch_prefix} (Debian's libtorch?). Put ${_conveyor_torch_prefix} first in "
      "CMAKE_PREFIX_PATH (scripts/setup.sh --cuda does).")
  endif()
endforeach()
message(STATUS "Conveyor: CUDA build against ${_conveyor_torch_prefix}, CUDA toolkit "
               "${CUDAToolkit_VERSION} in ${CUDAToolkit_LIBRARY_DIR}")

# PyTorch's wheels are built with a newer GCC (manylinux_2_28's gcc-toolset) whose libstdc++
# pieces missing from older systems are linked into libtorch.so and exported from it
# (std::filesystem::remove_all, ...). Listed before libstdc++.so.6, libtorch.so would lend its
# copies to all of Conveyor's code, and they crash with Debian 12's libstdc++ (remove_all jumps to
# address 0). Naming libstdc++ first makes the system's own definitions win.
add_link_options("LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")
