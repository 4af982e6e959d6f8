"""Each test calls one entry point of libops.so (HOSTFUNCS_LIB), loaded when this module is imported."""

import ctypes
import os
import subprocess
import sys

OPS = ctypes.CDLL(os.environ["HOSTFUNCS_LIB"])
SCALE = "_Z12scale_kernelPfi"


def test_pipeline(launch):
    OPS.ops_pipeline(4)
    launch(SCALE)  # what CUPTI would see on a GPU


def test_pipeline_rejects():
    assert OPS.ops_pipeline(0) == -1


def test_scale(launch):
    OPS.ops_scale(4)
    launch(SCALE)


def test_version():
    assert OPS.ops_version() == 3


def test_loaded():
    assert OPS is not None


def test_child():
    """A process no recorder sees (Python without its site hook), followed by the loader's audit library: what
    it ran in libops.so is not known."""
    code = f"import ctypes; ctypes.CDLL({os.environ['HOSTFUNCS_LIB']!r}).ops_version()"
    subprocess.run([sys.executable, "-S", "-c", code], check=True)
