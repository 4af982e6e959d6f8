"""scripts/mutants.py stays runnable: every mutant breaks exactly one line as the code now reads it.

The table is a tool for whoever changes a safety rule (it is not run by the
suite: each mutant runs its tests); a mutant whose line was rewritten since
would fail only when someone next runs it, so its text is checked here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mutants.py"


def test_every_mutant_matches_its_line_once_and_is_named_once() -> None:
    spec = importlib.util.spec_from_file_location("mutants", SCRIPT)
    assert spec is not None and spec.loader is not None
    mutants = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = mutants  # its dataclass looks its module up there
    spec.loader.exec_module(mutants)
    stale = [f"{m.name}: {m.file} holds {mutants._path(m.file).read_text().count(m.old)} copies"
             for m in mutants.MUTANTS if mutants._path(m.file).read_text().count(m.old) != 1]
    assert not stale
    names = [m.name for m in mutants.MUTANTS]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert all(m.tests for m in mutants.MUTANTS)
