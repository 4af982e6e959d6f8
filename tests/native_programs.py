"""Real native programs for the recorder's tests, built with the machine's C compiler once per session.

- ``libcuda.so.1``: a stand-in GPU driver library (named and SONAMEd like CUDA's), so that loading it is
  what the audit library must notice;
- ``load_driver [LIB [KERNEL...]]``: a dynamic executable that ``dlopen``s LIB (default:
  ``$FAKE_CUDA_DRIVER``), calls its ``cuInit`` (which loads a CUPTI injection, as CUDA's does) and "launches"
  each KERNEL;
- ``libcupti.so``: a stand-in libcupti, built against CUPTI's own header (absent without one), whose
  ``fake_cupti_kernel`` delivers a kernel record as CUPTI would;
- ``static_true``: a statically linked executable (no ``PT_INTERP``);
- ``static_dlopen [LIBRARY]``: a statically linked one that loads the driver all the same (glibc's static
  ``dlopen``), ``libcuda.so.1`` or LIBRARY;
- ``clean_exec PROGRAM ARGS...``: forks a child that execs PROGRAM with an empty environment (no
  ``LD_AUDIT``), waits for it and exits 0;
- ``killed``: a dynamic executable that kills itself with SIGKILL mid-run;
- ``_exit_true``: exits through ``_exit`` (no atexit, no loader finalisation), as shells do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SOURCES = {
    # As CUDA's driver does: cuInit loads the CUPTI injection CUDA_INJECTION64_PATH names and initialises it.
    # fakeLaunch stands for a kernel launch: CUPTI, where a client loaded it, gets a kernel record.
    "libcuda.c": """
#include <dlfcn.h>
#include <stdlib.h>
int cuInit(unsigned int flags) {
    (void)flags;
    const char *injection = getenv("CUDA_INJECTION64_PATH");
    if (injection != NULL && injection[0] != '\\0') {
        void *handle = dlopen(injection, RTLD_NOW);
        int (*initialize)(void) = handle != NULL ? (int (*)(void))dlsym(handle, "InitializeInjection") : NULL;
        if (initialize != NULL)
            initialize();
    }
    return 0;
}
int fakeLaunch(const char *name) {
    const char *cupti = getenv("KERNEL_SYMBOL_MAP_CUPTI");
    void *handle = cupti != NULL ? dlopen(cupti, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void (*kernel)(const char *) = handle != NULL ? (void (*)(const char *))dlsym(handle, "fake_cupti_kernel") : NULL;
    if (kernel != NULL)
        kernel(name);
    return 0;
}
""",
    # A stand-in libcupti: the Activity API the injection calls, records laid out by CUPTI's own header.
    "libcupti.c": """
#include <cupti_activity.h>
#include <stdlib.h>
#include <string.h>
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static uint8_t *buffer;
static size_t size, used;
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
    requested = r, completed = c;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) { (void)kind; return CUPTI_SUCCESS; }
void fake_cupti_kernel(const char *name) {
    if (requested == NULL)
        return;
    if (buffer == NULL) {
        size_t most = 0;
        requested(&buffer, &size, &most);
        used = 0;
    }
    CUpti_ActivityKernel10 record;
    memset(&record, 0, sizeof record);
    record.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    record.name = strdup(name);
    if (used + sizeof record <= size) {
        memcpy(buffer + used, &record, sizeof record);
        used += sizeof record;
    }
}
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    if (buffer != NULL && completed != NULL)
        completed(NULL, 0, buffer, size, used);
    buffer = NULL;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *b, size_t valid, CUpti_Activity **record) {
    size_t at = *record == NULL ? 0 : (size_t)((uint8_t *)*record - b) + sizeof(CUpti_ActivityKernel10);
    if (at + sizeof(CUpti_ActivityKernel10) > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(b + at);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *dropped) {
    (void)c, (void)s;
    const char *set = getenv("FAKE_CUPTI_DROPPED");
    *dropped = set != NULL ? (size_t)atoi(set) : 0;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult result, const char **text) {
    (void)result;
    *text = "a stand-in error";
    return CUPTI_SUCCESS;
}
""",
    "load_driver.c": """
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : getenv("FAKE_CUDA_DRIVER");
    void *driver = lib != NULL ? dlopen(lib, RTLD_NOW) : NULL;
    if (driver == NULL) { fprintf(stderr, "%s\\n", dlerror()); return 1; }
    int (*init)(unsigned int) = (int (*)(unsigned int))dlsym(driver, "cuInit");
    int (*launch)(const char *) = (int (*)(const char *))dlsym(driver, "fakeLaunch");
    if (init != NULL)
        init(0);
    for (int i = 2; i < argc && launch != NULL; i++)
        launch(argv[i]);
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
    "static_dlopen.c": """
#include <dlfcn.h>
#include <stddef.h>
int main(int argc, char **argv) { return dlopen(argc > 1 ? argv[1] : "libcuda.so.1", RTLD_NOW) != NULL ? 0 : 1; }
""",
}


@dataclass(frozen=True)
class Programs:
    cupti: Path | None
    driver: Path
    load_driver: Path
    static_true: Path
    clean_exec: Path
    killed: Path
    exit_true: Path
    static_dlopen: Path


def _cuda_include() -> Path | None:
    """CUDA's headers with CUPTI's (a toolkit), where the package's CMake looks for them too."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cupti_activity.h").is_file() and (Path(root) / "include" / "cuda.h").is_file():
            return Path(root) / "include"
    return None


def build_driver(where: Path) -> Path:
    """Only the stand-in driver library, in ``where``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler: the recorder's native tests need one (Debian's gcc)"
    (where / "libcuda.c").write_text(SOURCES["libcuda.c"])
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "libcuda.c", "-ldl"],
                   cwd=where, check=True, capture_output=True)
    return where / "libcuda.so.1"


def build(where: Path) -> Programs:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler: the recorder's native tests need one (Debian's gcc)"
    for name, text in SOURCES.items():
        (where / name).write_text(text)
    commands = [
        [cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "libcuda.c", "-ldl"],
        [cc, "-o", "load_driver", "load_driver.c", "-ldl"],
        [cc, "-static", "-o", "static_true", "static_true.c"],
        [cc, "-o", "clean_exec", "clean_exec.c"],
        [cc, "-o", "killed", "killed.c"],
        [cc, "-o", "_exit_true", "_exit_true.c"],
        [cc, "-static", "-o", "static_dlopen", "static_dlopen.c", "-ldl"],
    ]
    for command in commands:
        subprocess.run(command, cwd=where, check=True, capture_output=True)
    cupti = None
    include = _cuda_include()
    if include is not None:
        subprocess.run([cc, "-shared", "-fPIC", f"-I{include}", "-o", "libcupti.so", "libcupti.c"], cwd=where,
                       check=True, capture_output=True)
        cupti = where / "libcupti.so"
    return Programs(cupti, where / "libcuda.so.1", where / "load_driver", where / "static_true", where / "clean_exec",
                    where / "killed", where / "_exit_true", where / "static_dlopen")
