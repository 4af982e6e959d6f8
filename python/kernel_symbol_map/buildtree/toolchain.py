"""Finding CUDA tools: the toolkit's own, or PyPI's ``nvidia-cuda-*`` wheels."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path


def _pypi_bin_dirs() -> list[Path]:
    """``bin`` folders of NVIDIA's PyPI wheels (``nvidia/cu13/bin``, ``nvidia/cuda_nvcc/bin``...)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for root in spec.submodule_search_locations:
        for child in sorted(Path(root).iterdir()) if Path(root).is_dir() else []:
            if (child / "bin").is_dir():
                found.append(child / "bin")
    return found


def find_tool(name: str, explicit: str | None = None, env: str | None = None) -> str | None:
    """An explicit path, then ``$env``, ``$CUDA_HOME/bin``, ``PATH``, the PyPI wheels, ``/usr/local/cuda``."""
    if explicit:
        return explicit
    if env and os.environ.get(env):
        return os.environ[env]
    candidates = [Path(os.environ[v]) / "bin" / name for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for c in candidates:
        if c.is_file():
            return str(c)
    on_path = shutil.which(name)
    if on_path:
        return on_path
    for d in [*_pypi_bin_dirs(), Path("/usr/local/cuda/bin")]:
        if (d / name).is_file():
            return str(d / name)
    return None


def find_cuobjdump(explicit: str | None = None) -> str | None:
    return find_tool("cuobjdump", explicit, "CUOBJDUMP")


def find_nvcc(explicit: str | None = None) -> str | None:
    return find_tool("nvcc", explicit, "CUDACXX")
