include_guard(GLOBAL)

#[=======================================================================[.rst:
KernelSymbolMap
---------------

Writes a map of which source file produced each GPU kernel, after every
build. Find it with::

  find_package(KernelSymbolMap CONFIG REQUIRED)

It is found through scikit-build-core's ``cmake.prefix`` entry point when a
project lists ``kernel-symbol-map`` in ``build-system.requires``; through
``-DKernelSymbolMap_DIR=$(python -m kernel_symbol_map --cmake-dir)`` for
setuptools-driven and plain CMake builds; or through ``KernelSymbolMap_DIR``.

.. command:: kernel_symbol_map

  ::

    kernel_symbol_map(
      [TARGETS <target>...]          # default: every target that compiles (host-only ones too), but EXCLUDE_FROM_ALL ones
      [OUTPUT <file>]                # default: ${CMAKE_BINARY_DIR}/kernel_symbol_map.json.gz
      [INSTALL_DESTINATION <dir>]    # default: the scikit-build-core package, else share/kernel_symbol_map
      [COMPONENT <name>...]          # install components (vLLM-style setup.py flows)
      [SOURCE_MIRRORS <copy> <original>...]  # hipified copies -> the sources people edit
      [HOST_COVERAGE]                # instrument host code: records say which host functions each test ran
      [STRICT])                      # fail the build when the map is not complete

  By default every target that compiles is mapped, host-only ones included
  (a header they share with a kernel target must never look clearable);
  targets excluded from ``ALL`` are left out and named in the map. Adds the
  target ``kernel_symbol_map`` (in ``ALL``), which depends on the mapped targets and re-runs the extractor only when one of their objects
  changed; an install step that brings the map up to date (building any
  listed target that was not built) and installs it; and, when the
  environment variable ``KERNEL_SYMBOL_MAP_OUT`` is set at install time, a
  copy of the map in that folder. Call it once, after ``project()`` and
  before your own ``install()`` rules (so that installing after building
  only some targets still works); targets defined later are seen too.

  ``HOST_COVERAGE`` (or ``-DKERNEL_SYMBOL_MAP_HOST_COVERAGE=ON``, which needs
  no edit of the project: a CI build's switch) compiles the host code of
  every mapped target with ``-finstrument-functions -ffunction-sections``
  (through ``-Xcompiler`` for CUDA sources) and links a small runtime,
  compiled from this package's ``kernel_symbol_map_coverage.c``, into each
  mapped library and executable, and keeps an install from stripping their
  symbol tables. The recorder then lists, in each test's
  record, the host functions the test ran (``host_functions``), and ``select
  --base-map`` sends a host change only to the tests that ran a changed
  function. It is for a CI build: every function entered costs a call.
  GCC and Clang as host compilers; HIP sources are left uninstrumented (a
  host change there reaches every test that loaded its library).

  The extractor runs with ``Python_EXECUTABLE`` (or ``Python3_EXECUTABLE``,
  or the interpreter whose environment holds this package), never a bare
  ``python``. Without ``STRICT`` it never fails the build: an incomplete
  map says why in its ``reason``.

Variables:

``KERNEL_SYMBOL_MAP_HOST_COVERAGE``
  ``ON``: as the ``HOST_COVERAGE`` option, for a build configured from the
  command line or ``pip wheel -C cmake.define.KERNEL_SYMBOL_MAP_HOST_COVERAGE=ON``.

``KernelSymbolMap_PYTHON_EXECUTABLE``
  The interpreter the extractor runs with. Set it to choose one; else
  ``kernel_symbol_map()`` sets it to ``Python_EXECUTABLE``,
  ``Python3_EXECUTABLE``, or the interpreter whose environment holds this
  package.

Retrofit, without editing a project (CMake 3.24+): scikit-build-core 1.1+ does it
by itself when ``kernel-symbol-map`` is in ``build-system.requires``; elsewhere::

  cmake -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=$(python -m kernel_symbol_map --cmake-include) ...

runs ``KernelSymbolMapTopLevelInclude.cmake`` at the project's first
``project()``. At the end of the top-level ``CMakeLists.txt`` it calls
``kernel_symbol_map()``, unless the project called it itself, enables no CUDA
or HIP language, or sets ``KERNEL_SYMBOL_MAP_RETROFIT`` to ``OFF``.
#]=======================================================================]

# No variable of this file's scope is read by the functions below: find_package() may run inside a
# function (the retrofit's does), whose variables are gone when a deferred call runs, and the
# include guard keeps a second find_package() from setting them again. An empty folder name
# there once made _kernel_symbol_map_finish remove the whole build folder.

function(_kernel_symbol_map_python out)
  foreach(candidate IN ITEMS "${KernelSymbolMap_PYTHON_EXECUTABLE}" "${Python_EXECUTABLE}" "${Python3_EXECUTABLE}")
    if(candidate)
      set(${out} "${candidate}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  _kernel_symbol_map_own_python(own)
  if(own)
    set(${out} "${own}" PARENT_SCOPE)
    return()
  endif()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(${out} "${Python3_EXECUTABLE}" PARENT_SCOPE)
endfunction()

# `cmake -E env` arguments for the extractor's interpreter. When it is this package's own
# environment (the top-level include), a pip build's isolation variables must not reach
# it: pip points PYTHONPATH at a sitecustomize that hides the interpreter's site-packages.
function(_kernel_symbol_map_python_env out)
  if(KernelSymbolMap_PYTHON_OWN_ENVIRONMENT)
    set(${out} --unset=PYTHONPATH --unset=PYTHONNOUSERSITE --unset=PYTHONHOME PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# The interpreter of the virtual environment this package is installed in, or "":
# <venv>/lib/pythonX.Y/site-packages/kernel_symbol_map/share/cmake/KernelSymbolMap
function(_kernel_symbol_map_own_python out)
  get_filename_component(venv "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../../../../../../.." ABSOLUTE)
  foreach(name IN ITEMS python3 python)
    if(EXISTS "${venv}/bin/${name}" AND EXISTS "${venv}/pyvenv.cfg")
      set(${out} "${venv}/bin/${name}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

function(_kernel_symbol_map_compiling_targets dir out excluded_out)
  # Every target under ${dir} that compiles sources, host-only ones included: a header a host
  # target shares must never look clearable. Targets excluded from ALL are left out (the build
  # never builds them), and named in ${excluded_out}.
  set(found "")
  set(excluded "")
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(tgt IN LISTS targets)
    if(NOT TARGET "${tgt}")
      continue()
    endif()
    get_target_property(type "${tgt}" TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(imported "${tgt}" IMPORTED)
    if(imported)
      continue()
    endif()
    get_target_property(not_in_all "${tgt}" EXCLUDE_FROM_ALL)
    if(not_in_all)
      list(APPEND excluded "${tgt}")
    else()
      list(APPEND found "${tgt}")
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _kernel_symbol_map_compiling_targets("${sub}" sub_found sub_excluded)
    list(APPEND found ${sub_found})
    list(APPEND excluded ${sub_excluded})
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
  set(${excluded_out} "${excluded}" PARENT_SCOPE)
endfunction()

function(kernel_symbol_map)
  cmake_parse_arguments(PARSE_ARGV 0 ARG
    "STRICT;HOST_COVERAGE"            # options
    "OUTPUT;INSTALL_DESTINATION"      # one value each
    "TARGETS;COMPONENT;SOURCE_MIRRORS")  # lists: targets to map; install components; copy/original pairs
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kernel_symbol_map(): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(ARG_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "kernel_symbol_map(): ${ARG_KEYWORDS_MISSING_VALUES} needs a value")
  endif()
  list(LENGTH ARG_SOURCE_MIRRORS mirror_items)
  math(EXPR odd "${mirror_items} % 2")
  if(odd)
    message(FATAL_ERROR "kernel_symbol_map(): SOURCE_MIRRORS takes pairs: <copy-dir> <original-dir> ...")
  endif()
  set(mirror_args "")
  while(ARG_SOURCE_MIRRORS)
    list(POP_FRONT ARG_SOURCE_MIRRORS copy original)
    get_filename_component(copy "${copy}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    get_filename_component(original "${original}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND mirror_args "--mirror=${copy}=${original}")
  endwhile()
  # Who calls, for "called twice": the retrofit names itself; a project's call, its file and line.
  if(_KernelSymbolMap_CALLER)
    set(caller "${_KernelSymbolMap_CALLER}")
  else()
    _kernel_symbol_map_call_site("${CMAKE_CURRENT_LIST_FILE}" caller)
  endif()
  get_property(called GLOBAL PROPERTY _KERNEL_SYMBOL_MAP_CALLED)
  if(called)
    if(NOT called STREQUAL caller)  # one file making both calls names its lines once
      string(APPEND called " and ${caller}")
    endif()
    message(FATAL_ERROR "kernel_symbol_map(): called twice, ${called}; call it once and list every target in TARGETS")
  endif()
  set_property(GLOBAL PROPERTY _KERNEL_SYMBOL_MAP_CALLED "${caller}")

  _kernel_symbol_map_python(python)
  if(NOT python)
    message(FATAL_ERROR "kernel_symbol_map(): no Python found; set Python_EXECUTABLE to an interpreter with kernel-symbol-map installed")
  endif()
  _kernel_symbol_map_python_env(python_env)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env ${python_env} "${python}" -c "import kernel_symbol_map.producer.extract"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kernel_symbol_map(): no usable Python: ${python} cannot import kernel_symbol_map; install kernel-symbol-map there or set Python_EXECUTABLE")
  endif()
  set(KernelSymbolMap_PYTHON_EXECUTABLE "${python}" PARENT_SCOPE)

  if(NOT ARG_OUTPUT)
    set(ARG_OUTPUT "${CMAKE_BINARY_DIR}/kernel_symbol_map.json.gz")
  endif()
  if(NOT IS_ABSOLUTE "${ARG_OUTPUT}")
    set(ARG_OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/${ARG_OUTPUT}")
  endif()
  if(NOT DEFINED ARG_INSTALL_DESTINATION)
    if(DEFINED SKBUILD_PROJECT_NAME)
      string(REPLACE "-" "_" ARG_INSTALL_DESTINATION "${SKBUILD_PROJECT_NAME}")
    else()
      set(ARG_INSTALL_DESTINATION "share/kernel_symbol_map")
    endif()
  endif()

  # The file-API query: answered by this configure on CMake >= 3.27, else by the
  # next one; until then the extractor works from the object lists and deps logs.
  file(CONFIGURE OUTPUT "${CMAKE_BINARY_DIR}/.cmake/api/v1/query/client-kernel_symbol_map/query.json"
       CONTENT [[{"requests": [{"kind": "codemodel", "version": 2}, {"kind": "toolchains", "version": 1}, {"kind": "cache", "version": 2}]}]])
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.27)
    cmake_file_api(QUERY API_VERSION 1 CODEMODEL 2 TOOLCHAINS 1 CACHE 2)
  endif()

  # Install: bring the map up to date first (the ALL target does not run when a
  # build names its targets; this builds any listed target not built yet), then
  # install it, then copy it for CI if asked. Declared here, not deferred, so
  # that it runs before install() rules the project declares after this call.
  if(NOT ARG_COMPONENT)
    set(ARG_COMPONENT "${CMAKE_INSTALL_DEFAULT_COMPONENT_NAME}")
  endif()
  if(NOT ARG_COMPONENT)  # unset inside project(), where CMAKE_PROJECT_TOP_LEVEL_INCLUDES run
    set(ARG_COMPONENT "Unspecified")
  endif()
  set(level WARNING)
  if(ARG_STRICT)
    set(level FATAL_ERROR)
  endif()
  foreach(component IN LISTS ARG_COMPONENT)
    install(CODE "
execute_process(COMMAND \"${CMAKE_COMMAND}\" --build \"${CMAKE_BINARY_DIR}\" --target kernel_symbol_map
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(${level} \"kernel_symbol_map(): bringing the map up to date failed (\${rc})\")
endif()" COMPONENT "${component}")
    install(FILES "${ARG_OUTPUT}" DESTINATION "${ARG_INSTALL_DESTINATION}" COMPONENT "${component}")
    install(CODE "
if(DEFINED ENV{KERNEL_SYMBOL_MAP_OUT} AND NOT \"\$ENV{KERNEL_SYMBOL_MAP_OUT}\" STREQUAL \"\")
  file(COPY \"${ARG_OUTPUT}\" DESTINATION \"\$ENV{KERNEL_SYMBOL_MAP_OUT}\")
endif()" COMPONENT "${component}")
  endforeach()

  set(host_coverage "")
  if(ARG_HOST_COVERAGE OR KERNEL_SYMBOL_MAP_HOST_COVERAGE)
    set(host_coverage ON)
    # The recorder names the functions a test ran by the libraries' symbol tables: an install that strips
    # (scikit-build-core's default) must not strip them. Declared before the project's own install() rules.
    install(CODE "set(CMAKE_INSTALL_DO_STRIP OFF)" ALL_COMPONENTS)
  endif()

  # Targets may be defined after this call: finish at the end of the top-level directory.
  # The interpreter's environment is decided here, in the caller's scope, not at the end.
  cmake_language(EVAL CODE "
    cmake_language(DEFER DIRECTORY [[${CMAKE_SOURCE_DIR}]] CALL _kernel_symbol_map_finish
      [[${python}]] [[${python_env}]] [[${ARG_OUTPUT}]] [[${ARG_STRICT}]] [[${ARG_TARGETS}]] [[${mirror_args}]]
      [[${host_coverage}]])")
endfunction()

# "at <file>:<line>[,<line>...]": the lines of <file> that call kernel_symbol_map() (CMake tells a
# function its caller's file, not the line); "at <file>" when a wrapper defined elsewhere called it.
function(_kernel_symbol_map_call_site file out)
  set(${out} "at ${file}" PARENT_SCOPE)
  if(NOT EXISTS "${file}")
    return()
  endif()
  file(READ "${file}" text)
  string(REGEX MATCHALL "(^|\n)[ \t]*kernel_symbol_map[ \t]*\\(" calls "${text}")
  set(lines "")
  set(line 1)  # the line the rest of the text starts on
  foreach(call IN LISTS calls)
    string(FIND "${text}" "${call}" at)
    string(SUBSTRING "${text}" 0 ${at} before)
    string(REGEX MATCHALL "\n" newlines "${before}")
    list(LENGTH newlines n)
    math(EXPR line "${line} + ${n}")
    if(call MATCHES "^\n")
      math(EXPR line "${line} + 1")
    endif()
    list(APPEND lines ${line})
    string(LENGTH "${call}" length)
    math(EXPR rest "${at} + ${length}")
    string(SUBSTRING "${text}" ${rest} -1 text)
  endforeach()
  if(lines)
    list(JOIN lines "," lines)
    set(${out} "at ${file}:${lines}" PARENT_SCOPE)
  endif()
endfunction()

function(_kernel_symbol_map_finish python python_env output strict targets mirror_args host_coverage)
  set(selected "")
  set(excluded "")
  if(targets)
    set(selected --targets ${targets})
    foreach(tgt IN LISTS targets)
      if(NOT TARGET "${tgt}")
        message(FATAL_ERROR "kernel_symbol_map(): unknown target ${tgt}")
      endif()
      _kernel_symbol_map_has_device_code("${tgt}" has_device)
      if(NOT has_device)
        message(STATUS "kernel_symbol_map(): target ${tgt} has no CUDA or HIP sources; its objects are mapped as host code")
      endif()
    endforeach()
  else()
    # No --targets: the map covers every target that compiles, so that it is whole.
    _kernel_symbol_map_compiling_targets("${CMAKE_SOURCE_DIR}" targets excluded)
    if(excluded)
      set(selected --exclude-targets ${excluded})
    endif()
    if(NOT targets)
      message(WARNING "kernel_symbol_map(): no target compiles anything; the map will be empty")
    endif()
  endif()

  set(lists "${CMAKE_BINARY_DIR}/.kernel_symbol_map/targets")  # python/kernel_symbol_map/buildtree/pairing.py reads them
  file(REMOVE_RECURSE "${lists}")  # lists of targets no longer mapped must not linger
  # Ninja Multi-Config: each configuration's own build-<config>.ninja is exact; no lists (they would differ per config).
  get_property(multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  set(objects "")
  foreach(tgt IN LISTS targets)
    get_target_property(type "${tgt}" TYPE)
    if(NOT multi_config)
      file(GENERATE OUTPUT "${lists}/${tgt}.json" CONTENT
        "{\"name\": \"${tgt}\", \"type\": \"${type}\", \"objects\": \"$<JOIN:$<TARGET_OBJECTS:${tgt}>,;>\"}\n")
    endif()
    # compile_commands.json carries exact (source, object) pairs on CMake >= 3.26.
    set_property(TARGET "${tgt}" PROPERTY EXPORT_COMPILE_COMMANDS ON)
    list(APPEND objects "$<TARGET_OBJECTS:${tgt}>")
  endforeach()

  if(host_coverage)
    _kernel_symbol_map_host_coverage("${targets}")
  endif()

  set(strict_flag "")
  if(strict)
    set(strict_flag "--strict")
  endif()
  set(command "${CMAKE_COMMAND}" -E env ${python_env} KERNEL_SYMBOL_MAP_INSIDE_BUILD=1
    "${python}" -m kernel_symbol_map build --build-dir "${CMAKE_BINARY_DIR}"
    --source-root "${CMAKE_SOURCE_DIR}" --out "${output}" --config "$<CONFIG>" ${strict_flag} ${mirror_args})
  list(APPEND command ${selected})
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${command}
    DEPENDS ${targets} ${objects}
    COMMENT "Writing the kernel symbol map ${output}"
    VERBATIM)
  add_custom_target(kernel_symbol_map ALL DEPENDS "${output}")
endfunction()

function(_kernel_symbol_map_has_device_code tgt out)
  get_target_property(sources "${tgt}" SOURCES)
  foreach(src IN LISTS sources)
    get_source_file_property(lang "${src}" TARGET_DIRECTORY "${tgt}" LANGUAGE)
    if(src MATCHES "\\.(cu|hip)$" OR lang MATCHES "^(CUDA|HIP)$")
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

# Host coverage (HOST_COVERAGE): each target's host code instrumented, and the runtime linked where code is
# linked. A static library passes the runtime on to what links it; an object library's objects are linked by
# targets that are mapped too. The runtime is compiled as whichever of C, C++ or CUDA the project enabled.
function(_kernel_symbol_map_host_coverage targets)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(runtime_language "")
  foreach(candidate IN ITEMS C CXX CUDA)
    if(candidate IN_LIST languages)
      set(runtime_language ${candidate})
      break()
    endif()
  endforeach()
  if(NOT runtime_language)
    message(FATAL_ERROR "kernel_symbol_map(HOST_COVERAGE): the project enables none of C, CXX or CUDA to "
                        "compile the coverage runtime with")
  endif()
  set(runtime "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/kernel_symbol_map_coverage.c")
  add_library(kernel_symbol_map_coverage STATIC "${runtime}")
  set_source_files_properties("${runtime}" PROPERTIES LANGUAGE ${runtime_language})
  set_target_properties(kernel_symbol_map_coverage PROPERTIES POSITION_INDEPENDENT_CODE ON)
  foreach(tgt IN LISTS targets)
    get_target_property(type "${tgt}" TYPE)
    target_compile_options("${tgt}" PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:-finstrument-functions>"
      "$<$<COMPILE_LANGUAGE:C,CXX>:-ffunction-sections>"
      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-finstrument-functions$<COMMA>-ffunction-sections>")
    if(type MATCHES "^(SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)$")
      set_property(TARGET "${tgt}" APPEND PROPERTY LINK_LIBRARIES kernel_symbol_map_coverage)
    elseif(type STREQUAL "STATIC_LIBRARY")
      set_property(TARGET "${tgt}" APPEND PROPERTY INTERFACE_LINK_LIBRARIES
                   "$<LINK_ONLY:kernel_symbol_map_coverage>")
    endif()
  endforeach()
  message(STATUS "kernel_symbol_map(): host coverage in ${targets}")
endfunction()
