"""The recorder's pytest plugin: which kernels each test launched, for ``select`` to pick single tests.

Registered through the ``pytest11`` entry point and inactive unless asked:
``pytest --kernel-record DIR`` writes ``DIR/<name>.jsonl``, one record per
test. Attribution uses CUPTI external correlation ids pushed around each
test, never timestamps guessed afterwards:

* a test's setup, call and teardown of function-scoped fixtures: that test;
* the setup of a wider fixture (class, module, package, session): every
  test of that scope, so a fixture that warms a kernel up never hides it;
* any teardown phase, where wider fixtures are finalised: every test;
* launches with no external id (other threads, import time): every test;
* Python child processes: the scope they were started in.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from . import hook, parts

RESULT_NAME = "pytest"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernel-symbol-map", "kernel recording (CUPTI)")
    group.addoption("--kernel-record", metavar="DIR", default=None,
                    help="record the CUDA kernels each test launches into DIR/<name>.jsonl, for select")
    group.addoption("--kernel-record-name", metavar="NAME", default=RESULT_NAME,
                    help=f"the recording's file name (default {RESULT_NAME}; one per CI shard)")
    group.addoption("--kernel-record-commit", metavar="SHA", default=None,
                    help="commit the run is of (default: CI variables, then git)")


def pytest_configure(config: pytest.Config) -> None:
    folder = config.getoption("kernel_record")
    if not folder:
        return
    if os.environ.get(hook.FOLDER_VARIABLE):
        # Both would record this process, and each would miss what the other took: never a complete step.
        raise pytest.UsageError("--kernel-record cannot run under `kernel-symbol-map record`; use one of them")
    config.pluginmanager.register(KernelRecorder(config, Path(folder)), "kernel_symbol_map_recorder")


class KernelRecorder:
    # Tests feed kernel activity through a backend of their own; None means CUPTI.
    backend_factory: Callable[[Callable[..., None]], Any] | None = None

    def __init__(self, config: pytest.Config, out: Path) -> None:
        from .process import ProcessRecorder

        self.config = config
        self.out = out
        self.name = config.getoption("kernel_record_name")
        out.mkdir(parents=True, exist_ok=True)
        self.parts = Path(tempfile.mkdtemp(prefix=f".parts-{self.name}-", dir=out))
        os.environ[hook.FOLDER_VARIABLE] = str(self.parts)  # Python children record too
        os.environ[hook.SCOPE_VARIABLE] = parts.SESSION
        backend = None
        if self.backend_factory is not None:
            backend = type(self).backend_factory(lambda activities: self.recorder.take(activities))
        ProcessRecorder.current = None
        self.recorder = ProcessRecorder.start_current(self.parts, parts.SESSION, backend=backend)
        self.tests: list[str] = []

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.tests = [item.nodeid for item in items]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._scope(item.nodeid):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self) -> Generator[None, None, None]:
        with self._scope(parts.SESSION):  # wider fixtures end here: conservative, every test
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, None, None]:
        if fixturedef.scope == "function":
            yield
            return
        node = "" if fixturedef.scope == "session" else request.node.nodeid
        with self._scope(parts.SESSION + node):
            yield

    @contextmanager
    def _scope(self, scope: str) -> Iterator[None]:
        """Launches in the block (and Python children started in it) belong to ``scope``."""
        previous = os.environ.get(hook.SCOPE_VARIABLE, parts.SESSION)
        os.environ[hook.SCOPE_VARIABLE] = scope
        try:
            with self.recorder.attributing(scope):
                yield
        finally:
            os.environ[hook.SCOPE_VARIABLE] = previous

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from .. import mapformat

        interrupted = "the test run was interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else ""
        self.recorder.finish()
        commit = mapformat.resolve_commit(self.config.getoption("kernel_record_commit"), Path.cwd())
        records = parts.test_records(self.parts, self.tests, commit, interrupted)
        out = self.out / f"{self.name}.jsonl"
        parts.write_jsonl(out, records)
        shutil.rmtree(self.parts, ignore_errors=True)
        for key in (hook.FOLDER_VARIABLE, hook.SCOPE_VARIABLE):
            os.environ.pop(key, None)
        incomplete = sum(1 for r in records if not r["complete"])
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            why = f"; {incomplete} incomplete: {records[0]['reason']}" if incomplete else ""
            reporter.write_line(f"kernel_symbol_map: recorded {len(records)} tests into {out}{why}")
