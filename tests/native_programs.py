"""Real native programs for the recorder's tests, built with the machine's C compiler once per session.

- ``libcuda.so.1``: a stand-in GPU driver library (named and SONAMEd like CUDA's), so that loading it is
  what the audit library must notice;
- ``load_driver [LIB]``: a dynamic executable that ``dlopen``s LIB (default: ``$FAKE_CUDA_DRIVER``) and exits;
- ``static_true``: a statically linked executable (no ``PT_INTERP``);
- ``clean_exec PROGRAM ARGS...``: forks a child that execs PROGRAM with an empty environment (no
  ``LD_AUDIT``), waits for it and exits 0;
- ``killed``: a dynamic executable that kills itself with SIGKILL mid-run;
- ``_exit_true``: exits through ``_exit`` (no atexit, no loader finalisation), as shells do.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SOURCES = {
    "libcuda.c": "int cuInit(unsigned int flags) { (void)flags; return 0; }\n",
    "load_driver.c": """
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : getenv("FAKE_CUDA_DRIVER");
    if (lib == NULL || dlopen(lib, RTLD_NOW) == NULL) { fprintf(stderr, "%s\\n", dlerror()); return 1; }
    return 0;
}
""",
    "static_true.c": "int main(void) { return 0; }\n",
    "clean_exec.c": """
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char *empty[] = {NULL};
    pid_t pid = fork();
    if (pid == 0) { execve(argv[1], argv + 1, empty); perror("execve"); _exit(127); }
    int status = 0;
    waitpid(pid, &status, 0);
    return 0;
}
""",
    "killed.c": "#include <signal.h>\nint main(void) { raise(SIGKILL); return 0; }\n",
    "_exit_true.c": "#include <unistd.h>\nint main(void) { _exit(0); }\n",
}


@dataclass(frozen=True)
class Programs:
    driver: Path
    load_driver: Path
    static_true: Path
    clean_exec: Path
    killed: Path
    exit_true: Path


def build_driver(where: Path) -> Path:
    """Only the stand-in driver library, in ``where``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler: the recorder's native tests need one (Debian's gcc)"
    (where / "libcuda.c").write_text(SOURCES["libcuda.c"])
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "libcuda.c"],
                   cwd=where, check=True, capture_output=True)
    return where / "libcuda.so.1"


def build(where: Path) -> Programs:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler: the recorder's native tests need one (Debian's gcc)"
    for name, text in SOURCES.items():
        (where / name).write_text(text)
    commands = [
        [cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "libcuda.c"],
        [cc, "-o", "load_driver", "load_driver.c", "-ldl"],
        [cc, "-static", "-o", "static_true", "static_true.c"],
        [cc, "-o", "clean_exec", "clean_exec.c"],
        [cc, "-o", "killed", "killed.c"],
        [cc, "-o", "_exit_true", "_exit_true.c"],
    ]
    for command in commands:
        subprocess.run(command, cwd=where, check=True, capture_output=True)
    return Programs(where / "libcuda.so.1", where / "load_driver", where / "static_true", where / "clean_exec",
                    where / "killed", where / "_exit_true")
