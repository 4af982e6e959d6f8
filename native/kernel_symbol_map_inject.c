/*
 * The recorder's CUPTI injection library: the kernels a native CUDA process
 * launches, for a process that no Python recorder is in (a C++ test binary,
 * a server a test starts).
 *
 * The recorder puts this library in CUDA_INJECTION64_PATH for the processes
 * a recorded one starts (python/kernel_symbol_map/recorder/native.py). The
 * CUDA driver loads it when the process initialises CUDA and calls
 * InitializeInjection(), as it does for any CUPTI injection. From then on it
 * records the names of the kernels launched (CUPTI's Activity API,
 * CONCURRENT_KERNEL records) and, at exit, writes the same part file a
 * recorded Python process writes (see recorder/process.py and
 * recorder/parts.py): <token>.started at the start, <token>.json at the end.
 * A process killed before its end has a .started and no part: the merge
 * says so. It never claims the spawn's expectation: the processes it starts
 * are followed by the audit library, which this process's own record speaks
 * for only as far as the driver goes.
 *
 * libcupti is opened at run time (KERNEL_SYMBOL_MAP_CUPTI names it, else the
 * loader's search for libcupti.so.13, .12, libcupti.so), so the library
 * needs CUPTI's headers to build and nothing of CUDA to load. Written by
 * hand because no package ships an injection that writes this format.
 */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FOLDER_VARIABLE "KERNEL_SYMBOL_MAP_RECORD"
#define SCOPE_VARIABLE "KERNEL_SYMBOL_MAP_RECORD_SCOPE"
#define TESTS_VARIABLE "KERNEL_SYMBOL_MAP_RECORD_TESTS"
#define CUPTI_VARIABLE "KERNEL_SYMBOL_MAP_CUPTI"
#define BUFFER_BYTES (8u << 20)
#define ALIGN 8

typedef CUptiResult (*register_callbacks_t)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*enable_t)(CUpti_ActivityKind);
typedef CUptiResult (*flush_t)(uint32_t);
typedef CUptiResult (*next_t)(uint8_t *, size_t, CUpti_Activity **);
typedef CUptiResult (*dropped_t)(CUcontext, uint32_t, size_t *);
typedef CUptiResult (*result_string_t)(CUptiResult, const char **);

static struct {
    register_callbacks_t register_callbacks;
    enable_t enable;
    flush_t flush_all;
    next_t next_record;
    dropped_t dropped;
    result_string_t result_string;
} cupti;

static char folder[PATH_MAX], token[64], scope[4096], tests_log[PATH_MAX], problem[512];
static pid_t owner;
static long window_start = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char **names; /* the kernel names seen, each once */
static size_t count, capacity;

/* -- the kernels seen ---------------------------------------------------- */

static void add_name(const char *name) {
    if (name == NULL)
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count; i++) {
        if (strcmp(names[i], name) == 0) {
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    if (count == capacity) {
        size_t grown = capacity ? capacity * 2 : 64;
        char **more = realloc(names, grown * sizeof *more);
        if (more == NULL) {
            snprintf(problem, sizeof problem, "out of memory for kernel names");
            pthread_mutex_unlock(&lock);
            return;
        }
        names = more, capacity = grown;
    }
    names[count] = strdup(name);
    if (names[count] == NULL)
        snprintf(problem, sizeof problem, "out of memory for kernel names");
    else
        count++;
    pthread_mutex_unlock(&lock);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(ALIGN, BUFFER_BYTES);
    *size = *buffer != NULL ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)context, (void)stream, (void)size;
    CUpti_Activity *record = NULL;
    while (cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            add_name(((CUpti_ActivityKernel10 *)record)->name); /* name sits where every version keeps it */
    }
    free(buffer);
}

/* -- files ------------------------------------------------------------------ */

static int write_file(const char *path, const char *text) {
    char temporary[PATH_MAX + 16];
    snprintf(temporary, sizeof temporary, "%s.tmp", path);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok;
    return ok && rename(temporary, path) == 0 ? 0 : -1;
}

/* A JSON string of text (names and paths: quotes, backslashes and control characters escaped). */
static void json_string(FILE *out, const char *text) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* The tests log's lines: where a process starting now begins (the earliest test begun and not ended, else
 * the next line) and where one finishing now ends (every line, a partial one included); see timeline.py. */
static long log_position(int finishing) {
    FILE *f = fopen(tests_log, "r");
    if (f == NULL)
        return finishing ? 0 : -1;
    char *line = NULL;
    size_t size = 0;
    ssize_t n;
    long index = 0, earliest = -1, partial = 0;
    struct running {
        char *id;
        long at;
    } *open_tests = NULL;
    size_t open_count = 0;
    while ((n = getline(&line, &size, f)) > 0) {
        int whole = line[n - 1] == '\n';
        if (!whole) {
            partial = 1;
            break;
        }
        line[n - 1] = '\0';
        if (line[0] == '+') {
            int known = 0;
            for (size_t i = 0; i < open_count; i++)
                known |= strcmp(open_tests[i].id, line + 1) == 0;
            struct running *more = known ? open_tests : realloc(open_tests, (open_count + 1) * sizeof *more);
            if (more != NULL && !known) {
                open_tests = more;
                open_tests[open_count].id = strdup(line + 1);
                open_tests[open_count++].at = index;
            }
        } else {
            for (size_t i = 0; i < open_count; i++) {
                if (open_tests[i].id != NULL && strcmp(open_tests[i].id, line + 1) == 0) {
                    free(open_tests[i].id);
                    open_tests[i] = open_tests[--open_count];
                    break;
                }
            }
        }
        index++;
    }
    for (size_t i = 0; i < open_count; i++) {
        if (earliest < 0 || open_tests[i].at < earliest)
            earliest = open_tests[i].at;
        free(open_tests[i].id);
    }
    free(open_tests);
    free(line);
    fclose(f);
    if (finishing)
        return index + partial;
    return earliest >= 0 ? earliest : index;
}

static void finish(void) {
    if (getpid() != owner)
        return; /* a forked child inherits this handler; its parent writes the part */
    size_t dropped = 0;
    if (problem[0] == '\0' && cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS)
        snprintf(problem, sizeof problem, "CUPTI flush failed");
    if (problem[0] == '\0' && cupti.dropped(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped > 0)
        snprintf(problem, sizeof problem, "CUPTI dropped %zu activity records", dropped);
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (out == NULL)
        return;
    fprintf(out, "{\"pid\":%d,\"token\":\"%s\",\"scope\":", (int)owner, token);
    json_string(out, scope);
    fprintf(out, ",\"complete\":%s,\"reason\":", problem[0] ? "false" : "true");
    json_string(out, problem);
    fputs(",\"own_launches\":true", out); /* every reason here is CUPTI's, about this process's launches */
    fprintf(out, ",\"kernels\":{");
    pthread_mutex_lock(&lock);
    if (count > 0) {
        json_string(out, scope);
        fputs(":[", out);
        for (size_t i = 0; i < count; i++) {
            if (i)
                fputc(',', out);
            json_string(out, names[i]);
        }
        fputc(']', out);
    }
    pthread_mutex_unlock(&lock);
    fputs("},\"libraries\":{}", out); /* the audit library's records name what it loaded */
    if (window_start >= 0) {
        fputs(",\"window\":{\"log\":", out);
        json_string(out, tests_log);
        fprintf(out, ",\"start\":%ld,\"end\":%ld}", window_start, log_position(1));
    }
    fputs("}", out);
    fclose(out);
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s.json", folder, token);
    write_file(path, text);
    free(text);
}

static void *open_cupti(void) {
    const char *chosen = getenv(CUPTI_VARIABLE);
    const char *candidates[] = {chosen, "libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (candidates[i] != NULL && candidates[i][0] != '\0') {
            void *handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
            if (handle != NULL)
                return handle;
        }
    }
    return NULL;
}

static void started(void) {
    char exe[PATH_MAX], stat_line[1024], start[32] = "", path[PATH_MAX + 80], *text = NULL;
    size_t length = 0;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = read(fd, stat_line, sizeof stat_line - 1);
        close(fd);
        stat_line[got > 0 ? got : 0] = '\0';
        char *p = strrchr(stat_line, ')');
        for (int field = 2; p != NULL && field < 22; field++)
            p = strchr(p + 1, ' ');
        if (p != NULL)
            snprintf(start, sizeof start, "%.*s", (int)strcspn(p + 1, " "), p + 1);
    }
    FILE *out = open_memstream(&text, &length);
    if (out == NULL)
        return;
    fprintf(out, "{\"pid\":%d,\"ppid\":%d,\"start\":\"%s\",\"scope\":", (int)owner, (int)getppid(), start);
    json_string(out, scope);
    fputs(",\"argv\":[],\"spawn\":\"\",\"exe\":[", out); /* no claim: see above */
    json_string(out, exe);
    fputs("],\"forked\":false,\"multiprocessing\":false,\"subreaper\":false,\"injected\":true}", out);
    fclose(out);
    snprintf(path, sizeof path, "%s/%s.started", folder, token);
    write_file(path, text);
    free(text);
}

/* Called by the CUDA driver when the process initialises CUDA (CUDA_INJECTION64_PATH). */
int InitializeInjection(void) {
    const char *where = getenv(FOLDER_VARIABLE);
    if (where == NULL || where[0] != '/' || strlen(where) >= sizeof folder - 80)
        return 1; /* not recording */
    /* libcupti already here: another CUPTI client (a recorded interpreter's cupti-python, a profiler) has the
     * process, and CUPTI takes one. This one steps aside; the audit library still says the driver was loaded. */
    const char *mine = getenv(CUPTI_VARIABLE);
    const char *loaded[] = {mine, "libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    for (size_t i = 0; i < sizeof loaded / sizeof loaded[0]; i++) {
        if (loaded[i] != NULL && loaded[i][0] != '\0' && dlopen(loaded[i], RTLD_NOW | RTLD_NOLOAD) != NULL)
            return 1;
    }
    snprintf(folder, sizeof folder, "%s", where);
    const char *given = getenv(SCOPE_VARIABLE);
    snprintf(scope, sizeof scope, "%s", given != NULL ? given : "");
    const char *log = getenv(TESTS_VARIABLE);
    snprintf(tests_log, sizeof tests_log, "%s", log != NULL ? log : "");
    owner = getpid();
    unsigned random_part = (unsigned)(((uintptr_t)&owner >> 4) ^ (unsigned)time(NULL) ^ ((unsigned)owner << 16));
    snprintf(token, sizeof token, "%d-n%08x", (int)owner, random_part);
    if (tests_log[0] != '\0')
        window_start = log_position(0);
    started();
    void *handle = open_cupti();
    if (handle == NULL) {
        snprintf(problem, sizeof problem, "CUPTI could not start: libcupti not found (%s)", dlerror());
    } else {
        cupti.register_callbacks = (register_callbacks_t)dlsym(handle, "cuptiActivityRegisterCallbacks");
        cupti.enable = (enable_t)dlsym(handle, "cuptiActivityEnable");
        cupti.flush_all = (flush_t)dlsym(handle, "cuptiActivityFlushAll");
        cupti.next_record = (next_t)dlsym(handle, "cuptiActivityGetNextRecord");
        cupti.dropped = (dropped_t)dlsym(handle, "cuptiActivityGetNumDroppedRecords");
        cupti.result_string = (result_string_t)dlsym(handle, "cuptiGetResultString");
        if (!cupti.register_callbacks || !cupti.enable || !cupti.flush_all || !cupti.next_record || !cupti.dropped)
            snprintf(problem, sizeof problem, "CUPTI could not start: libcupti lacks the Activity API");
    }
    if (problem[0] == '\0') {
        CUptiResult result = cupti.register_callbacks(buffer_requested, buffer_completed);
        if (result == CUPTI_SUCCESS)
            result = cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (result != CUPTI_SUCCESS) {
            const char *why = "unknown error";
            if (cupti.result_string != NULL)
                cupti.result_string(result, &why);
            snprintf(problem, sizeof problem, "CUPTI could not start: %s", why);
        }
    }
    atexit(finish); /* with a problem too: the part then says why, not "died before writing its part" */
    return 1;
}
