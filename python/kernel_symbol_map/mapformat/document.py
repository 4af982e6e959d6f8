"""A map as a document: its time, its stats, failing closed, and one map merged from several."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any


def source_date_epoch() -> int | None:
    value = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(value) if value.isdigit() else None


def generated_at() -> str:
    epoch = source_date_epoch()
    when = dt.datetime.fromtimestamp(epoch, dt.timezone.utc) if epoch is not None else dt.datetime.now(dt.timezone.utc)
    return when.isoformat(timespec="seconds")


def fail_closed(document: dict[str, Any], reason: str | None = None) -> None:
    """Empty ``objects`` when any object failed: a partial map would let a consumer drop tests."""
    errors = document["errors"]
    if not errors:
        return
    document["incomplete"] = True
    document["objects"] = []
    first = errors[0]
    document["reason"] = reason or f"{len(errors)} object{'' if len(errors) == 1 else 's'} unreadable, e.g. " \
        f"{first['object']}: {first['error']}"


def merge(documents: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """One map from maps of one commit (shards built on several machines); fail closed.

    Any input without evidence, maps of different commits, or one object
    mapped two ways makes the result incomplete, with a reason. Subsets
    (``only_targets``) merge into their union, which is whole when together
    they cover ``all_targets``.
    """
    first = documents[0]
    merged: dict[str, Any] = {k: v for k, v in first.items() if k not in ("objects", "errors", "reason")}
    problems = [f"{n}: {d.get('reason') or 'incomplete'}" for n, d in zip(names, documents, strict=True)
                if d.get("incomplete") or d.get("reason")]
    commits = sorted({d["commit"] for d in documents})
    if len(commits) > 1 or not commits[0]:
        problems.append(f"the maps are of commits {', '.join(c or '(unknown)' for c in commits)}, not one")
    objects: dict[tuple[str, str, str], dict[str, Any]] = {}
    for name, doc in zip(names, documents, strict=True):
        for o in doc["objects"]:
            key = (o["source"], o["target"], o["object"])
            if key in objects and objects[key] != o:
                problems.append(f"{name}: {o['object']} of {o['target']} differs from another map's")
            objects[key] = o
    _union_fields(merged, documents)
    merged["build_dirs"] = sorted({b for d in documents for b in d["build_dirs"]})
    merged["generated_at"] = max(d["generated_at"] for d in documents)
    merged["cuda"] = ", ".join(sorted({d["cuda"] for d in documents if d["cuda"]}))
    backends = {d.get("backend", "cuda") for d in documents}
    merged["backend"] = backends.pop() if len(backends) == 1 else "mixed"
    if all("only_targets" in d for d in documents):
        covered = sorted({t for d in documents for t in d["only_targets"]})
        needed = sorted({t for d in documents for t in d.get("all_targets", [])})
        merged["only_targets"], merged["all_targets"] = covered, needed
        if needed and set(needed) <= set(covered):
            del merged["only_targets"], merged["all_targets"]
    else:
        merged.pop("only_targets", None)
        merged.pop("all_targets", None)
    merged["errors"] = [e for d in documents for e in d["errors"]]
    merged["objects"] = [objects[k] for k in sorted(objects)]
    merged["incomplete"] = False
    if problems:
        merged.update(incomplete=True, objects=[], reason="; ".join(problems))
    compiled = sum(_count(d) for d in documents)
    merged["stats"] = {**stats(compiled, merged["objects"], merged["errors"], merged.get("reader", "native")),
                       "merged_from": len(documents)}
    return merged


def _union_fields(merged: dict[str, Any], documents: list[dict[str, Any]]) -> None:
    """The fields that say what may change any object, or what no map covers, from every input.

    A configure input, a FetchContent dependency or a custom command of the
    second shard's tree is as much the merged map's as the first's, and one
    input built where git could not list its files makes the merge unable to
    say what the configure wrote.
    """
    for key in ("configure_inputs", "third_party", "excluded_targets", "dirty"):
        values = sorted({v for d in documents for v in d.get(key, [])})
        if values:
            merged[key] = values
    notes = list(dict.fromkeys(n for d in documents for n in d.get("notes", [])))
    if notes:
        merged["notes"] = notes
    links: dict[str, set[str]] = {}
    for d in documents:
        for target, deps in d.get("target_links", {}).items():
            links.setdefault(target, set()).update(deps)
    if links:
        merged["target_links"] = {t: sorted(v) for t, v in sorted(links.items())}
    if documents and all("artefacts" in d for d in documents):  # one shard without them: unknown
        artefacts: dict[str, set[str]] = {}
        for d in documents:
            for target, names in d["artefacts"].items():
                artefacts.setdefault(target, set()).update(names)
        merged["artefacts"] = {t: sorted(v) for t, v in sorted(artefacts.items())}
    unmapped = {json.dumps(u, sort_keys=True): u for d in documents for u in d.get("unmapped_targets", [])}
    if unmapped:
        merged["unmapped_targets"] = [unmapped[k] for k in sorted(unmapped)]
    if any(d.get("tracked_files_unknown") for d in documents):
        merged["tracked_files_unknown"] = True
    for key in ("deps_from", "pairing", "generator", "cmake_version"):
        values = sorted({p for d in documents if isinstance(d.get(key), str) for p in d[key].split(", ") if p})
        if values:
            merged[key] = ", ".join(values)
    toolchain: dict[str, set[str]] = {}
    for d in documents:
        for language, compiler in d.get("toolchain", {}).items():
            toolchain.setdefault(language, set()).update(compiler.split(", "))
    if toolchain:  # shards built by other compilers: a merge that says both
        merged["toolchain"] = {lang: ", ".join(sorted(c)) for lang, c in sorted(toolchain.items())}
    schemes = {d.get("digests") for d in documents}
    merged.pop("digests", None)
    if len(schemes) == 1 and None not in schemes:  # the digests of one scheme, or none to compare
        merged["digests"] = schemes.pop()


def stats(compiled: int, objects: list[dict[str, Any]], errors: list[dict[str, Any]],
          reader: str = "native") -> dict[str, int]:
    """The counts a map's ``stats`` holds, for ``build`` and ``merge`` alike, as the seed counted them.

    ``objects`` is every object the build compiles; the others count what the
    map holds (nothing, when it failed closed), never what was read.
    """
    found = {
        "objects": compiled,
        "device_objects": sum(1 for e in objects if e["device"]),
        "objects_with_symbols": sum(1 for e in objects if e["symbols"]),
        "symbols": sum(len(e["symbols"]) for e in objects),
        "errors": len(errors),
    }
    if reader == "cuobjdump":
        found["cuobjdump_errors"] = len(errors)  # the seed's name, meaningful when cuobjdump read the objects
    return found


def _count(document: dict[str, Any]) -> int:
    """How many objects a map's build compiled: its stats say, else what it lists."""
    counted = document.get("stats", {}).get("objects") if isinstance(document.get("stats"), dict) else None
    return counted if isinstance(counted, int) else len(document["objects"]) + len(document["errors"])
