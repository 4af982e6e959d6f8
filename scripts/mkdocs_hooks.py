"""mkdocs hook: the docs' links to the repository's own files, outside docs/.

A page may link to ``../README.md#retrofit-no-edits-to-the-project`` or
``../examples/ci/select.sh``: GitHub renders docs/ in place, where those links
work. mkdocs knows only docs/, so it would call each one "not found". This hook
checks each such link itself (the file or folder must exist in the repository;
an ``#anchor`` into a Markdown file must be one of its headings, spelled as
GitHub spells them) and then, in the built site, points it at ``repo_url``
when mkdocs.yml sets one, or leaves its text without a link. A broken one is a
warning, which ``mkdocs build --strict`` makes an error.

``github_slugs`` is also what ``tests/test_docs.py`` checks the README's own
anchors with.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.repo_links")

# [text](target) outside code; the target has no spaces (none of ours do)
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)  # code spans keep their text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # and links theirs
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def github_slugs(markdown: str) -> set[str]:
    """Every heading anchor of a Markdown file (a repeated heading gets -1, -2, ... as on GitHub)."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    for line in _outside_fences(markdown):
        m = _HEADING.match(line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        slugs.add(slug if n == 0 else f"{slug}-{n}")
    return slugs


def _outside_fences(markdown: str) -> list[str]:
    """The lines of ``markdown`` that are not in a fenced code block (the others as empty lines)."""
    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def repo_links(markdown: str) -> list[tuple[str, str]]:
    """(text, target) of each relative link in ``markdown`` (``#anchor`` alone too), outside code."""
    found = []
    for line in _outside_fences(markdown):
        line = re.sub(r"`[^`]*`", lambda m: "\0" * len(m.group(0)), line)  # a code span is no link (a link's text may be one)
        for m in _LINK.finditer(line):
            if not re.match(r"[a-z][a-z0-9+.-]*:|/", m.group("target")):  # an anchor of the file itself is one
                found.append((m.group("text"), m.group("target")))
    return found


def check_link(source: Path, target: str) -> str | None:
    """Why the link from file ``source`` to ``target`` is broken, or None."""
    path, _, anchor = target.partition("#")
    dest = (source.parent / path).resolve() if path else source
    if not dest.exists():
        return f"links to {target}, but {path} does not exist"
    if anchor and dest.suffix == ".md" and dest.is_file() and anchor not in github_slugs(dest.read_text()):
        return f"links to {target}, but {path or source.name} has no heading #{anchor}"
    return None


def on_page_markdown(markdown, page, config, files):  # noqa: ANN001, ANN201 (mkdocs' hook signature)
    docs = Path(config["docs_dir"]).resolve()
    root = Path(config["config_file_path"]).resolve().parent
    source = docs / page.file.src_path
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def replace(m: re.Match[str]) -> str:
        target = m.group("target")
        if re.match(r"[a-z][a-z0-9+.-]*:|/|#", target):
            return m.group(0)
        path = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), target.partition("#")[0]))
        if not path.startswith("../"):
            return m.group(0)  # a page of the docs: mkdocs checks it
        why = check_link(source, target)
        if why:
            log.warning("Doc file '%s' %s", page.file.src_uri, why)
            return m.group(0)
        rel = (source.parent / target.partition("#")[0]).resolve().relative_to(root).as_posix()
        anchor = target.partition("#")[2]
        if repo_url:
            return f"[{m.group('text')}]({repo_url}/blob/HEAD/{rel}{'#' + anchor if anchor else ''})"
        return m.group("text")

    lines, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        lines.append(line if fenced else _LINK.sub(replace, line))
    return "\n".join(lines)
