# Maps every build of a project that never heard of kernel-symbol-map, without editing it:
#
#   cmake -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES="$(python -m kernel_symbol_map --cmake-include)" ...
#   pip wheel -C cmake.define.CMAKE_PROJECT_TOP_LEVEL_INCLUDES="$(python -m kernel_symbol_map --cmake-include)" .
#
# CMake 3.24+ includes it at the top-level project's first project() call, so
# the file-API query is in place from the first configure and the build ends
# with an exact map. The extractor runs with the interpreter of the
# environment this file is installed in (a pip build's isolated environment
# does not have this package), unless KernelSymbolMap_PYTHON_EXECUTABLE says
# otherwise. Do not use it on a project that calls kernel_symbol_map() itself.
include_guard(GLOBAL)
find_package(KernelSymbolMap CONFIG REQUIRED PATHS "${CMAKE_CURRENT_LIST_DIR}" NO_DEFAULT_PATH)
if(NOT KernelSymbolMap_PYTHON_EXECUTABLE)
  _kernel_symbol_map_own_python(KernelSymbolMap_PYTHON_EXECUTABLE)
  set(KernelSymbolMap_PYTHON_OWN_ENVIRONMENT ON)
endif()
kernel_symbol_map()
