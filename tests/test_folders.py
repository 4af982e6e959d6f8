"""The build's folders masked in strings: where a path starts, by role, and nowhere else."""

from __future__ import annotations

import pickle

from kernel_symbol_map.readers.folders import NONE, Folders


def test_a_folder_starting_a_path_is_its_roles_token() -> None:
    short = Folders({"/ci/a": "source", "/ci/a/build": "build0"})
    long = Folders({"/runner/work/project-b": "source", "/runner/work/project-b/build": "build0"})
    assert short.mask(b"/ci/a/csrc/k.cu") == long.mask(b"/runner/work/project-b/csrc/k.cu") == \
        b"\0source\0/csrc/k.cu"
    assert short.mask(b"/ci/a/build/gen.cu") == b"\0build0\0/gen.cu"  # the longest folder first
    assert short.mask(b"at /ci/a/csrc/k.cu:12") == b"at \0source\0/csrc/k.cu:12"


def test_a_folder_not_starting_a_path_is_left_alone() -> None:
    folders = Folders({"/ci/a": "source"})
    for text in (b"/ci/ab/k.cu", b"/x/ci/a/k.cu", b"name/ci/a/k.cu", b"/ci/a", b"/ci/a.cu", b"prefix-/ci/a/k"):
        assert folders.mask(text) == text, text


def test_no_folders_mask_nothing_and_survive_a_worker() -> None:
    assert not NONE and NONE.mask(b"/ci/a/k.cu") == b"/ci/a/k.cu"
    folders = Folders({"/ci/a": "source", "/": "root"})  # "/" alone would match every path: ignored
    again = pickle.loads(pickle.dumps(folders))
    assert again.mask(b"/ci/a/k.cu") == folders.mask(b"/ci/a/k.cu") == b"\0source\0/k.cu"
    assert again.mask(b"/usr/include/x.h") == b"/usr/include/x.h"
    assert again.key() == folders.key()
