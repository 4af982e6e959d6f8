# A tiny hipify, the shape of vLLM's ROCm build (cmake/hipify.py around torch's
# hipify, run at build time by hipify_sources_target): copy the CUDA sources into
# the build tree, rename them as torch's hipify does (.cu -> .hip; a header whose
# name it does not otherwise change gets a _hip suffix), rewrite the includes and
# the CUDA runtime API names (cudaMalloc -> hipMalloc...), and compile the copies.
# kernel_symbol_map()'s SOURCE_MIRRORS then traces each copy back to the file
# people edit. Each copy is a build step of its own (cmake -P this file), so the
# originals are build inputs, not configure inputs: editing one re-makes its
# copy and recompiles that object only.
if(CMAKE_SCRIPT_MODE_FILE AND COMPAT)  # cmake -P: write hipify's compatibility header to COMPAT
  file(WRITE "${COMPAT}" "#pragma once\n#include <hip/hip_runtime.h>\n")
  return()
endif()
if(CMAKE_SCRIPT_MODE_FILE)  # cmake -P: hipify one file: FROM, TO, RENAMES ("old=new|old=new...")
  string(REPLACE "|" ";" renames "${RENAMES}")
  file(READ "${FROM}" text)
  foreach(pair IN LISTS renames)  # includes follow the renames
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 old_name)
    list(GET pair 1 new_name)
    string(REPLACE "\"${old_name}\"" "\"${new_name}\"" text "${text}")
  endforeach()
  string(REGEX REPLACE "cuda([A-Z])" "hip\\1" text "${text}")
  if(NOT FROM MATCHES "\\.cpp$")
    set(text "#include \"hip_compat.h\"\n${text}")
  endif()
  file(CONFIGURE OUTPUT "${TO}" CONTENT "${text}" @ONLY)
  return()
endif()

function(cuda_ext_hipify from to out_sources)
  file(GLOB names RELATIVE "${from}" "${from}/*")
  set(renames "")
  foreach(name IN LISTS names)
    get_filename_component(ext "${name}" LAST_EXT)
    get_filename_component(stem "${name}" NAME_WLE)
    if(ext STREQUAL ".cu")
      list(APPEND renames "${name}=${stem}.hip")
    elseif(ext STREQUAL ".cuh")
      list(APPEND renames "${name}=${stem}_hip.cuh")
    else()
      list(APPEND renames "${name}=${name}")
    endif()
  endforeach()
  string(REPLACE ";" "|" joined "${renames}")
  set(sources "")
  foreach(pair IN LISTS renames)
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 name)
    list(GET pair 1 new)
    add_custom_command(
      OUTPUT "${to}/${new}"
      COMMAND "${CMAKE_COMMAND}" "-DFROM=${from}/${name}" "-DTO=${to}/${new}" "-DRENAMES=${joined}"
              -P "${CMAKE_CURRENT_FUNCTION_LIST_FILE}"
      DEPENDS "${from}/${name}" "${CMAKE_CURRENT_FUNCTION_LIST_FILE}"
      COMMENT "hipify ${name}"
      VERBATIM)
    list(APPEND sources "${to}/${new}")
  endforeach()
  # A file only the copy has (hipify's compatibility header): the map keeps its copy path and says so.
  # Written by a build rule, as hipify writes every file: a file the configure wrote would have inputs no
  # map knows, and every change would reach the objects that include it.
  add_custom_command(
    OUTPUT "${to}/hip_compat.h"
    COMMAND "${CMAKE_COMMAND}" "-DCOMPAT=${to}/hip_compat.h" -P "${CMAKE_CURRENT_FUNCTION_LIST_FILE}"
    DEPENDS "${CMAKE_CURRENT_FUNCTION_LIST_FILE}"
    COMMENT "hipify's hip_compat.h"
    VERBATIM)
  list(APPEND sources "${to}/hip_compat.h")
  # Every copy, headers included, before anything compiles them (as hipify_sources_target does).
  add_custom_target(cuda_ext_hipify DEPENDS ${sources})
  set(${out_sources} "${sources}" PARENT_SCOPE)
endfunction()
