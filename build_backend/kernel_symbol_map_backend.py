"""kernel-symbol-map's PEP 517 build backend: scikit-build-core's hooks, plus one entry point.

Every hook of ``scikit_build_core.build`` is re-exported unchanged, except that the wheels
``build_wheel`` and ``build_editable`` return, and the metadata folders the
``prepare_metadata_for_build_*`` hooks write, also declare::

    [scikit-build-core.config.default]
    kernel-symbol-map = kernel_symbol_map.cmakedir:scikit_build_defaults

in the package's own ``.dist-info/entry_points.txt``: the zero-flag retrofit (see
cmake/KernelSymbolMapTopLevelInclude.cmake), one distribution only.

Why a wrapper: scikit-build-core (1.1.2) cannot declare that group itself. Its vendored
pyproject_metadata (``_vendor/pyproject_metadata/project_table.py``) validates
``[project.entry-points]`` group names against ``^\\w+(\\.\\w+)*$``, which rejects the hyphens
in scikit-build-core's own group name, and its wheel writer reserves ``entry_points.txt`` in
``SKBUILD_METADATA_DIR`` (``build/_wheelfile.py``, ``dist_info_contents``). When scikit-build-core
accepts the name, move the entry point to pyproject.toml's ``[project.entry-points]``, point
``[build-system] build-backend`` back at ``scikit_build_core.build`` and delete this folder
(while both exist, a group already in the file is left as it is: this wrapper adds nothing).

It lives outside the package (``backend-path = ["build_backend"]`` in pyproject.toml): it is
a build tool, so it is in the sdist but not in the wheel. Its name is prefixed because
``backend-path`` goes to the front of ``sys.path`` in the hook's process.

The wheel is rewritten with the standard library's zipfile, hashlib and base64, not with the
``wheel`` package, which is not a build requirement. The rewrite keeps the wheel reproducible:
the same members in the same order, each with the ZipInfo (date_time, permissions, compression)
that scikit-build-core wrote, and the new wheel replaces the old one atomically.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Optional, Union

import scikit_build_core.build as _scikit_build

# PEP 517's config_settings (typing's spelling: the module runs on every Python scikit-build-core supports).
ConfigSettings = Optional[dict[str, Union[str, list[str]]]]

GROUP = "scikit-build-core.config.default"
ENTRY_POINT = "kernel-symbol-map = kernel_symbol_map.cmakedir:scikit_build_defaults"
# The lines appended, in the layout scikit-build-core writes its own groups in (a blank line after each).
ADDED = f"[{GROUP}]\n{ENTRY_POINT}\n\n".encode()
ENTRY_POINTS = "entry_points.txt"
RECORD = "RECORD"

get_requires_for_build_sdist = _scikit_build.get_requires_for_build_sdist
get_requires_for_build_wheel = _scikit_build.get_requires_for_build_wheel
get_requires_for_build_editable = _scikit_build.get_requires_for_build_editable
build_sdist = _scikit_build.build_sdist

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
]


def with_entry_point(entry_points: bytes | None) -> bytes:
    """entry_points.txt with our group appended (the file's bytes, or None where there is none)."""
    text = entry_points or b""
    if f"[{GROUP}]".encode() in text.splitlines():
        return text
    if text and not text.endswith(b"\n\n"):
        text += b"\n" if text.endswith(b"\n") else b"\n\n"
    return text + ADDED


def without_entry_point(entry_points: bytes) -> bytes:
    """The inverse of with_entry_point on the bytes it wrote: what scikit-build-core itself wrote."""
    return entry_points[: -len(ADDED)] if entry_points.endswith(ADDED) else entry_points


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"sha256={digest}"


def _dist_info(names: list[str]) -> str:
    (dist_info,) = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    return dist_info


def _new_record(record: bytes, entry_points_name: str, entry_points: bytes, record_name: str) -> bytes:
    """RECORD with entry_points.txt's row (hash and size) replaced, or added before RECORD's own row."""
    rows = list(csv.reader(io.StringIO(record.decode("utf-8"))))
    row = [entry_points_name, _record_hash(entry_points), str(len(entry_points))]
    at = next((i for i, r in enumerate(rows) if r and r[0] == entry_points_name), None)
    if at is not None:
        rows[at] = row
    else:
        rows.insert(next(i for i, r in enumerate(rows) if r and r[0] == record_name), row)
    out = io.StringIO()
    csv.writer(out, delimiter=",", quotechar='"', lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def _copy_info(info: zipfile.ZipInfo, name: str | None = None) -> zipfile.ZipInfo:
    """A fresh ZipInfo with the original's name, date_time, permissions and compression."""
    new = zipfile.ZipInfo(name or info.filename, date_time=info.date_time)
    new.compress_type = info.compress_type
    new.external_attr = info.external_attr
    new.create_system = info.create_system
    return new


def add_entry_point(wheel: Path) -> None:
    """Rewrite ``wheel`` in place, its dist-info's entry_points.txt declaring our group."""
    with zipfile.ZipFile(wheel) as z:
        infos = z.infolist()
        contents = [(info, z.read(info)) for info in infos]
    dist_info = _dist_info([info.filename for info, _ in contents])
    ep_name, record_name = f"{dist_info}/{ENTRY_POINTS}", f"{dist_info}/{RECORD}"
    old = next((data for info, data in contents if info.filename == ep_name), None)
    new = with_entry_point(old)
    if new == old:
        return
    members = [(_copy_info(info), new if info.filename == ep_name else data) for info, data in contents]
    if old is None:  # scikit-build-core writes METADATA first in the dist-info: the new file follows it
        metadata = next(i for i, (info, _) in enumerate(members) if info.filename == f"{dist_info}/METADATA")
        members.insert(metadata + 1, (_copy_info(members[metadata][0], ep_name), new))
    members = [(info, _new_record(data, ep_name, new, record_name) if info.filename == record_name else data)
               for info, data in members]
    fd, tmp = tempfile.mkstemp(dir=wheel.parent, prefix=f".{wheel.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as out:
            for info, data in members:
                out.writestr(info, data)
        shutil.copymode(wheel, tmp)  # mkstemp's file is 0600: keep the mode the wheel was written with
        os.replace(tmp, wheel)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _add_to_metadata(dist_info: Path) -> None:
    path = dist_info / ENTRY_POINTS
    old = path.read_bytes() if path.is_file() else None
    new = with_entry_point(old)
    if new != old:
        path.write_bytes(new)


def _build(hook: Callable[[str, ConfigSettings, str | None], str], wheel_directory: str,
           config_settings: ConfigSettings, metadata_directory: str | None) -> str:
    if metadata_directory is None:
        name = hook(wheel_directory, config_settings, None)
    else:
        # scikit-build-core checks that the wheel's metadata is what it prepared: give it its own
        # entry_points.txt back (a copy of the folder without our group) for that comparison.
        with tempfile.TemporaryDirectory() as tmp:
            prepared = Path(tmp) / Path(metadata_directory).name
            shutil.copytree(metadata_directory, prepared)
            path = prepared / ENTRY_POINTS
            if path.is_file():
                theirs = without_entry_point(path.read_bytes())
                if theirs:
                    path.write_bytes(theirs)
                else:
                    path.unlink()
            name = hook(wheel_directory, config_settings, str(prepared))
    add_entry_point(Path(wheel_directory) / name)
    return name


def build_wheel(wheel_directory: str, config_settings: ConfigSettings = None,
                metadata_directory: str | None = None) -> str:
    return _build(_scikit_build.build_wheel, wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory: str, config_settings: ConfigSettings = None,
                   metadata_directory: str | None = None) -> str:
    return _build(_scikit_build.build_editable, wheel_directory, config_settings, metadata_directory)


# scikit-build-core defines these only when its metadata can be known before a build (no
# `if.failed` overrides); a frontend asks whether the backend has them, so we have them only then.
if hasattr(_scikit_build, "prepare_metadata_for_build_wheel"):

    def prepare_metadata_for_build_wheel(metadata_directory: str,
                                        config_settings: ConfigSettings = None) -> str:
        name = _scikit_build.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
        _add_to_metadata(Path(metadata_directory) / name)
        return name

    __all__ += ["prepare_metadata_for_build_wheel"]

if hasattr(_scikit_build, "prepare_metadata_for_build_editable"):

    def prepare_metadata_for_build_editable(metadata_directory: str,
                                           config_settings: ConfigSettings = None) -> str:
        name = _scikit_build.prepare_metadata_for_build_editable(metadata_directory, config_settings)
        _add_to_metadata(Path(metadata_directory) / name)
        return name

    __all__ += ["prepare_metadata_for_build_editable"]
