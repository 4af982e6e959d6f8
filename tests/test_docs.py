"""The documentation: docs/ builds with ``mkdocs build --strict``, and no link is broken.

The README is not part of the mkdocs build (GitHub renders it), so its
relative links and ``#anchors`` are checked here, with GitHub's spelling of
heading anchors. docs/reference.md is generated from the parsers by
``scripts/cli_reference.py``: it must be what that script writes now, and so
list every flag of every command.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from toolchains import ROOT, require

DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _script(name: str) -> ModuleType:
    """A module of scripts/ (not a package), imported from its file."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _script("mkdocs_hooks")
reference = _script("cli_reference")


def _nav_pages(nav: list) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _require_mkdocs() -> None:
    """mkdocs (the ``test`` extra, with PyYAML and Markdown): skip without it, fail under CI."""
    require("mkdocs" if importlib.util.find_spec("mkdocs") else None, "mkdocs")


def _config() -> dict:
    _require_mkdocs()
    import yaml

    # mkdocs.yml may hold !!python tags; this one holds none, so the safe loader reads it
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    _require_mkdocs()
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(site)]
    return subprocess.run(command, cwd=root, capture_output=True, text=True)


def test_docs_build_strict(tmp_path: Path) -> None:
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "index.html").is_file()
    assert "WARNING" not in done.stderr, done.stderr


def _copy_of_the_docs(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(DOCS, root / "docs")
    shutil.copytree(ROOT / "examples" / "ci", root / "examples" / "ci")
    shutil.copytree(ROOT / "examples" / "cuda_ext", root / "examples" / "cuda_ext",
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    (root / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "mkdocs_hooks.py", root / "scripts")
    shutil.copytree(ROOT / "cmake", root / "cmake")
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(ROOT / name, root / name)
    return root


@pytest.mark.parametrize(("page", "old", "new", "says"), [
    ("index.md", "(reference.md)", "(references.md)", "references.md"),  # a page that does not exist
    ("formats.md", "(size.md#size-attributed)", "(size.md#size-attribute)", "size-attribute"),  # an anchor
    ("figures.md", "#each-changed-file-on-its-own)", "#each-changed-file)", "each-changed-file"),
    # a file of the repository, outside docs/
    ("recording.md", "(../examples/ci/select.sh)", "(../examples/ci/select.bash)", "select.bash"),
    ("how-it-works.md", "README.md#retrofit-no-edits-to-the-project", "README.md#retrofit", "#retrofit"),
])
def test_a_broken_link_fails_the_build(tmp_path: Path, page: str, old: str, new: str, says: str) -> None:
    root = _copy_of_the_docs(tmp_path)
    assert _build(root, tmp_path / "site").returncode == 0  # the copy builds as the docs do
    path = root / "docs" / page
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    done = _build(root, tmp_path / "site")
    assert done.returncode != 0
    assert says in done.stderr, done.stderr


def test_every_page_is_in_the_nav() -> None:
    nav = _nav_pages(_config()["nav"])
    assert sorted(nav) == sorted(p.name for p in DOCS.glob("*.md")), "docs/*.md and mkdocs.yml's nav differ"
    assert len(nav) == len(set(nav))


def _links(markdown: str) -> list[str]:
    return [target for _, target in hooks.repo_links(markdown)]


def test_readme_links_resolve() -> None:
    links = _links(README.read_text())
    assert any(t.startswith("docs/") and "#" in t for t in links)  # the check sees links with anchors
    broken = [why for t in links if (why := hooks.check_link(README, t))]
    assert not broken, broken


def test_the_link_check_sees_a_broken_readme_link(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Some part\n")
    readme.write_text("# Title\n\n## Its part: one\n\n[x](docs/a.md#some-part) [y](#its-part-one) "
                      "[z](https://example.invalid) `[no](link)`\n\n```\n[not](a-link)\n```\n"
                      "a `code span\nover two lines` [w](docs/a.md)\n")
    assert [hooks.check_link(readme, t) for t in _links(readme.read_text())] == [None, None, None]
    readme.write_text("[x](docs/a.md#some) [y](#its-part) [z](docs/b.md)\n")
    assert [bool(hooks.check_link(readme, t)) for t in _links(readme.read_text())] == [True, True, True]


def test_anchors_are_spelled_alike_on_github_and_by_mkdocs() -> None:
    """A docs page's anchors are GitHub's (where docs/ is read in place) and mkdocs' (in the site)."""
    _require_mkdocs()
    from markdown.extensions.toc import slugify

    for page in [README, *DOCS.glob("*.md")]:
        for line in hooks._outside_fences(page.read_text()):
            if m := hooks._HEADING.match(line):
                text = re.sub(r"`([^`]*)`", r"\1", m.group(2))
                assert hooks.github_slug(m.group(2)) == slugify(text, "-"), f"{page.name}: {line}"


def test_reference_is_generated_from_the_parsers() -> None:
    assert (DOCS / "reference.md").read_text() == reference.render(), (
        "docs/reference.md is stale: run .venv/bin/python scripts/cli_reference.py")


def _sections(markdown: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", markdown, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_reference_lists_every_flag() -> None:
    from kernel_symbol_map.cli import build_parser
    from kernel_symbol_map.cli._commands import COMMANDS

    sections = _sections((DOCS / "reference.md").read_text())
    top = build_parser("*")
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    wanted = {"Options of the program itself": top, **{name: sub.choices[name] for name in COMMANDS}}
    for section, parser in wanted.items():
        text = sections[section]
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction,
                                                                       argparse._SubParsersAction)):
                continue
            for flag in action.option_strings or [reference._value(action)]:
                assert re.search(rf"^- `{re.escape(flag)}(?![\w-])", text, re.M), f"{section}: {flag}"
    plugin = sections["pytest options"]
    for names, _ in reference._plugin_options():
        assert f"- `{names}" in plugin


def test_readme_lists_every_command() -> None:
    from kernel_symbol_map.cli._commands import COMMANDS

    text = README.read_text()
    for name in COMMANDS:
        assert f"| [`{name}`](docs/reference.md#{name}) |" in text, name
    assert "\n### Exit codes\n" in text


# What a reader of the project sees speaks to them: no tracker numbers (the changelog keeps the history).
TRACKER_WORDS = re.compile(r"\bissues? ?#?[0-9]+", re.IGNORECASE)
READ_BY_USERS = ("python", "cmake", "native", "docs", "examples", "build_backend")
TOP_FILES = ("README.md", "CMakeLists.txt", "pyproject.toml", "mkdocs.yml")


def tracker_words(root: Path = ROOT) -> list[str]:
    files = [root / f for f in TOP_FILES] + [p for d in READ_BY_USERS for p in sorted((root / d).rglob("*"))
                                             if p.is_file() and "__pycache__" not in p.parts
                                             and p.suffix in (".py", ".md", ".c", ".cmake", ".txt", ".toml", ".yml")]
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if TRACKER_WORDS.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()[:100]}")
    return found


def test_docs_and_code_name_no_tracker_issue() -> None:
    assert tracker_words() == []


def test_a_tracker_word_is_found(tmp_path: Path) -> None:
    for name in (*READ_BY_USERS, "README.md", "CMakeLists.txt", "pyproject.toml", "mkdocs.yml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    for f in TOP_FILES:
        (tmp_path / f).write_text("")
    (tmp_path / "python" / "m.py").parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "python" / "m.py").write_text("x = 1  # as issue 27 asked\n")
    assert tracker_words(tmp_path) == ["python/m.py:1: x = 1  # as issue 27 asked"]
