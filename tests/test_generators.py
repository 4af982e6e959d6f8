"""Generated sources (issue 26, 1-2): what build rules and the configure write is reached by what they read.

tests/projects/generators is built once per generator with nvcc in a git
repository: a build rule writes ``$BUILD/gen/gen_ops.cu`` and ``gen_ops.h``
from ``csrc/ops.def``, and the configure writes git-ignored
``csrc/marlin_gen/*.cu`` from ``csrc/tiles.h``. On the code before issue 26
(3833603), ``--changed csrc/ops.def`` reached no kernel of the generated
source, and ``--changed csrc/tiles.h`` none of the configure's.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import projects
import pytest
from toolchains import require

from kernel_symbol_map.buildtree import buildrules
from kernel_symbol_map.producer.generated import Known, tracked_files

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
GEN_SILU, GEN_GELU, USES_HEADER, PLAIN = "_Z8gen_siluPf", "_Z8gen_geluPf", "_Z11uses_headerPf", "_Z5plainPf"
MARLIN_64, MARLIN_128 = "_Z9marlin_64Pf", "_Z10marlin_128Pf"
TESTS = {"test_silu": [GEN_SILU], "test_gelu": [GEN_GELU], "test_header": [USES_HEADER], "test_plain": [PLAIN],
         "test_marlin": [MARLIN_64, MARLIN_128]}


def ksm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", *args], capture_output=True, text=True,
                          cwd=cwd, check=False)


@dataclass(frozen=True)
class Built:
    src: Path
    build: Path
    map: Path
    commit: str
    recordings: Path

    @property
    def document(self) -> dict[str, Any]:
        return json.loads(gzip.decompress(self.map.read_bytes()))

    def object(self, source: str) -> dict[str, Any]:
        return next(o for o in self.document["objects"] if o["source"] == source)

    def ran(self, *changed: str, extra: tuple[str, ...] = ()) -> set[str]:
        proc = ksm("select", "--map", str(self.map), "--recordings", str(self.recordings), "--json",
                   "--changed", *changed, *extra, cwd=self.src)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        result = json.loads(proc.stdout)
        return set(TESTS) - set(result["skip"])


def _build(where: Path, generator: str, build: Path | None = None) -> Built:
    """The project in a git repository at ``where/src``, built in ``build`` (default ``where/build``)."""
    cmake = next((c for c in projects.cmakes() if c.label == "3.25"), None)
    require(cmake, "system CMake 3.25")
    src = where / "src"
    shutil.copytree(projects.PROJECTS / "generators", src)
    subprocess.run([*GIT, "init", "-q", str(src)], check=True)
    subprocess.run([*GIT, "-C", str(src), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(src), "commit", "-qm", "base"], check=True)
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    b = projects.configure_and_build_at(src, build or where / "build", cmake, generator,
                                        f"-DPython_EXECUTABLE={sys.executable}")
    out = where / "map.json.gz"
    proc = ksm("build", "--build-dir", str(b.build), "--out", str(out), "--commit", commit)
    assert proc.returncode == 0, proc.stderr
    recordings = where / "tests.jsonl"
    recordings.write_text("".join(json.dumps({"test": t, "kernels": k, "complete": True, "commit": commit}) + "\n"
                                  for t, k in TESTS.items()))
    return Built(src, b.build, out, commit, recordings)


@pytest.fixture(scope="session", params=["Ninja", "Unix Makefiles"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(tmp_path_factory.mktemp(f"generators-{request.param.split()[0].lower()}"), request.param)


def test_a_generated_source_depends_on_what_its_build_rule_reads(built: Built) -> None:
    generated = built.object("$BUILD/gen/gen_ops.cu")
    assert generated["rule_inputs"] == ["csrc/ops.def", "tools/gen_ops.py"]
    assert {"csrc/ops.def", "tools/gen_ops.py"} <= set(generated["deps"])
    assert "+build-rules" in built.document["deps_from"]
    # a generated header brings its rule's inputs to every object that includes it
    assert built.object("csrc/uses_header.cu")["rule_inputs"] == ["csrc/ops.def", "tools/gen_ops.py"]
    assert "rule_inputs" not in built.object("csrc/plain.cu")
    assert "configure_generated" not in generated  # a build rule makes it: its inputs are known


def test_a_build_time_generators_input_reaches_its_kernels(built: Built) -> None:
    assert built.ran("csrc/ops.def") == {"test_silu", "test_gelu", "test_header", "test_marlin"}
    assert built.ran("tools/gen_ops.py", extra=("--whole-target",)) >= {"test_silu", "test_gelu", "test_header"}


def test_what_the_configure_wrote_is_reached_by_every_change_the_map_knows(built: Built) -> None:
    for source in ("csrc/marlin_gen/marlin_64.cu", "csrc/marlin_gen/marlin_128.cu"):
        assert built.object(source)["configure_generated"] is True
    assert not any(o.get("configure_generated") for o in built.document["objects"]
                   if not o["source"].startswith("csrc/marlin_gen/"))
    assert built.ran("csrc/tiles.h") == {"test_plain", "test_marlin"}
    assert built.ran("csrc/uses_header.cu") == {"test_header", "test_marlin"}
    proc = ksm("select", "--map", str(built.map), "--recordings", str(built.recordings), "--json",
               "--changed", "csrc/tiles.h", cwd=built.src)
    files = json.loads(proc.stdout)["files"]
    assert [{k: f[k] for k in ("path", "status", "kernels", "decided_by")} for f in files] == \
        [{"path": "csrc/tiles.h", "status": "kernels", "kernels": 3, "decided_by": "map"}]


def test_a_file_no_map_knows_still_runs_everything(built: Built) -> None:
    """The configure's script itself is in no map: not cleared through the generated objects."""
    assert built.ran("tools/gen_marlin.py") == set(TESTS)


def test_a_generator_input_newer_than_the_object_fails_closed(built: Built, tmp_path: Path) -> None:
    ops = built.src / "csrc" / "ops.def"
    saved = ops.stat()
    try:
        newest = max(p.stat().st_mtime_ns for p in built.build.rglob("*.o"))
        os.utime(ops, ns=(saved.st_atime_ns, newest + 10**9))  # edited after the build, not rebuilt
        out = tmp_path / "stale.json.gz"
        proc = ksm("build", "--build-dir", str(built.build), "--out", str(out), "--no-cache")
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(gzip.decompress(out.read_bytes()))
        assert doc["incomplete"] and "ops.def is newer than the object" in doc["reason"]
    finally:
        os.utime(ops, ns=(saved.st_atime_ns, saved.st_mtime_ns))


def test_where_git_cannot_list_the_files_the_map_clears_no_test(built: Built, tmp_path: Path) -> None:
    env = {**os.environ, "GIT_DIR": str(tmp_path / "no-repository")}  # as an sdist build: git finds nothing
    out = tmp_path / "blind.json.gz"
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "build", "--build-dir", str(built.build),
                           "--out", str(out), "--no-cache", "--commit", built.commit], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["tracked_files_unknown"] is True and not any(o.get("configure_generated") for o in doc["objects"])
    assert "git cannot list the source root's files" in " ".join(doc["notes"])
    assert str(built.src) not in json.dumps(doc)  # the map does not depend on where the build ran
    args = ["select", "--map", str(out), "--recordings", str(built.recordings), "--json", "--changed", "csrc/tiles.h"]
    result = json.loads(ksm(*args, cwd=built.src).stdout)
    assert result["fallback"] == "tracked-files-unknown" and not result["skip"]
    assert ksm(*args, "--strict", cwd=built.src).returncode == 1


def _subset(built: Built, target: str, out: Path, env: dict[str, str] | None = None) -> Path:
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "build", "--build-dir", str(built.build),
                           "--out", str(out), "--no-cache", "--commit", built.commit, "--targets", target],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_shard_that_knows_the_file_reaches_what_the_configure_wrote_in_another(built: Built, tmp_path: Path) -> None:
    """Two maps of one build (--targets, or shards): only plainlib's knows csrc/tiles.h, only ops' holds
    the marlin kernels; together they must run test_marlin (on the first fix, which reached a map's own
    configure-generated objects only, the marlin test was skipped)."""
    maps = [_subset(built, t, tmp_path / f"{t}.json.gz") for t in ("ops", "plainlib")]
    proc = ksm("select", *(a for m in maps for a in ("--map", str(m))), "--recordings", str(built.recordings),
               "--json", "--changed", "csrc/tiles.h", cwd=built.src)
    result = json.loads(proc.stdout)
    assert result["fallback"] is None and {"test_plain", "test_marlin"} <= set(TESTS) - set(result["skip"])


def test_merge_keeps_what_any_input_says_the_map_cannot_clear(built: Built, tmp_path: Path) -> None:
    ops = _subset(built, "ops", tmp_path / "ops.json.gz")
    blind = _subset(built, "plainlib", tmp_path / "blind.json.gz",
                    env={**os.environ, "GIT_DIR": str(tmp_path / "no-repository")})
    doc = json.loads(gzip.decompress(ops.read_bytes()))
    doc["configure_inputs"] = [*doc["configure_inputs"], "cmake/only_in_this_shard.cmake"]
    ops.write_bytes(gzip.compress(json.dumps(doc).encode()))
    for order in ([ops, blind], [blind, ops]):
        out = tmp_path / "merged.json.gz"
        proc = ksm("merge", str(out), *map(str, order))
        assert proc.returncode == 0, proc.stderr
        merged = json.loads(gzip.decompress(out.read_bytes()))
        assert merged["tracked_files_unknown"] is True
        assert "cmake/only_in_this_shard.cmake" in merged["configure_inputs"]
        assert any(o.get("configure_generated") for o in merged["objects"])


def test_a_build_folder_configured_through_a_symlink(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The compilers spell generated headers through the link (CMAKE_BINARY_DIR), the model the real
    folder: the rule inputs must still be found."""
    where = tmp_path_factory.mktemp("generators-link")
    (where / "real").mkdir()
    (where / "link").symlink_to(where / "real")
    linked = _build(where, "Ninja", build=where / "link")
    assert linked.object("$BUILD/gen/gen_ops.cu")["rule_inputs"] == ["csrc/ops.def", "tools/gen_ops.py"]
    assert linked.object("csrc/uses_header.cu")["rule_inputs"] == ["csrc/ops.def", "tools/gen_ops.py"]
    assert linked.ran("csrc/ops.def") >= {"test_silu", "test_gelu", "test_header"}


# -- the rule graph and the configure's files, unit by unit -------------------------------------------------


def test_rules_walk_back_through_generated_generators(tmp_path: Path) -> None:
    (tmp_path / "CMakeCache.txt").write_text("")
    (tmp_path / "build.ninja").write_text(
        "rule CUSTOM_COMMAND\n  command = x\n"
        "build gen/tool.py: CUSTOM_COMMAND /src/tool.py.in\n"
        "build gen/a.cu | ${cmake_ninja_workdir}gen/a.cu: CUSTOM_COMMAND gen/tool.py /src/a.def || order_only\n"
        "build /src/CMakeLists.txt: phony\n"
        "build alias: phony gen/a.cu\n")
    rules = buildrules.read(tmp_path, "Ninja")
    leaves, made = rules.upstream([f"{tmp_path}/gen/a.cu"])
    assert leaves == {"/src/tool.py.in", "/src/a.def"}
    assert made == {f"{tmp_path}/gen/a.cu", f"{tmp_path}/gen/tool.py"}
    assert "/src/CMakeLists.txt" not in rules.outputs  # a phony with no inputs makes nothing
    assert rules.upstream([f"{tmp_path}/alias"])[0] == {"/src/tool.py.in", "/src/a.def"}


@pytest.mark.parametrize("generator", ["Ninja", "Ninja Multi-Config"])
def test_a_ninja_rule_s_implicit_inputs_are_inputs_of_what_it_makes(tmp_path: Path, generator: str) -> None:
    """``add_custom_command(DEPENDS ...)`` is written as implicit inputs (after ``|``): the generator script
    feeds the file as much as its explicit input does; order-only inputs (after ``||``) do not. Either Ninja
    generator writes them so."""
    (tmp_path / "build.ninja").write_text(
        "rule CUSTOM_COMMAND\n  command = x\n"
        "build gen/b.cu: CUSTOM_COMMAND /src/b.def | /src/gen_b.py /src/tables.h || order_only\n"
        "build gen/c.cu: CUSTOM_COMMAND | /src/gen_c.py\n")
    rules = buildrules.read(tmp_path, generator)
    assert rules.upstream([f"{tmp_path}/gen/b.cu"])[0] == {"/src/b.def", "/src/gen_b.py", "/src/tables.h"}
    assert rules.upstream([f"{tmp_path}/gen/c.cu"])[0] == {"/src/gen_c.py"}


def test_makefile_rules_unescape_their_paths(tmp_path: Path) -> None:
    target = tmp_path / "CMakeFiles" / "t.dir"
    target.mkdir(parents=True)
    (tmp_path / "CMakeFiles" / "TargetDirectories.txt").write_text(f"{target}\n{tmp_path}/CMakeFiles/none.dir\n")
    (target / "build.make").write_text(
        "CMAKE_COMMAND = /usr/bin/cmake\n"
        "gen/my\\ ops.cu: /src/my\\ ops.def\n"
        "gen/my\\ ops.cu: /src/gen.py\n\t@echo generating\n"
        "CMakeFiles/t.dir/depend: cmake_force\n")
    rules = buildrules.read(tmp_path, "Unix Makefiles")
    assert rules.made_from == {f"{tmp_path}/gen/my ops.cu": ("/src/my ops.def", "/src/gen.py")}


def test_which_files_the_configure_wrote(tmp_path: Path) -> None:
    root, build = tmp_path / "src", tmp_path / "src" / "build"
    (root / "csrc").mkdir(parents=True)
    build.mkdir()
    for name in ("tracked.cu", "untracked.cu"):
        (root / "csrc" / name).write_text("")
    (build / "link.cuh").symlink_to(root / "csrc" / "tracked.cu")
    (root / "version.h.in").write_text("#define V 1\n")
    (build / "version.h").write_text("#define V 1\n")  # COPYONLY
    (root / "params.h.in").write_text("#define SCALE @SCALE@\n")
    (build / "params.h").write_text("#define SCALE 3\n")  # @SCALE@ from an execute_process, say
    subprocess.run([*GIT, "init", "-q", str(root)], check=True)
    subprocess.run([*GIT, "-C", str(root), "add", "csrc/tracked.cu"], check=True)
    known = Known.of(root, [build], [f"{build}/gen/rule.cu"], [root / ".deps" / "cutlass-src"],
                     [f"{root}/CMakeLists.txt", f"{root}/version.h.in", f"{root}/params.h.in"], tracked_files(root))
    wrote = known.written_by_configure
    assert not wrote(f"{root}/csrc/tracked.cu")
    assert wrote(f"{root}/csrc/untracked.cu")
    assert not wrote(f"{build}/gen/rule.cu")  # a build rule's
    assert not wrote(f"{root}/.deps/cutlass-src/gemm.cu")  # FetchContent's
    assert wrote(f"{root}/.deps/cutlass-src-extra/gemm.cu")  # untracked beside FetchContent's folder, not in it
    assert not wrote(f"{build}/CMakeFiles/t.dir/cmake_pch.hxx.cxx")  # CMake's own
    assert not wrote(f"{build}/sub/CMakeFiles/t.dir/Unity/unity_0_cxx.cxx")  # a subdirectory's, too
    assert not wrote(f"{build}/version.h")  # a configure_file copy of a configure input, byte for byte
    assert wrote(f"{build}/params.h")  # substituted: its values may come from any file the configure read
    assert wrote(f"{build}/written.cu")  # the build folder is inside the root: its own rules apply
    assert not wrote(f"{build}/link.cuh")  # a link to a tracked file
    assert not wrote("/usr/include/stdio.h")
    assert tracked_files(tmp_path / "nogit") is None
    blind = Known.of(tmp_path / "nogit", [tmp_path / "nogit" / "build"], [], [], [], None)
    assert not blind.written_by_configure(f"{tmp_path}/nogit/a.cu")  # the map says so
    assert blind.written_by_configure(f"{tmp_path}/nogit/build/a.cu")  # a build folder needs no git


def test_a_link_in_the_build_folder_to_a_file_outside_the_project_is_the_configure_s(tmp_path: Path) -> None:
    """The configure chose what a link it made in the build folder points at: a header outside the project
    (a system one, another checkout's) is no file the project or its rules own, so the link is written by
    the configure; a link to a tracked file is that file."""
    root, build, outside = tmp_path / "src", tmp_path / "src" / "build", tmp_path / "elsewhere"
    (root / "csrc").mkdir(parents=True)
    build.mkdir()
    outside.mkdir()
    (outside / "config.h").write_text("#define USE_FAST 1\n")
    (root / "csrc" / "tracked.h").write_text("")
    (build / "config.h").symlink_to(outside / "config.h")
    (build / "tracked.h").symlink_to(root / "csrc" / "tracked.h")
    subprocess.run([*GIT, "init", "-q", str(root)], check=True)
    subprocess.run([*GIT, "-C", str(root), "add", "csrc/tracked.h"], check=True)
    known = Known.of(root, [build], [], [], [], tracked_files(root))
    assert known.written_by_configure(f"{build}/config.h")
    assert not known.written_by_configure(f"{outside}/config.h")  # the file itself, read from outside
    assert not known.written_by_configure(f"{build}/tracked.h")


def test_a_map_built_from_edited_sources_says_which_and_clears_no_test(built: Built, tmp_path: Path) -> None:
    """A tree whose mapped files are not its commit's (edited, not committed) gives a map that names them;
    show says DIRTY, and select takes it as evidence for no commit (map-dirty, exit 1 with --strict)."""
    assert "dirty" not in built.document  # built from its commit's files
    source, other = built.src / "csrc" / "plain.cu", built.src / "README.dirty.txt"
    saved, text = source.stat(), source.read_text()
    try:
        source.write_text(text + "// edited, not committed\n")
        os.utime(source, ns=(saved.st_atime_ns, saved.st_mtime_ns))  # as built: the object is not stale
        other.write_text("not mapped\n")
        subprocess.run([*GIT, "-C", str(built.src), "add", "-N", other.name], check=True)
        out = tmp_path / "dirty.json.gz"
        proc = ksm("build", "--build-dir", str(built.build), "--out", str(out), "--no-cache", "--commit", built.commit)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(gzip.decompress(out.read_bytes()))
        assert doc["dirty"] == ["csrc/plain.cu"] and not doc["incomplete"]
        shown = ksm("show", str(out))
        assert "DIRTY: built from a tree where 1 mapped file differs" in shown.stdout, shown.stdout
        args = ["select", "--map", str(out), "--recordings", str(built.recordings), "--json", "--changed",
                "csrc/tiles.h"]
        result = json.loads(ksm(*args, cwd=built.src).stdout)
        assert result["fallback"] == "map-dirty" and not result["skip"] and "csrc/plain.cu" in result["fallback_why"]
        assert ksm(*args, "--strict", cwd=built.src).returncode == 1
    finally:
        source.write_text(text)
        os.utime(source, ns=(saved.st_atime_ns, saved.st_mtime_ns))
        subprocess.run([*GIT, "-C", str(built.src), "rm", "-q", "--cached", "-f", other.name], check=False)
        other.unlink(missing_ok=True)
