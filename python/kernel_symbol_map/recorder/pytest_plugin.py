"""The recorder's pytest plugin: which kernels each test launched, and exact deselection from ``select``.

Registered through the ``pytest11`` entry point and inactive unless asked.

``pytest --kernel-record DIR`` writes ``DIR/<name>.jsonl``, one record per
test that pytest kept (a test that ``-m``, ``-k``, ``--deselect`` or another
plugin removed gets none). Attribution uses CUPTI external correlation ids
pushed around each test, never timestamps guessed afterwards:

* a test's setup, call and teardown of function-scoped fixtures: that test;
* the setup of a wider fixture (class, module, package, session): every
  test of that scope, so a fixture that warms a kernel up never hides it;
* any teardown phase, where wider fixtures are finalised: every test;
* launches with no external id (other threads, import time): every test;
* Python child processes: the scope they were started in (a
  ``forkserver``'s children: the scope the server was started in), and
  every test that ran while they lived (a persistent worker serves later
  tests; see :mod:`.timeline`);
* a process no recorder saw (a native program, a shell; see :mod:`.spawns`):
  followed by the loader's audit library (:mod:`.audit`), it leaves the
  records complete when it loaded no GPU driver and exited whole; else the
  record of every test from its start on (or while it lived, when its end
  was seen) is incomplete, and names it.

Each record lists the ``libraries`` (file names) its processes had loaded:
this process's at the test's end, a child's and a native child's whole
life's.

With Python coverage on (the default; ``--kernel-record-python off``), each
record also names the project's Python code the test executed, as block
digests, attributed by the same scopes (:mod:`.pycoverage`), and pytest's
rootdir, from which its node ids are spelled.

A record is complete only when the test ran whole and passed (see
:mod:`.outcomes`); under ``--dist each``, on every worker that ran it.
Under ``pytest-xdist`` each worker records its own tests into the
controller's parts folder, and the controller, which sees every test's
reports, writes the one recording. The recording a run is named after is
removed when it starts, so a run that dies before its end (a crash,
``pytest-timeout``'s thread method) leaves none rather than an earlier one.

``pytest --kernel-select selection.json`` reads ``select --json`` and
deselects exactly the node ids in ``skip``: never a prefix, never a test it
does not list. A missing or unreadable file deselects nothing, and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .._words import plural
from . import environment, native, parts, timeline
from .outcomes import Outcomes
from .pycoverage import ROOT_VARIABLE

RESULT_NAME = "pytest"
PARTS_VARIABLE = "KERNEL_SYMBOL_MAP_PYTEST_PARTS"  # an xdist controller's parts folder, for its workers
TESTS_LOG = "tests.log"  # in the parts folder: every worker's test begins and ends (see .timeline)
SELECTION_SCHEMA = "kernel-symbol-map/selection/1"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernel-symbol-map", "kernel recording (CUPTI) and test selection")
    group.addoption("--kernel-record", metavar="DIR", default=None,
                    help="record the CUDA kernels each test launches into DIR/<name>.jsonl, for select")
    group.addoption("--kernel-record-name", metavar="NAME", default=RESULT_NAME,
                    help=f"the recording's file name (default {RESULT_NAME}; one per CI shard)")
    group.addoption("--kernel-record-commit", metavar="SHA", default=None,
                    help="commit the run is of (default: CI variables, then git)")
    group.addoption("--kernel-record-python", choices=("on", "off"), default="on",
                    help="with --kernel-record, also record the project's Python code each test ran (coverage.py; "
                    "default on), for select's per-file decisions on .py files")
    group.addoption("--kernel-select", metavar="FILE", default=None,
                    help="deselect exactly the tests `kernel-symbol-map select --json` lists in skip")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Start measuring Python code before the initial conftests (and what they import) load."""
    options = early_config.known_args_namespace
    if not getattr(options, "kernel_record", None) or getattr(options, "kernel_record_python", "on") != "on":
        return
    if os.environ.get(environment.FOLDER_VARIABLE) or (_distributed_options(options)
                                                       and not os.environ.get(PARTS_VARIABLE)):
        return  # under `record` (refused at configure), or an xdist controller (workers inherit its parts folder)
    from .pycoverage import PythonCoverage, project_root

    root = project_root(early_config.rootpath)
    os.environ[ROOT_VARIABLE] = str(root or "")  # children measure too; "" says why not, once each
    PythonCoverage.start(root)


def pytest_configure(config: pytest.Config) -> None:
    selection = config.getoption("kernel_select")
    if selection:
        config.pluginmanager.register(KernelSelect(Path(selection)), "kernel_symbol_map_select")
    folder = config.getoption("kernel_record")
    if not folder:
        return
    worker = hasattr(config, "workerinput")
    if os.environ.get(environment.FOLDER_VARIABLE) and not worker:
        # Both would record this process, and each would miss what the other took: never a complete step.
        raise pytest.UsageError("--kernel-record cannot run under `kernel-symbol-map record`; use one of them")
    role = "worker" if worker else "controller" if _distributed(config) else "single"
    config.pluginmanager.register(KernelRecorder(config, Path(folder), role), "kernel_symbol_map_recorder")


def _restore(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def _rootdir(rootpath: Path) -> str | None:
    """pytest's rootdir relative to the git top level ("." when it is the top level), or None outside git."""
    from .pycoverage import project_root

    top = project_root(rootpath)
    if top is None:
        return None
    try:
        return Path(os.path.relpath(rootpath.resolve(), top.resolve())).as_posix()
    except ValueError:
        return None


def _test_file(module: pytest.Module) -> bool:
    """The module matches ``python_files`` (pytest collects it as a test file, not as an argument it was given)."""
    import fnmatch

    return any(fnmatch.fnmatch(module.path.name, pattern) for pattern in module.config.getini("python_files"))


def _distributed(config: pytest.Config) -> bool:
    """This process is a pytest-xdist controller: workers run the tests, it only gathers reports."""
    return _distributed_options(config.option)


def _distributed_options(options: Any) -> bool:
    return getattr(options, "dist", "no") != "no" and bool(getattr(options, "numprocesses", None))


class KernelRecorder:
    # Tests feed kernel activity through a backend of their own; None means CUPTI.
    backend_factory: Callable[[Callable[..., None]], Any] | None = None

    def __init__(self, config: pytest.Config, out: Path, role: str) -> None:
        self.config = config
        self.out = out
        self.role = role  # "single" (tests here), "controller" (xdist: gathers), "worker" (xdist: runs tests)
        self.name = config.getoption("kernel_record_name")
        self.tests: dict[str, None] = {}  # node ids pytest kept, in order
        # How each test went, per xdist worker under --dist each (every worker runs every test), else one for all:
        # a test rerun on another worker after a crash is one test whose last attempt decides.
        self.outcomes: dict[str, Outcomes] = {}
        self.each = role == "controller" and getattr(config.option, "dist", "no") == "each"
        self.recorder: Any = None
        self.log: Path | None = None
        self.loader: str | None = None  # LD_AUDIT as it was before the recording
        self.collection_errors = 0  # files or packages that failed to collect (an xdist controller hears its workers')
        self.summary: str | None = None  # the line the terminal summary prints: what was recorded, where
        if role == "worker":
            self.parts = Path(os.environ[PARTS_VARIABLE])
        else:
            out.mkdir(parents=True, exist_ok=True)
            # A run that dies before it writes (os._exit, a signal) must leave no recording, never an earlier one.
            (out / f"{self.name}.jsonl").unlink(missing_ok=True)
            # Absolute: children that run in another folder (a compiler with cwd=) write here too.
            self.parts = Path(tempfile.mkdtemp(prefix=f".parts-{self.name}-", dir=out.resolve()))
            os.environ[PARTS_VARIABLE] = str(self.parts)  # xdist's workers inherit it
        if role != "controller":
            self._start()

    def _start(self) -> None:
        import platform

        from .process import ProcessRecorder

        platform.uname().processor  # noqa: B018 - runs `uname -p` now, before recording: xdist's workers ask for it

        os.environ[environment.FOLDER_VARIABLE] = str(self.parts)  # Python children record too
        os.environ[environment.SCOPE_VARIABLE] = parts.SESSION
        self.log = self.parts / TESTS_LOG
        os.environ[environment.TESTS_VARIABLE] = str(self.log)  # children follow it: which tests ran while they lived
        self.loader = os.environ.get(native.LOADER_VARIABLE)
        library = native.audit_library()
        if library is not None:
            # What this process starts from native code (ctypes, an extension module) inherits its environment:
            # followed by the audit library, its records carry no spawn id and count for every test.
            os.environ[native.LOADER_VARIABLE] = native.with_audit(self.loader, library)
        backend = None
        if self.backend_factory is not None:
            backend = type(self).backend_factory(lambda activities: self.recorder.take(activities))
        ProcessRecorder.current = None
        self.recorder = ProcessRecorder.start_current(self.parts, parts.SESSION, backend=backend, own_log=self.log,
                                                     root=True)  # orphans below it stay in sight (.tree)

    # -- which tests pytest kept, and how each one went ------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.tests.update(dict.fromkeys(item.nodeid for item in session.items))  # after -m, -k and --deselect

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.tests.update(dict.fromkeys(ids))  # each worker's kept tests (the same, or one shard's)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        skip_reason = ""
        if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
            skip_reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        runner = _worker(report) if self.each else ""
        self.outcomes.setdefault(runner, Outcomes()).report(report.nodeid, report.when, report.outcome,
                                                            bool(getattr(report, "wasxfail", None)), skip_reason)

    def _verdict(self, test: str) -> str:
        """"" when every run of ``test`` (one per worker under ``--dist each``) ran whole and passed, else why not."""
        runs = [o for o in self.outcomes.values() if test in o.tests] or [Outcomes()]
        return next((why for why in (o.verdict(test) for o in runs) if why), "")

    # -- attribution, in the processes that run tests --------------------------------------------

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors += 1

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, None, None]:
        python = self.recorder.python if self.recorder is not None else None
        # pytest's own test modules only: a doctest module or a plugin's collector imports code that is not a
        # test module's own, so its import-time code stays every test's
        if python is None or type(collector) is not pytest.Module or not _test_file(collector):
            yield
            return
        with python.collecting(collector.path, parts.SESSION + collector.nodeid):  # its import: its tests
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        if self.log is not None:
            timeline.append(self.log, timeline.BEGIN, item.nodeid)
        try:
            with self._scope(item.nodeid):
                yield
        finally:
            if self.log is not None:
                self.recorder.reclaim()  # CUPTI, from a profiler the test's teardown started: later tests are ours
                self.recorder.settle()  # the processes the test started and waited for end with it
                self.recorder.note_libraries(item.nodeid)  # what this process had loaded by the test's end
                timeline.append(self.log, timeline.END, item.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self) -> Generator[None, None, None]:
        try:
            yield
        finally:
            if self.recorder is not None:
                self.recorder.reclaim()  # from a profiler the test started: its teardown's launches are ours again

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self) -> Generator[None, None, None]:
        with self._scope(parts.SESSION):  # wider fixtures end here: conservative, every test
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
        if call.when != "teardown":
            yield
            return
        # pytest-rerunfailures ends the wider fixtures it held back for a re-run that does not come here, while it
        # makes the teardown's report: still a teardown, every test's
        with self._scope(parts.SESSION):
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
        if self.recorder is None:
            yield
            return
        previous = os.environ.get(environment.SCOPE_VARIABLE, parts.SESSION)
        os.environ[environment.SCOPE_VARIABLE] = scope
        try:
            with self.recorder.attributing(scope):
                yield
        finally:
            os.environ[environment.SCOPE_VARIABLE] = previous

    # -- the recording -----------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from .. import mapformat
        from ..mapformat import runline

        if self.recorder is not None:
            _release_forkserver()
            self.recorder.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
        for key in (environment.FOLDER_VARIABLE, environment.SCOPE_VARIABLE, environment.TESTS_VARIABLE, ROOT_VARIABLE):
            os.environ.pop(key, None)
        if self.recorder is not None:
            _restore(native.LOADER_VARIABLE, self.loader)
        if self.role == "worker":  # the controller merges every worker's part
            return
        os.environ.pop(PARTS_VARIABLE, None)
        interrupted = "the test run was interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else ""
        commit = mapformat.resolve_commit(self.config.getoption("kernel_record_commit"), Path.cwd())
        records = parts.test_records(self.parts, list(self.tests), commit, interrupted)
        rootdir = _rootdir(self.config.rootpath)
        for record in records:
            if rootdir is not None:
                record["rootdir"] = rootdir  # where the node ids are spelled from: select finds a test file's tests
            why = self._verdict(record["test"])
            if why:
                record["complete"] = False
                record["reason"] = "; ".join(filter(None, [why, record["reason"]]))
        out = self.out / f"{self.name}.jsonl"
        # A run that did not collect or get through its tests says so in a first line, and select warns of it
        run = {"exit_status": int(exitstatus), "tests_collected": session.testscollected,  # runline.COUNTS
               "collection_errors": self.collection_errors}
        broken = self.collection_errors or int(exitstatus) in runline.ENDED or not records
        parts.write_jsonl(out, [{"run": run}, *records] if broken else records)
        shutil.rmtree(self.parts, ignore_errors=True)
        incomplete = [r for r in records if not r["complete"]]
        why = f"; {len(incomplete)} incomplete, e.g. {incomplete[0]['test']}: {incomplete[0]['reason']}" \
            if incomplete else ""
        if self.collection_errors:
            why += f"; {plural(self.collection_errors, 'file')} failed to collect: their tests have no records"
        self.summary = f"kernel_symbol_map: recorded {plural(len(records), 'test')} into {out}{why}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The recording's line, among pytest's summary lines: never after a progress line's dots."""
        if self.summary is not None:
            terminalreporter.write_line(self.summary)


def _worker(report: pytest.TestReport) -> str:
    """The xdist worker a report came from ("gw0"), as the controller received it."""
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    return str(getattr(gateway, "id", None) or getattr(report, "worker_id", ""))


def _release_forkserver() -> None:
    """Let the fork server this process started (``multiprocessing``'s ``forkserver``) exit now, unwaited.

    It is a recorded interpreter that lives as long as this process holds its
    pipe, so it would write its part file only after the merge, and every
    test would read as incomplete. Closing this process's end asks it to
    exit once the processes it forked have ended too (they hold the pipe);
    the merge waits a while for its part. A later ``forkserver`` start in
    this process starts a new one.
    """
    module = sys.modules.get("multiprocessing.forkserver")
    server = getattr(module, "_forkserver", None)
    lock = getattr(server, "_lock", None)
    if server is None or lock is None:
        return
    with lock:
        alive = getattr(server, "_forkserver_alive_fd", None)
        if alive is None or getattr(server, "_forkserver_pid", None) is None:
            return
        os.close(alive)
        server._forkserver_alive_fd = None
        server._forkserver_pid = None  # not waited for: a child it forked may keep it running
        server._forkserver_address = None


class KernelSelect:
    """``--kernel-select``: deselect exactly the node ids ``select --json`` lists in ``skip``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skip: set[str] = set()
        self.deselected = 0
        self.problem = ""
        self.why = ""
        try:
            document = json.loads(path.read_text())
            if not isinstance(document, dict) or document.get("schema") != SELECTION_SCHEMA:
                raise ValueError(f"not a {SELECTION_SCHEMA} document")
            skip = document.get("skip")
            if not isinstance(skip, list) or not all(isinstance(t, str) for t in skip):
                raise ValueError('"skip" is not a list of test ids')
        except (OSError, ValueError) as e:
            self.problem = f"{path}: {getattr(e, 'strerror', None) or e}; every test runs"
            return
        self.skip = set(skip)
        fallback = document.get("fallback")
        self.why = f"fallback {fallback}" if fallback else "their recordings launched no kernel the change reaches"

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        chosen = [item for item in items if item.nodeid in self.skip]  # exact ids: never a prefix
        if chosen:
            config.hook.pytest_deselected(items=chosen)
            items[:] = [item for item in items if item.nodeid not in self.skip]
            self.deselected += len(chosen)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.problem:
            terminalreporter.write_line(f"kernel_symbol_map: --kernel-select {self.problem}")
        elif self.deselected or not self.skip:
            terminalreporter.write_line(f"kernel_symbol_map: --kernel-select skipped {plural(self.deselected, 'test')} "
                                        f"({self.why}; {self.path})")
        else:  # an xdist controller: its workers deselected
            terminalreporter.write_line(f"kernel_symbol_map: --kernel-select skipped the tests of {self.path}'s "
                                        f"skip that were collected ({len(self.skip)} listed; {self.why})")
