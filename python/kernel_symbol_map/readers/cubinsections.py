"""Which function a cubin section is named for: ``.text.<f>``, ``.nv.info.<f>``, ``.rel.text.<f>``...

nvcc names a function's own sections ``<prefix>.<function>``; function names
may hold dots themselves (``extern "C"`` kernels, clang's ``.omp`` suffixes),
so the function is the longest tail after a dot that names one, and never the
tail of a module section's prefix (``.nv.info`` itself, ``.nv.global.init``,
``.note.nv.cuinfo``). :mod:`.sizes` and :mod:`.cubindigest` share this.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress, count, repeat

TEXT = b".text"  # a function's machine code: .text.<function>
# What comes before ".<name>" in a section of the whole module (.nv.info, .nv.global.init, .nv.uft.entry,
# .nv.merc.symtab, .note.nv.cuinfo): never a kernel's, even of an extern "C" kernel called info or init.
MODULE_PREFIXES = frozenset({b"", b".nv", b".note", b".note.nv", b".nv.global", b".nv.uft", b".nv.merc",
                             b".nv.callgraph", b".nv.prototype", b".nv.rel", b".nv.resolvedrela"})


class Namer:
    """Section names -> the function (of ``functions``, by undecoded name) each is named for."""

    def __init__(self, functions: Mapping[bytes, str]) -> None:
        self.functions = functions
        # Else only the tail after a name's last dot can be one. One search of the names joined (by NULs,
        # which hold no dot) is any(b"." in f for f in functions) without a step per function.
        self.dotted = b"." in b"\0".join(functions)

    def owner(self, name: bytes) -> tuple[int, str | None]:
        """Where the function's name starts in ``name`` (its dot), and the function; (-1, None) if none. The
        walk for names with dots: without, :meth:`split` and :meth:`owners` take the last tail at once."""
        at = name.find(b".", 1)
        while at >= 0:
            function = self.functions.get(name[at + 1 :])
            if function is not None and name[:at] not in MODULE_PREFIXES:
                return at, function
            at = name.find(b".", at + 1)
        return -1, None

    def split(self, names: list[bytes]) -> tuple[list[str | None], list[bytes]]:
        """:meth:`owner` of each of ``names``, in one call: the function (None if none) and what comes
        before its name, ``name[:at]`` (the section's kind: .text, .nv.info...; where none, anything)."""
        if self.dotted:
            found = list(map(self.owner, names))
            return [f for _, f in found], [name[:at] for name, (at, _) in zip(names, found)]
        if not names:
            return [], []
        # No function's name has a dot: as owner, the tail after the last dot (rpartition's prefix is
        # name[:at] where there is one), unless a module's prefix (b"": no dot, or only a leading one).
        prefixes, _, tails = zip(*map(bytes.rpartition, names, repeat(b".")))
        functions = list(map(self.functions.get, tails))
        for i in compress(count(), map(MODULE_PREFIXES.__contains__, prefixes)):  # a few a cubin
            functions[i] = None
        return functions, list(prefixes)

    def owners(self, names: list[bytes], default: str | None = None) -> list[str | None]:
        """``owner(name)[1] or default`` of each of ``names``, in one call (a cubin's every section)."""
        if self.dotted:
            return [self.owner(name)[1] or default for name in names]
        get = self.functions.get  # as owner: the tail after the last dot, unless a module's prefix (b"": none)
        return [default if not (f := get(tail)) or prefix in MODULE_PREFIXES else f
                for prefix, _, tail in map(bytes.rpartition, names, repeat(b"."))]
