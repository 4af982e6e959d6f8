# Maps every build of a project that never heard of kernel-symbol-map, without editing it.
# scikit-build-core >= 1.1 names this file in CMAKE_PROJECT_TOP_LEVEL_INCLUDES by itself when
# kernel-symbol-map is in the build environment (its `scikit-build-core.config.default` entry
# point, python/kernel_symbol_map/cmakedir.py); elsewhere pass it:
#
#   cmake -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES="$(python -m kernel_symbol_map --cmake-include)" ...
#
# CMake 3.24+ includes it at the top-level project's first project() call. It decides at the end
# of the top-level CMakeLists.txt (a deferred call), once the project has enabled its languages
# and made its own calls:
#   - the project called kernel_symbol_map() itself: that call stands, this steps aside;
#   - -DKERNEL_SYMBOL_MAP_RETROFIT=OFF: one status line, no map;
#   - no CUDA or HIP language enabled: one status line, no map (a non-GPU project built in an
#     environment that holds this package stays as it was), unless KERNEL_SYMBOL_MAP_RETROFIT is ON;
#   - else kernel_symbol_map() with its defaults: every target that compiles, a map installed
#     into the scikit-build-core package (share/kernel_symbol_map outside one).
# The extractor runs with the interpreter of the virtual environment this file is installed in,
# else Python_EXECUTABLE (scikit-build-core's, inside its isolated build environment), unless
# KernelSymbolMap_PYTHON_EXECUTABLE says otherwise. Nothing is set in the project's scope.
include_guard(GLOBAL)

function(_kernel_symbol_map_retrofit)
  if(DEFINED KERNEL_SYMBOL_MAP_RETROFIT AND NOT KERNEL_SYMBOL_MAP_RETROFIT)
    message(STATUS "kernel_symbol_map(): KERNEL_SYMBOL_MAP_RETROFIT is ${KERNEL_SYMBOL_MAP_RETROFIT}; no map")
    return()
  endif()
  get_property(called GLOBAL PROPERTY _KERNEL_SYMBOL_MAP_CALLED)
  if(called)
    return()  # the project's own call, with its own options, stands
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  # ON maps a project whose GPU code CMake sees as CXX (hipcc as the C++ compiler, say).
  if(NOT KERNEL_SYMBOL_MAP_RETROFIT AND NOT languages MATCHES "(^|;)(CUDA|HIP)(;|$)")
    message(STATUS "kernel_symbol_map(): no CUDA or HIP language in this project; no map")
    return()
  endif()
  find_package(KernelSymbolMap CONFIG REQUIRED PATHS "${CMAKE_CURRENT_FUNCTION_LIST_DIR}" NO_DEFAULT_PATH)
  if(NOT KernelSymbolMap_PYTHON_EXECUTABLE)
    _kernel_symbol_map_own_python(own)
    if(own)  # else kernel_symbol_map() takes Python_EXECUTABLE, with the build's PYTHONPATH intact
      set(KernelSymbolMap_PYTHON_EXECUTABLE "${own}")
      set(KernelSymbolMap_PYTHON_OWN_ENVIRONMENT ON)
    endif()
  endif()
  set(_KernelSymbolMap_CALLER "by the retrofit ${CMAKE_CURRENT_FUNCTION_LIST_FILE} (in CMAKE_PROJECT_TOP_LEVEL_INCLUDES)")
  kernel_symbol_map()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _kernel_symbol_map_retrofit)
