"""What a command's inputs name: one resolver, so every command spells them alike.

An input that holds a map (``show``, ``query``, ``select``, ``diff``, ``merge``,
``validate``, ``size``) may be:

- a map file (``kernel_symbol_map.json.gz``, or any file that is not a wheel);
- a wheel, or any zip archive, that ships one;
- a folder holding a map, or wheels;
- an installed package's name, found on ``sys.path`` without the current
  folder, so that a source folder of the same name never shadows it;
- a glob, quoted so that the shell leaves it to us (``'dist/my_pkg-*.whl'``).

Where a folder or a glob holds several wheels, the newest (by modification
time, then name) is read and :attr:`Input.how` says which: a ``pip wheel``
into ``dist/`` leaves the older builds there. ``size`` also takes binaries
(objects, libraries, fatbins, cubins, HIP bundles). Nothing found is one
:class:`MapNotFound` that says what was looked at, for every command.

Files a person names inside the project (``query FILE``, ``select --changed``)
are resolved by :func:`project_path`: from the current folder when the file is
there, else from the project's top.
"""

from __future__ import annotations

import glob
import importlib.machinery
import io
import logging
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ... import mapformat
from ..._words import some
from ...errors import MapError, MapNotFound
from .wheels import WHEEL_ERRORS, copy_member, is_wheel, wheel_members

MAP_NAME = "kernel_symbol_map.json.gz"
MAP_SUFFIXES = (".json", ".json.gz")
_GLOB = frozenset("*?[")
EXPECTED = f"give a {MAP_NAME}, a wheel, a folder holding one, an installed package's name, or a quoted glob"


@dataclass(frozen=True)
class Input:
    """What one spelling resolved to."""

    spelled: str  # as written
    kind: str  # "map", "wheel", "package" (its map file) or "binary"
    path: Path
    how: str = ""  # how it was chosen when the spelling named more than one file, for people

    @property
    def name(self) -> str:
        """How messages name it: the spelling, or the file chosen for it."""
        return self.spelled if not self.how else str(self.path)


def resolve(spelled: str, *, binaries: bool = False, newest: bool = True) -> Input:
    """The file ``spelled`` names. With ``binaries``, a file that is neither a wheel nor a map file (by
    its name) is a binary to measure. A spelling that named several wheels reads the newest, logged (INFO)
    with the one chosen: the command line prints it as a NOTE. Without ``newest`` several wheels are a
    :class:`MapError` that names them: ``select`` never skips a test on a map chosen by a file's time."""
    found = _resolve(spelled, binaries, newest)
    if found.how:
        logging.getLogger(__name__).info("%s: %s", spelled, found.how)
    return found


def _resolve(spelled: str, binaries: bool, newest: bool) -> Input:
    path = Path(spelled)
    if path.is_file():
        return _file(spelled, path, binaries)
    looked = []
    if path.is_dir():
        inside = path / MAP_NAME
        if inside.is_file():
            return Input(spelled, "map", inside)
        wheels = [w for w in path.glob("*.whl") if w.is_file()]
        if wheels:
            return _newest(spelled, wheels, f"in {spelled}", newest)
        looked.append(f"the folder holds no {MAP_NAME} and no wheel")
    elif _GLOB & set(spelled):
        found = [Path(p) for p in sorted(glob.glob(spelled, recursive=True)) if Path(p).is_file()]
        wheels = [p for p in found if is_wheel(p)]
        if found and len(wheels) == len(found):
            return _newest(spelled, wheels, f"matching {spelled}", newest)
        if len(found) == 1:
            return _file(spelled, found[0], binaries, f"{found[0]}, the one file matching {spelled}")
        if found:
            raise MapError(f"{spelled}: matches {len(found)} files ({some(found)}); name the one to read")
        looked.append("the glob matches no file")
    if spelled.isidentifier():
        found_map = _package_map(spelled)
        if found_map is not None:
            return Input(spelled, "package", found_map)
        looked.append("no installed package of that name ships one")
    elif not path.exists() and not looked:
        looked.append("no such file or folder")
    raise MapNotFound(f"{spelled}: not a map ({'; '.join(looked)}); {EXPECTED}")


def _file(spelled: str, path: Path, binaries: bool, how: str = "") -> Input:
    if is_wheel(path):
        return Input(spelled, "wheel", path, how)
    if binaries and not path.name.endswith(MAP_SUFFIXES):
        return Input(spelled, "binary", path, how)
    return Input(spelled, "map", path, how)


def _newest(spelled: str, wheels: list[Path], where: str, newest: bool) -> Input:
    if len(wheels) > 1 and not newest:
        raise MapError(f"{spelled}: {len(wheels)} wheels {where} ({some(sorted(wheels))}); name the one to read")
    chosen = max(wheels, key=lambda w: (w.stat().st_mtime, w.name))
    how = f"{chosen}, the newest of {len(wheels)} wheels {where}" if len(wheels) > 1 else ""
    return Input(spelled, "wheel", chosen, how)


def _package_map(name: str) -> Path | None:
    """The map an installed package ships, found without the current folder on the path."""
    here = {"", os.getcwd()}
    spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p not in here])
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / MAP_NAME
        if candidate.is_file():
            return candidate
    return None


def map_bytes(found: Input) -> tuple[bytes, str]:
    """The gzipped map ``found`` holds, and where it came from (``wheel!member`` for a wheel's)."""
    if found.kind == "wheel":
        return _from_wheel(found.path)
    if found.kind == "binary":
        raise MapError(f"{found.name}: a binary, not a map")
    try:
        raw = found.path.read_bytes()
    except OSError as e:
        raise MapError(f"{found.path}: {e.strerror or e}") from None
    return raw, f"{found.spelled}/{MAP_NAME}" if found.kind == "package" else str(found.path)


def _from_wheel(wheel: Path) -> tuple[bytes, str]:
    try:
        with zipfile.ZipFile(wheel) as z:
            members = wheel_members(z, wheel, lambda n: n.endswith("/" + MAP_NAME) or n == MAP_NAME)
            if not members:
                raise MapNotFound(f"{wheel}: the wheel ships no {MAP_NAME}")
            if len(members) > 1:
                raise MapError(f"{wheel}: holds {len(members)} {MAP_NAME} files, expected one")
            (info,) = members
            if info.file_size > mapformat.MAX_JSON:  # the map is gzip: far smaller than its JSON
                raise MapError(f"{wheel}!{info.filename}: larger than any map")
            data = io.BytesIO()
            copy_member(z, info, data, wheel)
            return data.getvalue(), f"{wheel}!{info.filename}"
    except WHEEL_ERRORS as e:
        raise MapError(f"{wheel}: not a readable wheel ({e})") from None


def project_paths(spelled: str, top: Path) -> list[str]:
    """Every file ``spelled`` may mean, for a decision that must not miss one (``select --changed``): the
    current folder's (:func:`project_path`), and the project's own spelling too, as ``git diff`` writes
    it (a person in ``tools/`` who types ``csrc/a.cu`` may mean either, and a file the change deleted is
    in no folder), unless it climbs out of the project (``../csrc/a.cu``)."""
    path, how = project_path(spelled, top)
    return [path, spelled] if how and not _climbs(spelled) else [path]


def _climbs(spelled: str) -> bool:
    return spelled == os.pardir or spelled.startswith((os.pardir + "/", os.pardir + os.sep))


def project_path(spelled: str, top: Path) -> tuple[str, str]:
    """A file a person names in the project, and where it was resolved from.

    From the current folder when it lands inside ``top`` (the project: the git
    top level, or ``--source-root``) and the file is there, or the spelling
    climbs (``../src/x.cu``: no path from the top does, so a file the change
    deleted is read so too); else as a path from ``top``, the way the map and
    ``git diff`` spell them. An absolute path is itself. Returns (the path to
    look up, "" when it is spelled from ``top``, else how it was read, for
    people: logged as :func:`resolve` logs).
    """
    if os.path.isabs(spelled):
        return spelled, ""
    absolute = os.path.abspath(Path.cwd() / spelled)
    inside = os.path.relpath(absolute, os.path.abspath(top))
    if inside == os.pardir or inside.startswith(os.pardir + os.sep) or inside == spelled:
        return spelled, ""  # outside the project, or the current folder is the top
    if not (_climbs(spelled) or os.path.exists(absolute)):
        return spelled, ""
    how = f"{spelled} from the current folder: {inside}"
    logging.getLogger(__name__).info("%s", how)
    return inside.replace(os.sep, "/"), how
