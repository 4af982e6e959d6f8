#!/usr/bin/env python3
"""Break safety-critical lines on purpose, one at a time, and check that a named test fails.

    .venv/bin/python scripts/mutants.py            # every mutant
    .venv/bin/python scripts/mutants.py M03 M17    # some

Each mutant is one textual change to one file (it must match exactly once)
and the tests that must fail with it. The file is restored after each run,
whatever happens. Prints one line per mutant: KILLED (the tests failed, as
they must) or SURVIVED (a test is missing), and exits 1 if any survived.
This is a tool for whoever changes a safety rule, not part of the suite: it
rebuilds nothing, but runs the named tests once per mutant.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "kernel_symbol_map"
CMAKE = "cmake:"  # a file of the CMake package as installed (what builds find), not the checkout's copy
REPO = "repo:"  # a file outside the package, from the repository's root (examples/ci/...)
ORACLE = "tests/test_selection_oracle.py::test_select_runs_what_the_rebuild_changed"
# issue 26: the survivors of selection, device deps and the build model, each killed by a fast test
SELECTION_EVIDENCE = "tests/test_selection_evidence.py"
DEVICE_DEPS = ("tests/test_devicedeps.py::test_a_comma_list_of_architectures_is_kept_whole",
               "tests/test_devicedeps.py::test_every_architecture_of_the_command_is_preprocessed",
               "tests/test_devicedeps.py::test_the_cache_is_used_only_while_its_key_holds")
BUILD_INPUTS = "tests/test_build_inputs.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    file: str  # relative to the package
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = [
    # issue 17's audit
    Mutant("M03", "a test with no recording is read as one that launched nothing",
           "consumer/selection.py", "rec = by_test.get(test)",
           'rec = by_test.get(test) or Recording(test, frozenset(), True, commit, "")',
           ("tests/test_consumer.py::test_a_test_no_recording_knows_always_runs",
            "tests/test_selection_property.py::test_select_never_skips_a_reachable_test")),
    Mutant("M07", "$BUILDn always resolves to the first build folder",
           "mapformat/__init__.py", "index = int(number or 0)", "index = 0",
           ("tests/test_consumer.py::test_each_build_marker_resolves_to_its_own_folder",)),
    Mutant("M08", "validation stops checking that symbols and deps are strings",
           "mapformat/validation.py", "STRING = _of_type(str, _short_enough, _path)",
           "STRING = Rule(lambda values: True, lambda value, where, found: None)",
           ("tests/test_selection_safety.py::test_a_map_that_breaks_the_fail_closed_rules_is_never_evidence",)),
    Mutant("M11b", "the cache key ignores ctime", "_statefile.py",
           "return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]",
           "return [st.st_size, st.st_mtime_ns, st.st_ino]",
           ("tests/test_cache.py::test_rewritten_in_place_with_its_mtime_put_back",)),
    Mutant("M12", "the ninja rule-name decode is dropped", "buildtree/generatorfiles.py",
           "decoded = decode_rule_name(encoded)", "decoded = encoded",
           ("tests/test_readonly.py::test_target_names_with_dots_and_pluses",)),
    Mutant("M16", "a forked child's recorder is not restarted", "recorder/process.py",
           "    ProcessRecorder.current = None\n    ProcessRecorder.start_current(",
           "    return\n    ProcessRecorder.start_current(",
           ("tests/test_recorder.py::test_the_hook_starts_in_spawned_forked_and_subprocess_children",)),
    Mutant("M17", "a step with no Python process recorded is complete", "recorder/parts.py",
           'found.append("no Python process was recorded")', "pass",
           ("tests/test_recorder.py::test_a_command_with_no_python_process_is_never_complete",)),
    Mutant("STALE", "a deps record older than its object is trusted", "buildtree/ninjadeps.py",
           "if mtime > record.mtime_ns:", "if False:",
           ("tests/test_faults.py::test_mapping_while_ninja_still_compiles_fails_closed",)),
    # issue 18's fixes, each against the oracle (what a rebuild actually changes)
    Mutant("18.1", "the CMake package maps only the targets that compile CUDA or HIP",
           f"{CMAKE}KernelSymbolMapConfig.cmake",
           "    if(excluded)\n      set(selected --exclude-targets ${excluded})\n    endif()",
           "    set(devices \"\")\n    foreach(t IN LISTS targets)\n      _kernel_symbol_map_has_device_code(\"${t}\" d)\n"
           "      if(d)\n        list(APPEND devices \"${t}\")\n      endif()\n    endforeach()\n"
           "    set(selected --targets ${devices})\n    set(targets ${devices})",
           (f"{ORACLE}[a header shared with a host-only target]",)),
    Mutant("18.1pch", "a precompiled header is read as device code", "producer/extract.py",
           "if not o.error and not o.precompiled_header], options", "if not o.error], options",
           (f"{ORACLE}[a header precompiled for a host-only target]",)),
    Mutant("18.2", "a device-link object takes deps only from its own target", "buildtree/model.py",
           "for t in (target, *closure(links, target))", "for t in (target,)",
           (f"{ORACLE}[a device function linked across targets]",)),
    Mutant("18.3", "clang's device side is not preprocessed", "buildtree/model.py",
           "    if _clang_languages(cache):\n", "    if False:\n",
           ("tests/test_selection_oracle.py::test_select_runs_what_the_rebuild_changed_hip",)),
    Mutant("18.4link", "a dep reached through a symlink keeps only its spelled path", "producer/extract.py",
           "return (spelled,) if real == spelled or os.path.isabs(real) else (spelled, real)", "return (spelled,)",
           (f"{ORACLE}[a header linked into the build tree]",)),
    Mutant("18.4copy", "configure inputs are clearable", "consumer/kernelmap.py",
           "            if spellings[p] & configured or (canonical is not None and canonical(p) in configured):",
           "            if False:",
           (f"{ORACLE}[a header staged by configure_file]",
            "tests/test_selection_property.py::test_select_never_skips_a_reachable_test")),
    Mutant("18.5", "objects older than their deps are trusted", "buildtree/model.py",
           "    if newest is not None and (stamps[newest] or 0) > built:", "    if False:",
           (f"{ORACLE}[a kernel's new file, after a checkout with no rebuild]",)),
    Mutant("18.6", "select compares a symbolic commit as a name", "consumer/selection.py",
           "    if not is_full_sha(next(iter(commits))):", "    if False:",
           (f"{ORACLE}[main moved on after the map]",)),
    Mutant("18.7", "--diff follows the submodules' ignore setting", "consumer/changes.py",
           '"--no-renames", "--ignore-submodules=none", "-z"', '"--no-renames", "-z"',
           (f"{ORACLE}[a submodule's header, edited there (ignore = all)]",)),
    Mutant("18.7b", "--diff does not expand a submodule into its files", "consumer/changes.py",
           "    for sub in sorted(_submodules(repo) & found):", "    for sub in []:",
           (f"{ORACLE}[a submodule bumped]",)),
    Mutant("18.8", "--whole-target stays in the changed file's targets", "consumer/selection.py",
           "    reached = _walk(forward, targets) | _walk(backward, targets)", "    reached = set(targets)",
           (f"{ORACLE}[host code of a launcher in another target]",)),
    Mutant("W2", "a project configured through a symlink is spelled absolute", "mapformat/__init__.py",
           "    if marked is None:\n        real = os.path.realpath(p)", "    if False:\n        real = os.path.realpath(p)",
           ("tests/test_build_setups.py::test_a_project_configured_through_a_symlink_is_mapped_with_relative_paths",)),
    Mutant("18.4prop", "configure inputs are clearable (the property alone)", "consumer/kernelmap.py",
           "            if spellings[p] & configured or (canonical is not None and canonical(p) in configured):",
           "            if False:",
           ("tests/test_selection_property.py::test_select_never_skips_a_reachable_test",)),
    # issue 22: every reader total
    Mutant("22.1", "a record's optional fields are never checked", "mapformat/validation.py",
           "for key in optional.keys() & set(chain.from_iterable(values)):", "for key in ():",
           ("tests/test_validation.py::test_a_bad_field_is_named_by_its_json_path",)),
    Mutant("22.2", "a gzip map's ratio is unbounded", "mapformat/__init__.py",
           "min(MAX_JSON, MAX_RATIO * len(raw) + (1 << 20))", "MAX_JSON",
           ("tests/test_validation.py::test_a_gzip_bomb_stops_at_its_ratio",)),
    Mutant("22.3", "an include cycle is not detected", "buildtree/ninjafile.py",
           "    if real in stack:\n", "    if False:\n",
           ("tests/test_validation.py::test_an_include_cycle_is_an_error",)),
    Mutant("22.4", "RERUN_CMAKE is looked for in build.ninja alone", "buildtree/ninjafile.py",
           "    for include in _includes(text):\n", "    for include in []:\n",
           ("tests/test_validation.py::test_find_follows_includes_as_multi_config_writes_them",)),
    Mutant("22.5", "a text recording's lines are not checked", "consumer/recordings.py",
           "    at = _first_bad(lines)\n", "    at = -1\n",
           ("tests/test_validation.py::test_a_text_recording_line_that_is_no_name_is_named_by_its_number",)),
    Mutant("22.6", "a JSON Lines kernel is checked only as plain ASCII", "consumer/recordings.py",
           "    return next((n for n in names if len(n) > MAX_NAME or not _NAME.match(n)), None)",
           "    return None",
           ("tests/test_validation.py::test_a_jsonl_kernel_that_is_no_name_is_refused",)),
    # issue 21: sizes are read as claims, checked, and charged where they belong
    Mutant("21.1", "a map's sizes are never validated", "mapformat/validation.py",
           '"device-preprocessor"), "sizes": SIZES},', '"device-preprocessor")},',
           ("tests/test_sizes.py::test_the_map_field_is_validated_and_bad_sizes_are_one_error_line",)),
    Mutant("21.2", "a record whose kernels outweigh its image is summed anyway", "consumer/sizereport.py",
           "    if overhead < 0:\n        raise MapError(", "    if False:\n        raise MapError(",
           ("tests/test_sizes.py::test_the_map_field_is_validated_and_bad_sizes_are_one_error_line",)),
    Mutant("21.3", "a section's size is trusted", "readers/sizes.py",
           "        if offset + size > end:  # a size is a claim: check it", "        if False:",
           ("tests/test_sizes.py::test_a_section_size_past_the_end_of_the_cubin_is_refused",)),
    Mutant("21.4", "a duplicate's waste counts every copy", "consumer/sizereport.py",
           "return sum(c[2] for c in self.copies) - max(c[2] for c in self.copies)",
           "return sum(c[2] for c in self.copies)",
           ("tests/test_sizes.py::test_a_template_instantiated_in_two_sources_is_a_duplicate",)),
    Mutant("21.5", "a library's images are never matched to the object compiled into them", "consumer/sizereport.py",
           "            candidates = exact.get(signature)", "            candidates = None",
           ("tests/test_sizes.py::test_a_wheel_is_charged_to_the_sources_of_the_map_it_ships",)),
    Mutant("21.6", "an object's image is charged to the first equal object, in every library", "consumer/sizereport.py",
           "owner = min(candidates, key=lambda o: (claims[(signature, o)], not (o.target and o.target in base)))",
           "owner = candidates[0]",
           ("tests/test_sizes.py::test_two_libraries_with_equal_images_are_charged_to_two_objects",)),
    Mutant("21.7", "a kernel split among its definers counts as copies", "consumer/sizereport.py",
           "per[(p.kernel, p.arch, p.image)] += p.bytes", "per[(p.kernel, p.arch, p.origin.object or p.origin.file)] += p.bytes",
           ("tests/test_sizes.py::test_a_kernel_split_among_its_definers_is_one_copy",)),
    Mutant("21.8", "the module's sections are a kernel's that shares their name", "readers/sizes.py",
           "        elif prefix not in MODULE_PREFIXES:\n", "        else:\n",
           ("tests/test_sizes.py::test_sections_of_the_module_are_not_a_kernels_that_shares_their_name",)),
    Mutant("21.9", "a compressed PTX entry's size is taken as claimed", "readers/sizes.py",
           "    if not _decompress.plausible(entry.uncompressed_size, entry.compressed_size):",
           "    if False:",
           ("tests/test_sizes.py::test_a_compressed_ptx_entry_that_claims_too_much_is_refused",)),
    Mutant("21.10", "a map's relocatable images are counted beside the device-link image", "consumer/sizereport.py",
           '            if relocatable and (record.get("ptx") or all((arch, k) in linked for k in record.get("code", ()))):',
           "            if False:",
           ("tests/test_sizes.py::test_a_kernel_split_among_its_definers_is_one_copy",)),
    Mutant("18.9", "rules match the path as spelled", "consumer/selection.py",
           "            spellings = {posixpath.normpath(path)}\n            if canonical is not None:\n"
           "                spellings.add(canonical(path))",
           "            spellings = {path}",
           (f"{ORACLE}[a kernel body]",)),
    # issue 26: recorder
    Mutant("R26.3", "a child started with a clean environment gets none of the recorder's variables",
           "recorder/spawns.py", "            target[key] = value\n", "            pass\n",
           ("tests/test_recorder_processes.py::test_a_child_started_with_a_clean_environment_is_recorded",)),
    Mutant("R26.4", "a child's kernels go only to the scope it was started in (a persistent worker)",
           "recorder/parts.py", "        lived = _begun(*part.window) if part.window is not None else []",
           "        lived = []",
           ("tests/test_recorder_processes.py::test_a_persistent_workers_launch_goes_to_the_test_it_served",)),
    Mutant("R26.4end", "a child's window ends where it began", "recorder/process.py",
           "            self.window = (self.window[0], timeline.end(self.log))",
           "            self.window = (self.window[0], self.window[0] + 1)",
           ("tests/test_recorder_processes.py::test_a_persistent_workers_launch_goes_to_the_test_it_served",)),
    Mutant("R26.5", "a process no recorder saw leaves its tests complete", "recorder/parts.py",
           "            own[t].append(u.why())", "            pass",
           ("tests/test_recorder_processes.py::test_a_native_child_makes_its_tests_record_incomplete_and_names_it",)),
    Mutant("R26.5step", "a process no recorder saw leaves a step complete", "recorder/parts.py",
           " + [u.why() for u in read_unseen(folder)]", "",
           ("tests/test_recorder_processes.py::test_record_sees_a_native_grandchild_and_an_exec",)),
    Mutant("R26.root", "a step whose command is a shell is complete", "recorder/parts.py",
           '    if (parts or died) and not any(me in (s.get("pid"), s.get("ppid"))',
           '    if False and not any(me in (s.get("pid"), s.get("ppid"))',
           ("tests/test_recorder_processes.py::test_a_step_whose_command_is_a_shell_is_incomplete",)),
    Mutant("R26.claim", "any process that carries an expectation's id claims it", "recorder/parts.py",
           'if any(s["exe"] in c.get("exe", ()) and c.get(parent) == s["pid"] for c in claims.get(s["spawn"], ())):',
           'if s["spawn"] in claims:',
           ("tests/test_recorder_processes.py::test_a_child_no_recorder_saw_is_named",)),
    Mutant("R26.ppid", "a grandchild claims the expectation of the child that started it", "recorder/parts.py",
           'c.get(parent) == s["pid"] for c in', "True for c in",
           ("tests/test_recorder_processes.py::test_a_child_no_recorder_saw_is_named[test_python_without_the_hook--S-False]",)),
    Mutant("R26.stale", "a forked or multiprocessing child claims the id it inherited", "recorder/parts.py",
           'if data.get("spawn") and not data.get("forked") and not data.get("multiprocessing"):',
           'if data.get("spawn"):',
           ("tests/test_recorder_processes.py::test_a_child_no_recorder_saw_is_named[test_stale_fork--S -c pass-False]",)),
    Mutant("R26.mp", "a multiprocessing spawn child is not told apart", "recorder/spawns.py",
           '    spawned = "--multiprocessing-fork" in argv or program.lstrip().startswith("from multiprocessing")',
           "    spawned = False",
           ("tests/test_recorder_processes.py::test_a_child_no_recorder_saw_is_named[test_stale_spawn--S -c pass-False]",)),
    Mutant("R26.end", "a process no recorder saw is assumed to end with its test (a native server)",
           "recorder/spawns.py", "    return ids & found\n", "    return set()\n",
           ("tests/test_recorder_processes.py::test_a_native_child_makes_its_tests_record_incomplete_and_names_it",)),
    Mutant("R26.settle", "a process no recorder saw is never seen to end (every later test incomplete)",
           "recorder/process.py", "        ended = open_ - spawns.alive(open_, self._recorded())", "        ended = set()",
           ("tests/test_recorder_processes.py::test_a_native_child_makes_its_tests_record_incomplete_and_names_it",)),
    Mutant("R26.merge", "one test's merged records are complete when a part is not", "consumer/recordings.py",
           "        whys = [p.why_incomplete for p in parts if not p.complete]", "        whys = []",
           ("tests/test_recordings_honesty.py::test_one_tests_records_merge_incomplete_when_one_part_is",)),
    Mutant("R26.dropped", "a `# dropped=N` line no longer makes a text recording incomplete", "consumer/recordings.py",
           "    elif footer[2] or dropped:", "    elif footer[2]:",
           ("tests/test_recordings_honesty.py::test_a_dropped_line_makes_a_text_recording_incomplete",)),
    Mutant("R26.unique", "a footer whose unique count disagrees with the file is trusted", "consumer/recordings.py",
           "    elif footer[1] != len(names):", "    elif False:",
           ("tests/test_recordings_honesty.py::test_a_footer_whose_unique_count_disagrees_is_not_trusted",)),
    Mutant("R26.complete", 'a JSON Lines record without "complete" is complete', "consumer/recordings.py",
           '        complete = record.get("complete")', '        complete = record.get("complete", True)',
           ("tests/test_recordings_honesty.py::test_a_jsonl_record_without_complete_is_refused",)),
    Mutant("R26.teardown", "a test whose teardown errored is complete", "recorder/outcomes.py",
           '        if phases.get("teardown") == "failed":\n', "        if False:\n",
           ("tests/test_plugin_records.py::test_a_test_whose_teardown_errored_is_incomplete",)),
    Mutant("R26.never", "a test that never ran is complete", "recorder/outcomes.py",
           '            return "the test never ran (the session stopped early: -x, --maxfail, or an interrupt)"',
           '            return ""',
           ("tests/test_plugin_records.py::test_a_test_that_never_ran_is_incomplete",)),
    # issue 26: evaluate and recipes
    Mutant("26e.1", "a node id splits at every ::, inside its parameters too", "consumer/junit.py",
           'address, bracket, params = nodeid.partition("[")', 'address, bracket, params = nodeid, "", ""',
           ("tests/test_evaluate.py::test_a_parametrize_id_that_holds_colons_is_one_test",)),
    Mutant("26e.2", "a test in several result files takes the last one's outcome", "consumer/evaluation.py",
           'failed = [r for r in results if r.outcome == "failed"]',
           'failed = [r for r in results[-1:] if r.outcome == "failed"]',
           ("tests/test_evaluate.py::test_a_failure_on_any_runner_is_a_failure",)),
    Mutant("26e.3", "a step's later result file replaces its earlier one", "cli/evaluate.py",
           "steps.setdefault(step, []).extend(junit.read(Path(path)))", "steps[step] = junit.read(Path(path))",
           ("tests/test_evaluate.py::test_a_step_failed_if_any_case_of_any_shard_failed",)),
    Mutant("26e.4", "a step's result file counts only its first test case", "consumer/evaluation.py",
           'failed = [c for c in cases if c.outcome == "failed"]',
           'failed = [c for c in cases[:1] if c.outcome == "failed"]',
           ("tests/test_evaluate.py::test_a_step_failed_if_any_case_of_any_shard_failed",)),
    Mutant("26e.5", "a JUnit <error> is read as passed", "consumer/junit.py",
           'if child.tag in ("failure", "error"):', 'if child.tag in ("failure",):',
           ("tests/test_evaluate.py::test_a_failure_on_any_runner_is_a_failure",)),
    Mutant("26e.6", "Buildkite's select trusts any selection with a skip list", f"{REPO}examples/ci/buildkite/select_steps.py",
           "    problem = _not_a_selection(selection)\n", '    problem = "" if isinstance(selection, dict) and "skip" in selection else "x"\n',
           ("tests/test_ci_recipes.py::test_buildkite_select_trusts_only_what_select_writes",)),
    Mutant("26e.6b", "Buildkite's select trusts a skip list that its decisions do not back",
           f"{REPO}examples/ci/buildkite/select_steps.py",
           'if not isinstance(listed, list) or listed != [d["test"] for d in decisions if d["run"] is run]:',
           "if not isinstance(listed, list):",
           ("tests/test_ci_recipes.py::test_buildkite_select_trusts_only_what_select_writes",)),
    Mutant("26e.7", "every shard of a parallel step records to the same file", f"{REPO}examples/ci/buildkite/select_steps.py",
           "    if _shards(step) == 1:\n", "    if True:\n",
           ("tests/test_ci_recipes.py::test_buildkite_shards_record_to_files_of_their_own_and_select_sees_every_one",)),
    Mutant("26e.7b", "main keeps a sharded step's recordings with a shard's missing", f"{REPO}examples/ci/buildkite/select_steps.py",
           'do test -f "$$f" || rm -f', "do true || rm -f",
           ("tests/test_ci_recipes.py::test_buildkite_shards_record_to_files_of_their_own_and_select_sees_every_one",)),
    Mutant("26e.8", "a shadowed list's failing pytest no longer fails its job", f"{REPO}examples/ci/buildkite/select_steps.py",
           ' + ["exit $${ksm_failed:-0}"]', "",
           ("tests/test_ci_recipes.py::test_buildkite_shadow_keeps_a_list_a_list_and_evaluates_every_shard",)),
    Mutant("26e.9", "evaluate reads a selection of any shape", "consumer/evaluation.py",
           "    check_selection(selection)\n", "",
           ("tests/test_evaluate.py::test_evaluate_on_malformed_input_says_one_error_line",)),
    Mutant("26e.10", "--markdown into a missing folder raises", "cli/evaluate.py",
           "        _write(args.markdown, found.markdown())", "        args.markdown.write_text(found.markdown())",
           ("tests/test_evaluate.py::test_evaluate_on_malformed_input_says_one_error_line",)),
    Mutant("26e.11", "select_steps.py's steps are not checked", f"{REPO}examples/ci/buildkite/select_steps.py",
           "            try:\n                _commands(step)\n                _shards(step)\n",
           "            try:\n                pass\n",
           ("tests/test_ci_recipes.py::test_select_steps_on_malformed_input_never_tracebacks",)),
    # ... a fresh pass over evaluate and the recipes, lines not mutated before
    Mutant("26e.F1", "a <skipped> after a <failure> makes the case skipped", "consumer/junit.py",
           '                break\n            if child.tag == "skipped":',
           '                continue\n            if child.tag == "skipped":',
           ("tests/test_evaluate.py::test_a_case_with_a_failure_is_failed_whatever_follows_it",)),
    Mutant("26e.F2", "any XML is read as JUnit (no test cases: nothing failed)", "consumer/junit.py",
           '    if root.tag not in ("testsuites", "testsuite"):\n', "    if False:\n",
           ("tests/test_evaluate.py::test_evaluate_on_malformed_input_says_one_error_line",)),
    Mutant("26e.F3", "tests no recording knows are not counted as run", "consumer/evaluation.py",
           "            if key not in known:\n", "            if False:\n",
           ("tests/test_evaluate.py::test_a_failure_on_any_runner_is_a_failure",)),
    Mutant("26e.F4", "--junit beside --junit-step is ignored", "cli/evaluate.py",
           "    if bool(args.junit) == bool(args.junit_step):\n", "    if not args.junit and not args.junit_step:\n",
           ("tests/test_evaluate.py::test_evaluate_on_malformed_input_says_one_error_line",)),
    Mutant("26e.F5", "a shadowed command that runs pytest twice keeps the last run's results", f"{REPO}examples/ci/buildkite/select_steps.py",
           "    if any(n > 1 for n in runs):\n", "    if False:\n",
           ("tests/test_ci_recipes.py::test_select_steps_on_malformed_input_never_tracebacks",)),
    Mutant("26e.F6", "--junit-step STEP= (no file) reads the current folder", "cli/evaluate.py",
           "if not eq or not step or not path:", "if not eq or not step:",
           ("tests/test_evaluate.py::test_evaluate_on_malformed_input_says_one_error_line",)),
    Mutant("26e.F7", "a step key that is a path names a recording", f"{REPO}examples/ci/buildkite/select_steps.py",
           "            if not isinstance(key, str) or not KEY.fullmatch(key):\n", "            if not isinstance(key, str):\n",
           ("tests/test_ci_recipes.py::test_select_steps_on_malformed_input_never_tracebacks",)),
    # issue 26: size and wheels
    Mutant("26s.1", "a sizes list shorter than its symbols is accepted (zip truncates)", "mapformat/sizes.py",
           "if len(column) != len(symbols):", "if len(column) > len(symbols):",
           ("tests/test_size_bounds.py::test_a_sizes_list_shorter_than_its_symbols_is_refused",)),
    Mutant("26s.2", "a wheel's versioned libraries (lib.so.1) are not measured", "cli/size.py",
           'return base.endswith(".so") or ".so." in base', 'return base.endswith(".so")',
           ("tests/test_size_bounds.py::test_a_wheels_versioned_library_is_measured",)),
    Mutant("26s.3", "a split kernel's remainder is lost", "consumer/sizereport.py",
           "extra = (p.bytes % n, p.stored % n) if i == 0 else (0, 0)", "extra = (0, 0)",
           ("tests/test_size_bounds.py::test_a_split_kernels_remainder_is_charged",)),
    Mutant("26s.4", "kernels not in the map are counted as duplicates", "consumer/sizereport.py",
           "        if p.kernel and p.origin.source != NOT_IN_MAP:\n            per[", "        if p.kernel:\n            per[",
           ("tests/test_size_bounds.py::test_kernels_not_in_the_map_are_no_duplicates",)),
    Mutant("26s.5", "a kernel without .text is measured as 0 bytes", "readers/sizes.py",
           '    if missing:\n        raise FormatError(elf.blob.name, f"kernel {min(missing)} has no .text',
           '    if False:\n        raise FormatError(elf.blob.name, f"kernel {min(missing)} has no .text',
           ("tests/test_size_bounds.py::test_a_kernel_without_its_text_section_is_refused",)),
    Mutant("26s.6", "two images of one architecture sum image bytes but not stored bytes", "readers/sizes.py",
           '        into["stored"] += record["stored"]\n', "",
           ("tests/test_size_bounds.py::test_two_images_of_one_architecture_sum_their_stored_bytes",)),
    Mutant("26s.7", "the treemap takes a nameless kernel for overhead (a KeyError)", "consumer/treemap.py",
           "leaf = SHARED[p.kind] if p.kind in SHARED else short_name(demangle_fast(p.kernel)) or UNNAMED",
           "leaf = short_name(demangle_fast(p.kernel)) if p.kernel else SHARED[p.kind]",
           ("tests/test_size_bounds.py::test_the_treemap_draws_a_kernel_with_no_name",)),
    Mutant("26s.8", "a map with an empty kernel name is valid", "mapformat/validation.py",
           '"device": BOOLEAN, "symbols": NAMES,', '"device": BOOLEAN, "symbols": STRINGS,',
           ("tests/test_size_bounds.py::test_an_empty_kernel_name_is_refused_by_the_map",)),
    Mutant("26s.9", "a wheel's members are inflated whatever their headers claim", "consumer/kernelmap.py",
           "        if info.file_size > member_bound(info):", "        if False:",
           ("tests/test_size_bounds.py::test_a_zip_bomb_library_is_refused_by_its_header_before_anything_inflates",
            "tests/test_size_bounds.py::test_a_zip_bomb_map_in_a_wheel_is_refused_by_its_header")),
    Mutant("26s.10", "a wheel's members are not counted", "consumer/kernelmap.py",
           "    if len(infos) > WHEEL_MAX_MEMBERS:", "    if False:",
           ("tests/test_size_bounds.py::test_a_wheel_of_too_many_members_is_refused",)),
    Mutant("26s.11", "a wheel's libraries are not bounded together", "consumer/kernelmap.py",
           "    if total > WHEEL_MAX_TOTAL:", "    if False:",
           ("tests/test_size_bounds.py::test_a_wheels_libraries_are_bounded_together",)),
    Mutant("26s.12", "a gzip map is inflated in one call (its blocks joined: twice the bound)", "mapformat/__init__.py",
           "text += inflate.decompress(data, INFLATE_OUT)", "text += inflate.decompress(data, limit + 1)",
           ("tests/test_size_bounds.py::test_a_gzip_bomb_map_holds_no_more_than_its_bound_while_refused",)),
    # issue 26, size and wheels: a fresh pass over lines not mutated before
    Mutant("26s.F1", "a NOBITS section is charged its size", "readers/sizes.py",
           "        if kind == SHT_NOBITS:\n            continue", "        if False:\n            continue",
           ("tests/test_size_bounds.py::test_a_no_bits_section_costs_no_byte",)),
    Mutant("26s.F2", "kernels outweighing their image are kept (a negative overhead)", "readers/sizes.py",
           "    if image.overhead < 0:", "    if False:",
           ("tests/test_size_bounds.py::test_kernels_that_outweigh_their_cubin_are_refused",)),
    Mutant("26s.F3", "a link image none of whose kernels the map defines keeps its overhead", "consumer/sizereport.py",
           "    known = any(p.kernel in definers for p in found)", "    known = True",
           ("tests/test_size_bounds.py::test_a_link_image_whose_kernels_the_map_lacks_is_not_in_the_map",)),
    Mutant("26s.F4", "a library's link image is charged to no target", "consumer/sizereport.py",
           'linked = Origin(DEVICE_LINK, targets.pop() if len(targets) == 1 else "", "", file)',
           'linked = Origin(DEVICE_LINK, "", "", file)',
           ("tests/test_size_bounds.py::test_a_link_image_whose_kernels_the_map_lacks_is_not_in_the_map",)),
    Mutant("26s.F5", "the stored bytes' rounding remainder is lost", "consumer/sizereport.py",
           'out.append(Piece(origin, arch, "overhead", "", overhead, stored - sum(p.stored for p in out), unit))',
           'out.append(Piece(origin, arch, "overhead", "", overhead, stored * overhead // size if size else 0, unit))',
           ("tests/test_size_bounds.py::test_an_images_stored_bytes_are_shared_out_whole",)),
    Mutant("26s.F6", "a wheel with two maps is read as the first", "consumer/kernelmap.py",
           "            if len(members) > 1:\n", "            if False:\n",
           ("tests/test_size_bounds.py::test_a_wheel_with_two_maps_is_refused",)),
    Mutant("26s.F7", "a wheel's unreadable library is named by its temporary copy", "cli/size.py",
           "into.failed.append(str(e).replace(str(path), name, 1))", "into.failed.append(str(e))",
           ("tests/test_size_bounds.py::test_a_wheels_unreadable_library_is_named_by_its_member",)),
    # issue 26: selection, device deps and build model
    Mutant("26.1", "maps of two different commits are accepted together", "consumer/selection.py",
           '    if "" in commits or len(commits) > 1:', '    if "" in commits:',
           (SELECTION_EVIDENCE,)),
    Mutant("26.2", "an --external-kernels pattern matches a prefix of the name", "consumer/selection.py",
           "if not any(p.fullmatch(k) for p in external)", "if not any(p.match(k) for p in external)",
           (SELECTION_EVIDENCE,)),
    Mutant("26.3", "an unreadable recording's test is cleared by its other, complete recording",
           "consumer/selection.py", "        elif test in unreadable_tests:",
           "        elif test in unreadable_tests and rec is None:",
           (SELECTION_EVIDENCE,)),
    Mutant("26.4", "--strict exits 0 when a recording was unreadable but named its tests", "cli/select.py",
           "evidence_failed = selection.fallback in EVIDENCE_FALLBACKS or bool(unreadable)",
           "evidence_failed = selection.fallback in EVIDENCE_FALLBACKS",
           (SELECTION_EVIDENCE,)),
    Mutant("26.5", "only the first architecture of a comma list is preprocessed", "buildtree/devicedeps.py",
           "            kept.append(a)\n",
           '            kept.append(a.split(",")[0] if a.startswith(ARCH_FLAGS) else a)\n',
           DEVICE_DEPS),
    Mutant("26.6", "the device-deps cache ignores its key", "buildtree/devicedeps.py",
           'isinstance(entry, dict) and entry.get("key") == key and', "isinstance(entry, dict) and",
           DEVICE_DEPS),
    Mutant("26.7", "a FetchContent folder git tracks in the source root is spelled $DEP", "buildtree/thirdparty.py",
           "if folder is not None and not _tracked(source_root, folder):", "if folder is not None:",
           (BUILD_INPUTS,)),
    Mutant("26.8", "Ninja's implicit configure inputs are dropped", "buildtree/generatorfiles.py",
           "names = statement.inputs + statement.implicit", "names = statement.inputs",
           (BUILD_INPUTS,)),
    # issue 26's fresh pass: decision points of selection.py and devicedeps.py not mutated before
    Mutant("26.f1", "subset maps that list no targets at all count as covering", "consumer/selection.py",
           "        if not needed or not needed <= covered:", "        if not needed <= covered:",
           (SELECTION_EVIDENCE,)),
    Mutant("26.f2", "a file one map reads at configure is clearable when another map compiles it",
           "consumer/selection.py", 'for s in ("configure", "unknown", "host") if s in statuses',
           'for s in ("unknown", "host") if s in statuses',
           (SELECTION_EVIDENCE,)),
    Mutant("26.f3", "static rules choose for an empty change set", "consumer/selection.py",
           "chosen = rules.tests_for(changed, canonical) if rules and changed else None",
           "chosen = rules.tests_for(changed, canonical) if rules else None",
           (SELECTION_EVIDENCE,)),
    Mutant("26.f4", "a changed file no rule matches is passed over", "consumer/selection.py",
           "                if not hits:\n                    return None",
           "                if not hits:\n                    continue",
           (SELECTION_EVIDENCE,)),
    Mutant("26.f5", "a failed device preprocessing is cached as no includes", "buildtree/devicedeps.py",
           "            if error is None and key is not None:", "            if key is not None:",
           DEVICE_DEPS),
    Mutant("26.f6", "a failed device preprocessing's output is trusted", "buildtree/devicedeps.py",
           "    if proc.returncode != 0:", "    if False:",
           DEVICE_DEPS),
    Mutant("26.f7", "hipcc is not taken for clang", "buildtree/devicedeps.py",
           'if "clang" not in name and "hipcc" not in name:', 'if "clang" not in name:',
           DEVICE_DEPS),
    # issue 26: generators
    Mutant("26.G1", "a generated source's deps leave out what its build rule read", "buildtree/model.py",
           "    built_by = _with_rule_inputs(built_by, rules, stamps)\n", "",
           (f"{ORACLE}[the input of a build-time generator]",
            "tests/test_generators.py::test_a_build_time_generators_input_reaches_its_kernels")),
    Mutant("26.G2", "what the configure wrote is reached only through its own deps", "consumer/kernelmap.py",
           "if hits and self._configure_generated:", "if False:",
           (f"{ORACLE}[the input of a configure-time generator]",
            "tests/test_generators.py::test_what_the_configure_wrote_is_reached_by_every_change_the_map_knows")),
    Mutant("26.G3", "the map never says which objects the configure wrote", "producer/extract.py",
           '        entry["configure_generated"] = True', "        pass",
           ("tests/test_generators.py::test_what_the_configure_wrote_is_reached_by_every_change_the_map_knows",)),
    Mutant("26.G4", "a build rule's input newer than the object is trusted", "buildtree/model.py",
           "if stamps[d] is None), None) or out_of_date(o.object, inputs, stamps)", "if stamps[d] is None), None)",
           ("tests/test_generators.py::test_a_generator_input_newer_than_the_object_fails_closed",)),
    Mutant("26.G5", "a generated generator's own inputs are not followed", "buildtree/buildrules.py",
           "                if i in self.made_from:\n", "                if False:\n",
           ("tests/test_generators.py::test_rules_walk_back_through_generated_generators",)),
    Mutant("26.G6", "a file in a build folder is never one the configure wrote", "producer/generated.py",
           "            return name not in self.configure_inputs and name + \".in\" not in self.configure_inputs",
           "            return False",
           ("tests/test_generators.py::test_which_files_the_configure_wrote",)),
    Mutant("26.G7", "a link into the build tree is judged by its own path only", "producer/generated.py",
           "== path or self._suspect(real))", "== path or True)",
           ("tests/test_generators.py::test_which_files_the_configure_wrote",)),
    Mutant("26.G8", "a file no map knows is cleared through what the configure wrote", "consumer/kernelmap.py",
           "            if hits and self._configure_generated:", "            if self._configure_generated:",
           ("tests/test_generators.py::test_a_file_no_map_knows_still_runs_everything",)),
]


def _path(file: str) -> Path:
    if file.startswith(CMAKE):
        from kernel_symbol_map.cmakedir import cmake_dir

        return cmake_dir() / file[len(CMAKE):]
    if file.startswith(REPO):
        return ROOT / file[len(REPO):]
    return PACKAGE / file


def run(mutant: Mutant) -> bool:
    """True when the mutant is killed: its tests fail."""
    path = _path(mutant.file)
    text = path.read_text()
    if text.count(mutant.old) != 1:
        raise SystemExit(f"{mutant.name}: {mutant.file} holds {text.count(mutant.old)} copies of the line to break")
    path.write_text(text.replace(mutant.old, mutant.new))
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               "-W", "ignore::DeprecationWarning", *mutant.tests],
                              cwd=ROOT, capture_output=True, text=True, check=False)
    finally:
        path.write_text(text)
    failed = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    killed = proc.returncode not in (0, 5) and bool(failed)
    print(f"{mutant.name:6} {'KILLED  ' if killed else 'SURVIVED'} {mutant.what}: "
          f"{failed[0].split(' - ')[0] if failed else proc.stdout.strip().splitlines()[-1:]}", flush=True)
    return killed


def main(names: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run still puts the file back (finally)
    chosen = [m for m in MUTANTS if not names or m.name in names]
    unknown = set(names) - {m.name for m in MUTANTS}
    if unknown:
        raise SystemExit(f"unknown mutants: {', '.join(sorted(unknown))}")
    survived = [m.name for m in chosen if not run(m)]
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
