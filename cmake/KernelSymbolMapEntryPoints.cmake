# The wheel's `scikit-build-core.config.default` entry point (the zero-flag retrofit: see
# KernelSymbolMapTopLevelInclude.cmake), included by the top-level CMakeLists.txt.
#
# pyproject.toml cannot declare it: scikit-build-core (1.1.2) validates [project.entry-points]
# group names against ^\w+(\.\w+)*$ and rejects the hyphens in its own group's name, and it
# reserves entry_points.txt in SKBUILD_METADATA_DIR. So the wheel carries a second, metadata-only
# distribution, kernel-symbol-map-retrofit, as an .egg-info folder beside the package: importlib
# finds its entry_points.txt; pip installs and uninstalls it with the wheel's RECORD (a wheel may
# hold one .dist-info only, hence .egg-info).
set(_ksm_egg_info "${CMAKE_CURRENT_BINARY_DIR}/kernel_symbol_map_retrofit.egg-info")
configure_file("${CMAKE_CURRENT_LIST_DIR}/retrofit/PKG-INFO.in" "${_ksm_egg_info}/PKG-INFO" @ONLY)
install(FILES "${_ksm_egg_info}/PKG-INFO" "${CMAKE_CURRENT_LIST_DIR}/retrofit/entry_points.txt"
        DESTINATION kernel_symbol_map_retrofit.egg-info)
