"""Where the CMake package lives, for ``python -m kernel_symbol_map --cmake-dir`` and ``--cmake-include``,
and the scikit-build-core entry point that names the include in every build it drives."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from .errors import KernelSymbolMapError

CONFIG = "KernelSymbolMapConfig.cmake"
TOP_LEVEL_INCLUDE = "KernelSymbolMapTopLevelInclude.cmake"
RELATIVE = Path("share") / "cmake" / "KernelSymbolMap"
# The retrofit's opt-out: KERNEL_SYMBOL_MAP_RETROFIT=0 in the environment of `pip wheel`, or
# -C cmake.define.KERNEL_SYMBOL_MAP_RETROFIT=OFF (which the include itself reads).
RETROFIT_VARIABLE = "KERNEL_SYMBOL_MAP_RETROFIT"
_OFF = frozenset({"0", "off", "false", "no", "n"})


def cmake_dir() -> Path:
    """The folder holding KernelSymbolMapConfig.cmake (pass it as ``KernelSymbolMap_DIR``)."""
    here = Path(__file__).resolve().parent
    candidates = [here / RELATIVE]
    # An editable install keeps the Python files in the checkout and CMake's installed files in site-packages.
    candidates += [Path(entry) / "kernel_symbol_map" / RELATIVE for entry in sys.path if entry]
    candidates.append(here.parents[1] / "cmake")  # a source checkout
    for candidate in candidates:
        if (candidate / CONFIG).is_file():
            return candidate
    raise KernelSymbolMapError(f"{CONFIG} is not installed next to {here}; reinstall kernel-symbol-map")


def cmake_include() -> Path:
    """The file to name in ``CMAKE_PROJECT_TOP_LEVEL_INCLUDES``: maps a project without editing it."""
    return cmake_dir() / TOP_LEVEL_INCLUDE


def scikit_build_defaults(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """The ``scikit-build-core.config.default`` entry point (scikit-build-core >= 1.1): a
    ``tool.scikit-build`` table, below the project's pyproject.toml, naming the retrofit include.

    A project or user that sets ``CMAKE_PROJECT_TOP_LEVEL_INCLUDES`` itself keeps theirs (a
    default never wins over pyproject.toml or ``-C``); the include steps aside when the project
    calls ``kernel_symbol_map()`` itself or enables no CUDA or HIP language.
    """
    environ = os.environ if env is None else env
    if environ.get(RETROFIT_VARIABLE, "").strip().lower() in _OFF:
        return {}
    try:
        include = cmake_include()
    except KernelSymbolMapError:
        return {}  # a broken install must not fail every scikit-build-core build in its environment
    if not include.is_file():
        return {}
    return {"cmake": {"define": {"CMAKE_PROJECT_TOP_LEVEL_INCLUDES": str(include)}}}
