"""Kernel names for people: demangled, shortened, and matched by what a person types.

Joins always use mangled names; nothing here is a key. :func:`full` is the
whole demangled name, :func:`readable` the short label a report prints, and
:func:`name_filter` what a person's pattern (``process_cube_op``,
``DeviceReduce.*Kernel``, a label copied from a report) means. Every symbol is
demangled once per process (a size report names ~15,000 kernels; cuBLASLt's
14,871 demangle in about 0.1 s), and each answer is cached.

The labels fold the way bloaty's and cubloaty's short names do (template
argument lists become ``<...>``), but only as deep as needed to fit the width,
so ``kernels::scale_kernel<float>`` keeps its arguments while
``cub::detail::reduce::DeviceReduceKernel<...>`` loses a 300-character list.
"""

from __future__ import annotations

import re  # the fixed patterns: stdlib, so that --help imports no regex (tests/test_startup.py)
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache

# 80 columns: a terminal's default width, so a label plus a size column stays on one line of
# `size --by kernel`; cuBLASLt's median demangled name is 134 characters, and its folded family
# names (`xmma::gemm::kernel_blasl3<...>`) are all under 80.
WIDTH = 80
ELLIPSIS = "..."  # ASCII, like the " ..." the other reports end a cut list with
FOLDED = "<...>"
ANONYMOUS = "(anonymous namespace)"
_CACHE = 1 << 16  # distinct symbols kept: a few size reports' worth

# Inline namespaces that only say which CCCL version and SM list built a kernel (CUB_300001_SM_800,
# THRUST_200500_800_NS, libcu++'s and libc++'s __4 and __1, libstdc++'s __cxx11): noise to a reader, and
# they differ between two builds of the same code.
_VERSION_NAMESPACES = re.compile(r"(?<=\bcub::)CUB_\d+\w*::|(?<=\bthrust::)THRUST_\d+\w*::"
                                    r"|(?<=::)__(?:\d+|cxx11)::")


# nvcc -rdc=true renames a kernel of internal linkage (static, an anonymous namespace) to
# __nv_static_<n>__<file hash>_<n>_<file>_<hash>_<its mangled name>, which no demangler reads: the
# name a person wrote is the Itanium name at its end.
_NV_STATIC = re.compile(r"__nv_static_\d+__[0-9a-f]+_\d+_.*?_[0-9a-f]{8}_(_Z.+)")


@lru_cache(maxsize=_CACHE)
def full(symbol: str) -> str:
    """The whole demangled name (the C++ runtime's demangler, in this process); ``symbol`` itself when it
    does not demangle (an ``extern "C"`` kernel, a non-Itanium name, one too long for the demangler). An
    nvcc ``-rdc`` static kernel's name is its own mangled name's, demangled."""
    static = _NV_STATIC.fullmatch(symbol)
    try:
        import cxxfilt

        return cxxfilt.demangle(static.group(1) if static else symbol)
    except Exception:  # noqa: BLE001 - cxxfilt raises its own types; a name we cannot demangle stays mangled
        return symbol


demangle = full  # its older name, kept for importers


def labels(symbols: Iterable[str], width: int | None = WIDTH) -> dict[str, str]:
    """:func:`readable` of each symbol, made distinct: kernels that would read alike read by more of
    their name, as little more as tells them apart: the whole name, its template arguments unfolded
    (two instantiations folded alike: ``transform_kernel<..., long, ...>`` and ``<..., int, ...>``),
    then with its parameters (overloads: ``scale(float*)``, ``scale(double*)``), uncut; by the mangled
    name only when even those meet. A report that prints these never shows two rows under one name."""
    out = {s: readable(s, width) for s in set(symbols)}
    for longer in (_label, _signature):
        seen = Counter(out.values())
        alike = [s for s, label in out.items() if seen[label] > 1]
        if not alike:
            break
        for symbol in alike:
            out[symbol] = longer(symbol)
    seen = Counter(out.values())
    return {s: label if seen[label] == 1 else s for s, label in out.items()}


def _signature(symbol: str) -> str:
    """The demangled name without its return type or version namespaces: name and parameters."""
    whole = unversioned(full(symbol))
    name = _name(whole)
    return whole[whole.find(name):] if name and name in whole else whole


@lru_cache(maxsize=_CACHE)
def readable(symbol: str, width: int | None = WIDTH) -> str:
    """The short demangled name a person reads: no return type or parameters, no version namespaces,
    template argument lists folded to ``<...>`` (the deepest first) until it fits ``width`` (:data:`WIDTH`
    when None), then cut to ``width`` characters ending in ``...`` (None: never cut).

    A name that does not demangle is returned as it is; an Itanium name the demangler refuses is
    labelled from its leading qualified name (``xmma::gemm::kernel_blasl3<...>``).
    """
    label = _fitted(_label(symbol), width or WIDTH)
    if width is None or len(label) <= width:
        return label
    return label[: width - len(ELLIPSIS)] + ELLIPSIS if width > len(ELLIPSIS) else label[:width]


def name_filter(pattern: str) -> Callable[[str], bool]:
    """A predicate on mangled symbols: true when ``pattern`` is the symbol itself, a substring of its
    demangled name (with or without version namespaces), a regex that ``search``-es that name or the name
    without its return type and parameters (``^ns::k``), or a label
    :func:`readable` printed (``ns::k<...>``, or one cut with ``...``). A pattern that is not a valid regex
    is only a substring; an empty one matches every symbol."""
    import regex  # a person's pattern, read as --external-kernels reads one; imported only when one is given

    try:
        compiled: regex.Pattern[str] | None = regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError):  # not a regex: still a substring
        compiled = None
    copied = ELLIPSIS in pattern
    prefix = pattern[: -len(ELLIPSIS)] if pattern.endswith(ELLIPSIS) else None

    def matches(symbol: str) -> bool:
        if symbol == pattern:
            return True
        texts = (full(symbol), _clean(symbol))
        if any(pattern in t for t in texts):
            return True
        if compiled is not None and any(compiled.search(t) for t in (*texts, _label(symbol))):
            return True  # the label too: '^ns::k' is how a person anchors the name they read
        if copied:  # a label from a report: the same fold, or the start of one that was cut
            forms = _folds(_label(symbol))
            return pattern in forms or (bool(prefix) and any(f.startswith(prefix) for f in forms))
        return False

    return matches


def family(demangled: str) -> str:
    """A demangled kernel's qualified name without return type, template arguments, parameters or version
    namespaces.

    ``void ns::scale_kernel<float>(float*, int)`` is ``ns::scale_kernel``: the
    family every instantiation of one template kernel shares.
    """
    depth, out = 0, []
    for c in _name(unversioned(demangled)):  # drop template arguments at every level of the qualified name
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def short_name(demangled: str) -> str:
    """``ns::scale_kernel<float>`` of ``void ns::scale_kernel<float>(float*, int)``, folded to fit
    :data:`WIDTH` like :func:`readable` (never cut): for labels."""
    return _fitted(_name(unversioned(demangled)), WIDTH)


def name_of(demangled: str) -> str:
    """``ns::scale_kernel<float>`` of ``void ns::scale_kernel<float>(float*, int)``: nothing folded or dropped."""
    return _name(demangled)


@lru_cache(maxsize=_CACHE)
def _clean(symbol: str) -> str:
    """The demangled name without version namespaces (what a person who read a label types)."""
    return unversioned(full(symbol))


@lru_cache(maxsize=_CACHE)
def _label(symbol: str) -> str:
    """The unfolded label: the demangled name without return type, parameters or version namespaces."""
    demangled = full(symbol)
    if demangled == symbol:
        return _leading_name(symbol) or symbol
    return _name(unversioned(demangled))


def unversioned(demangled: str) -> str:
    """``demangled`` without CUB's, Thrust's and the C++ libraries' version namespaces."""
    return _VERSION_NAMESPACES.sub("", demangled)


def _fitted(name: str, width: int) -> str:
    """``name`` with its template argument lists folded at the deepest level that makes it fit ``width``
    (folding a level folds every list inside it too), or at the outermost when none does."""
    if len(name) <= width:
        return name
    spans = _template_spans(name)
    for level in range(max((d for _, _, d in spans), default=0), 0, -1):
        chosen = [(a, b) for a, b, d in spans if d == level]
        if level == 1 or len(name) - sum(_saved(a, b) for a, b in chosen) <= width:
            return _fold(name, chosen)
    return name


def _folds(name: str) -> list[str]:
    """``name`` and each of its folds, one level more at a time: every label :func:`readable` can print."""
    spans = _template_spans(name)
    levels = range(max((d for _, _, d in spans), default=0), 0, -1)
    return [name, *(_fold(name, [(a, b) for a, b, d in spans if d == level]) for level in levels)]


def _saved(start: int, end: int) -> int:
    """The characters folding the list from ``start`` to ``end`` saves (none for one of ``<int>``'s size)."""
    return max(0, end - start + 1 - len(FOLDED))


def _fold(name: str, spans: list[tuple[int, int]]) -> str:
    """``name`` with each of ``spans`` (the indices of a ``<`` and its ``>``, in order, none inside
    another) written ``<...>``; a list no longer than its fold (``<int>``) is kept."""
    out, at = [], 0
    for start, end in spans:
        if _saved(start, end):
            out += [name[at:start], FOLDED]
            at = end + 1
    return "".join(out) + name[at:]


def _template_spans(name: str) -> list[tuple[int, int, int]]:
    """(the ``<``, its ``>``, the nesting depth from 1) of every template argument list of ``name``, in
    order; none when the brackets do not balance, so an odd name is cut, never folded wrong.

    ``operator<``, ``operator>>`` and ``operator->`` are names, not brackets.
    """
    spans, open_at = [], []
    for m in _BRACKETS.finditer(name):  # only the brackets: cuBLASLt's names run to 9,000 characters
        if m.group() == "<":
            open_at.append(m.start())
        elif m.group() == ">":
            if not open_at:
                return []
            spans.append((open_at.pop(), m.start(), len(open_at) + 1))
    return sorted(spans) if not open_at else []


_BRACKETS = re.compile(r"(?<![\w])operator[<>=-]*|[<>]")


def _name(demangled: str) -> str:
    """``ns::scale_kernel<float>`` of ``void ns::scale_kernel<float>(float*, int)``.

    Written by hand: no kept library parses demangled C++ names, and only
    brackets matter here. The parameter list is the first ``(`` outside
    template arguments; a function template's return type comes first,
    before a space outside them.
    """
    depth, cut, space = 0, len(demangled), -1
    for m in _NAME_MARKS.finditer(demangled):  # an (anonymous namespace) is a name, not a parameter list
        c, i = m.group(), m.start()
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0 and c == "(" and i:
            cut = i
            break
        elif depth == 0 and c == " ":
            space = i
    return demangled[space + 1 : cut]


_NAME_MARKS = re.compile(re.escape(ANONYMOUS) + r"|[<>( ]")


def _leading_name(symbol: str) -> str:
    """``xmma::gemm::kernel_blasl3<...>`` of an Itanium name the demangler refused (cuBLASLt holds some of
    over 1,300 characters that demangle to 23,000): its leading qualified name, read from the mangling
    (``_Z``, ``N``, then lengths and identifiers), and ``<...>`` when template arguments follow; "" when
    it does not start so."""
    if not symbol.startswith("_Z"):
        return ""
    i, parts = 2, []
    if symbol.startswith("N", i):
        i += 1
        while i < len(symbol) and symbol[i] in "rVKRO":  # a member function's qualifiers
            i += 1
    if symbol.startswith("St", i):
        parts.append("std")
        i += 2
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        size = int(symbol[i:j])
        if size == 0 or j + size > len(symbol):
            return ""
        part = symbol[j : j + size]
        parts.append(ANONYMOUS if part.startswith("_GLOBAL__N") else part)
        i = j + size
    if not parts:
        return ""
    return "::".join(parts) + (FOLDED if symbol.startswith("I", i) else "")
