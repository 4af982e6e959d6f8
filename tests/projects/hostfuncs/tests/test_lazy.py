"""libops.so loaded inside a test, not at import: its static initialisers run in that test's window."""

import ctypes
import os


def test_load():
    ctypes.CDLL(os.environ["HOSTFUNCS_LIB"])


def test_after():
    pass
