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


def _masked(markdown: str) -> str:
    """``markdown`` with fenced blocks and code spans (which may span lines) blanked out, of the same length."""
    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            out.append("\0" * len(line))
        else:
            out.append("\0" * len(line) if fenced else line)
    text = "\n".join(out)
    code = r"`(?:[^`\n]|\n(?![ \t]*\n))*`"  # a code span ends with its paragraph at the latest
    return re.sub(code, lambda m: re.sub(r"[^\n]", "\0", m.group(0)), text)


def _links(markdown: str) -> list[re.Match[str]]:
    """Each ``[text](target)`` outside code, as a match in the masked text (positions are the original's)."""
    return list(_LINK.finditer(_masked(markdown)))


def repo_links(markdown: str) -> list[tuple[str, str]]:
    """(text, target) of each relative link in ``markdown`` (``#anchor`` alone too), outside code."""
    return [(markdown[m.start("text"):m.end("text")], m.group("target")) for m in _links(markdown)
            if not re.match(r"[a-z][a-z0-9+.-]*:|/", m.group("target"))]  # a bare #anchor is one


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
    docs_in_repo = posixpath.relpath(docs.as_posix(), root.as_posix())
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def replace(text: str, target: str) -> str | None:
        """What the link becomes in the site; None to leave it to mkdocs."""
        if re.match(r"[a-z][a-z0-9+.-]*:|/|#", target):
            return None
        path, _, anchor = target.partition("#")
        in_docs = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), path))
        if not in_docs.startswith("../"):
            return None  # a page of the docs: mkdocs checks it
        why = check_link(source, target)
        if why:
            log.warning("Doc file '%s' %s", page.file.src_uri, why)
            return None
        if not repo_url:
            return text
        in_repo = posixpath.normpath(posixpath.join(docs_in_repo, in_docs))
        return f"[{text}]({repo_url}/blob/HEAD/{in_repo}{'#' + anchor if anchor else ''})"

    for m in reversed(_links(markdown)):  # from the end, so that each match's positions still hold
        new = replace(markdown[m.start("text"):m.end("text")], m.group("target"))
        if new is not None:
            markdown = markdown[:m.start()] + new + markdown[m.end():]
    return markdown
