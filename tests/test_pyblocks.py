"""Python source as blocks (``mapformat/pyblocks.py``): which lines make a block, and what its digest sees."""

from __future__ import annotations

import pytest

from kernel_symbol_map.mapformat import pyblocks


def _digests(source: str) -> dict[str, str]:
    blocks = pyblocks.split(source.encode())
    return dict(zip(blocks.names, blocks.digests, strict=True))


@pytest.mark.parametrize("source", [
    "def f(): return 1\n",  # the body starts on the signature's line: the signature runs it where it is defined
    "def f(a,\n      b): return a\n",
    "def f(a) -> dict[\n    str, int\n]: return {}\n",  # the signature ends where its return annotation does
    "@decorate(\n    1)\ndef f(): return 1\n",
    "def f():\n    \"\"\"Only a docstring.\"\"\"\n",
    "def f():\n    ...\n",
    "class C:\n    x = 1\n",  # a class body runs where the class is defined
])
def test_code_that_runs_where_it_is_defined_is_the_enclosing_blocks(source: str) -> None:
    assert pyblocks.split(source.encode()).names == (pyblocks.MODULE,)


def test_a_function_with_a_body_of_its_own_is_a_block_and_its_docstring_is_the_enclosing_ones() -> None:
    blocks = pyblocks.split(b'class C:\n    def m(self):\n        """Doc."""\n        return 1\n')
    assert blocks.names == (pyblocks.MODULE, "C.m")
    assert [blocks.names[i] for i in blocks.lines[1:5]] == [pyblocks.MODULE, pyblocks.MODULE, pyblocks.MODULE, "C.m"]


def test_comments_and_blank_lines_change_no_digest_and_a_token_changes_its_blocks_alone() -> None:
    base = _digests("import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n")
    assert _digests("import os  # why\n\n\n\ndef f():\n    # one\n    return 1\n\n\ndef g():\n\n    return 2\n") == base
    changed = _digests("import os\n\n\ndef f():\n    return 10\n\n\ndef g():\n    return 2\n")
    assert changed["f"] != base["f"] and changed["g"] == base["g"] and changed["<module>"] == base["<module>"]


def test_a_file_that_does_not_parse_is_one_block_of_its_bytes() -> None:
    blocks = pyblocks.split(b"def f(:\n")
    assert blocks.names == (pyblocks.MODULE,) and blocks.digests != pyblocks.split(b"def f(:\n\n").digests
