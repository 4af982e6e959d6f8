/*
 * The recorder's audit library: which shared libraries each native process
 * of a recorded test loaded, and whether its record is whole.
 *
 * The recorder puts this library in LD_AUDIT for every process a recorded
 * one starts (see python/kernel_symbol_map/recorder/native.py). glibc's
 * dynamic loader then calls it (rtld-audit(7)) in that process and in every
 * dynamic descendant that keeps the variable:
 *
 *   la_version   once per program image, before anything is loaded: the
 *                image's record file is created, with a "begin" line;
 *   la_objopen   for every object mapped, dlopen included, before its
 *                constructors run: a "lib" line;
 *   la_symbind64 for calls into libc's process starters (execve, execv,
 *                execvp, execvpe, posix_spawn, posix_spawnp, system,
 *                popen): the call is noted ("exec", "spawn", "shell")
 *                with whether its program is static, then made;
 *   la_objclose  for the program itself at exit: an "end" line (and the
 *                wrapped _exit and _Exit write it too).
 *
 * A record is whole only when it ends with "end", or with an exec whose
 * new image has a record of its own, or with an exec of a static program
 * (which cannot load a GPU driver). A process killed mid-run, one whose
 * write failed, or one that replaced itself with a program the loader did
 * not audit (a cleared environment, a setuid program) leaves a record that
 * is not whole, and the recorder says so. Reading these records is the
 * recorder's job (recorder/audit.py); this library only writes them.
 *
 * Written by hand because it must be: LD_AUDIT takes a shared library with
 * these entry points, and no package ships one that writes what a
 * recording needs. Each line is one write(2) on an O_APPEND file, so a
 * process killed between two writes leaves whole lines.
 *
 * Paths are written with a tab, a newline or a backslash as \011, \012 or
 * \134, so no file name can end a field or a line (or forge an "end").
 * A forked child whose record cannot be made notes "lost PID" in its
 * parent's record, which then is not whole either.
 *
 * Record files: <folder>/<spawn id>.<pid>.<monotonic ns>.audit, where the
 * folder and the spawn id come from the recorder's variables. A forked
 * child writes into <spawn id>.<pid>.<start>.fork.audit until it execs, which it
 * creates on its first line without touching this library's state (it may
 * run in a vfork child, which shares its parent's memory).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FOLDER_VARIABLE "KERNEL_SYMBOL_MAP_RECORD"
#define SPAWN_VARIABLE "KERNEL_SYMBOL_MAP_RECORD_SPAWN"
#define LINE_MAX_BYTES 8192

static char folder[PATH_MAX];
static char spawn_id[128];
static char own_file[PATH_MAX];
static pid_t owner;           /* the process this image's record belongs to */
static int failed;            /* a write of this image failed: its record never ends whole */
static pid_t failed_child;    /* the same for a forked child: set in the child only, and read there only */
static uintptr_t main_cookie; /* the program itself, whose close is the exit */

/* -- writing lines ------------------------------------------------------- */

static long long monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int append(const char *path, const char *line, int flags) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | flags, 0644);
    if (fd < 0)
        return errno == EEXIST ? 1 : -1;
    size_t n = strlen(line);
    ssize_t wrote = write(fd, line, n);
    close(fd);
    return wrote == (ssize_t)n ? 0 : -1;
}

/* /proc/self/stat's 22nd field: when this process started, which tells it from a later one with its pid. */
static void start_time(char *out, size_t size) {
    char buffer[1024];
    out[0] = '\0';
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (n <= 0)
        return;
    buffer[n] = '\0';
    char *p = strrchr(buffer, ')');
    if (p == NULL)
        return;
    p += 2; /* the state, the third field */
    for (int field = 3; field < 22 && p != NULL; field++) {
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    if (p == NULL)
        return;
    size_t len = strcspn(p, " ");
    if (len >= size)
        len = size - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

/* A path as a record field: a tab, a newline or a backslash in it is written as \011, \012 or \134 (as
 * /proc/mounts does), so no name can end a field or a line. 0 when it does not fit: the caller writes a line
 * the recorder cannot read, and the record is not whole. */
static int escape(char *out, size_t size, const char *text) {
    size_t at = 0;
    for (const char *c = text != NULL ? text : ""; *c != '\0'; c++) {
        if (*c == '\t' || *c == '\n' || *c == '\\') {
            if (at + 4 >= size)
                return 0;
            at += (size_t)snprintf(out + at, size - at, "\\%03o", (unsigned char)*c);
        } else {
            if (at + 1 >= size)
                return 0;
            out[at++] = *c;
        }
    }
    out[at] = '\0';
    return 1;
}

static void begin_line(char *line, size_t size, const char *how) {
    char exe[PATH_MAX], field[4 * PATH_MAX], start[32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    start_time(start, sizeof start);
    if (!escape(field, sizeof field, exe))
        field[0] = '\0'; /* a begin line with no program: the recorder reads it as no record */
    snprintf(line, size, "begin\t%s\t%d\t%d\t%s\t%lld\t%s\n", how, (int)getpid(), (int)getppid(), start,
             monotonic_ns(), field);
}

/* One line of this process's record. In a child that shares this image (fork, vfork) it goes to the
 * child's own file, made here on its first line; of this library's state only failed_child changes there,
 * which the parent never reads as its own. */
static void emit(const char *line) {
    pid_t me = getpid();
    if (me == owner) {
        if (append(own_file, line, 0) != 0)
            failed = 1;
        return;
    }
    char path[PATH_MAX + 256], begin[5 * PATH_MAX], start[32], lost[64];
    start_time(start, sizeof start);
    snprintf(path, sizeof path, "%s/%s.%d.%s.fork.audit", folder, spawn_id, (int)me, start);
    begin_line(begin, sizeof begin, "fork");
    if (append(path, begin, O_CREAT | O_EXCL) < 0) {
        /* No record of this child at all: its parent's record says so, and is not whole then either. */
        snprintf(lost, sizeof lost, "lost\t%d\n", (int)me);
        append(own_file, lost, 0);
        failed_child = me;
        return;
    }
    if (append(path, line, 0) != 0)
        failed_child = me;
}

/* "end", unless a line of this process's record was lost: then it never ends whole. */
static void end(void) {
    pid_t me = getpid();
    if (me == owner ? !failed : failed_child != me)
        emit("end\n");
}

/* -- what a process start will run ---------------------------------------- */

/* Whether a program with no interpreter names a GPU driver library: glibc's static dlopen loads shared objects
 * all the same, and a program that loads the driver has the library's name in it. */
static int names_a_driver(int fd, off_t size) {
    if (size <= 0)
        return 1;
    void *data = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED)
        return 1;
    static const char *const drivers[] = {"libcuda.so", "libamdhip64.so", "libhsa-runtime64.so"};
    int found = 0;
    for (size_t i = 0; !found && i < sizeof drivers / sizeof drivers[0]; i++)
        found = memmem(data, (size_t)size, drivers[i], strlen(drivers[i])) != NULL;
    munmap(data, (size_t)size);
    return found;
}

/* Whether a dynamic section names a DT_SONAME or a DT_NEEDED: the loader itself, or a library run directly,
 * whatever it then runs may load anything. -1 when it cannot be read. */
static int linked(int fd, const Elf64_Phdr *dynamic) {
    if (dynamic->p_filesz > (1u << 20))
        return -1;
    for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= dynamic->p_filesz; at += sizeof(Elf64_Dyn)) {
        Elf64_Dyn entry;
        if (pread(fd, &entry, sizeof entry, (off_t)(dynamic->p_offset + at)) != (ssize_t)sizeof entry)
            return -1;
        if (entry.d_tag == DT_NULL)
            return 0;
        if (entry.d_tag == DT_NEEDED || entry.d_tag == DT_SONAME)
            return 1;
    }
    return 0;
}

/* "static" (no PT_INTERP, no shared object, no driver named: it cannot load a driver), "setuid" (the loader
 * ignores LD_AUDIT there), "dynamic", or "unknown"; only "static" is ever taken on trust. The same rule as
 * recorder/native.py's kind(). */
static const char *kind_of(const char *path) {
    struct stat st;
    if (path == NULL || strchr(path, '/') == NULL || stat(path, &st) != 0)
        return "unknown"; /* a bare name is found through a PATH this library may not know */
    if (st.st_mode & (S_ISUID | S_ISGID))
        return "setuid";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return "unknown";
    Elf64_Ehdr header;
    const char *kind = "unknown";
    if (pread(fd, &header, sizeof header, 0) == (ssize_t)sizeof header &&
        memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_ident[EI_CLASS] == ELFCLASS64 &&
        header.e_phentsize == sizeof(Elf64_Phdr) && header.e_phnum > 0 && header.e_phnum < 4096) {
        int interpreted = 0, shared = 0, broken = 0;
        for (unsigned i = 0; i < header.e_phnum && !interpreted && !broken; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(header.e_phoff + (uint64_t)i * sizeof ph)) != (ssize_t)sizeof ph)
                broken = 1;
            else if (ph.p_type == PT_INTERP)
                interpreted = 1;
            else if (ph.p_type == PT_DYNAMIC) {
                int named = linked(fd, &ph);
                broken = named < 0;
                shared = shared || named > 0;
            }
        }
        if (broken)
            kind = "unknown";
        else if (interpreted)
            kind = "dynamic";
        else if (!shared && !names_a_driver(fd, st.st_size))
            kind = "static";
    }
    close(fd);
    return kind;
}

static void note(const char *what, const char *path, long long detail) {
    char line[LINE_MAX_BYTES], field[LINE_MAX_BYTES - 64];
    if (escape(field, sizeof field, path))
        snprintf(line, sizeof line, "%s\t%s\t%lld\t%s\n", what, kind_of(path), detail, field);
    else
        snprintf(line, sizeof line, "unreadable\t%s\n", what);
    emit(line);
}

/* -- the process starters, called through our wrappers --------------------- */

typedef int (*execve_t)(const char *, char *const[], char *const[]);
typedef int (*execv_t)(const char *, char *const[]);
typedef int (*spawn_t)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                       char *const[], char *const[]);
typedef int (*system_t)(const char *);
typedef FILE *(*popen_t)(const char *, const char *);
typedef void (*exit_t)(int);

static execve_t real_execve, real_execvpe;
static execv_t real_execv, real_execvp;
static spawn_t real_posix_spawn, real_posix_spawnp;
static system_t real_system;
static popen_t real_popen;
static exit_t real__exit, real__Exit;

static int failed_exec(void) {
    int saved = errno;
    emit("exec-failed\n");
    errno = saved;
    return -1;
}

static int wrap_execve(const char *path, char *const argv[], char *const envp[]) {
    note("exec", path, monotonic_ns());
    real_execve(path, argv, envp);
    return failed_exec();
}

static int wrap_execvpe(const char *file, char *const argv[], char *const envp[]) {
    note("exec", file, monotonic_ns());
    real_execvpe(file, argv, envp);
    return failed_exec();
}

static int wrap_execv(const char *path, char *const argv[]) {
    note("exec", path, monotonic_ns());
    real_execv(path, argv);
    return failed_exec();
}

static int wrap_execvp(const char *file, char *const argv[]) {
    note("exec", file, monotonic_ns());
    real_execvp(file, argv);
    return failed_exec();
}

static int spawned(int result, const char *path, pid_t *pid_out, pid_t pid) {
    if (result == 0)
        note("spawn", path, (long long)(pid_out != NULL ? *pid_out : pid));
    return result;
}

static int wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                            const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    pid_t child = 0;
    int result = real_posix_spawn(pid != NULL ? pid : &child, path, actions, attr, argv, envp);
    return spawned(result, path, pid, child);
}

static int wrap_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                             const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    pid_t child = 0;
    int result = real_posix_spawnp(pid != NULL ? pid : &child, file, actions, attr, argv, envp);
    return spawned(result, file, pid, child);
}

/* system() and popen() start /bin/sh -c from inside libc; the shell's own record is looked for. */
static int wrap_system(const char *command) {
    if (command != NULL)
        note("shell", "/bin/sh", monotonic_ns());
    return real_system(command);
}

static FILE *wrap_popen(const char *command, const char *mode) {
    note("shell", "/bin/sh", monotonic_ns());
    return real_popen(command, mode);
}

/* _exit() skips the loader's exit, where la_objclose writes "end": a shell leaves this way. */
static void wrap__exit(int status) {
    end();
    real__exit(status);
    __builtin_unreachable();
}

static void wrap__Exit(int status) {
    end();
    real__Exit(status);
    __builtin_unreachable();
}

struct starter {
    const char *name;
    void **real;
    void *wrapper;
};

static const struct starter STARTERS[] = {
    {"execve", (void **)&real_execve, (void *)wrap_execve},
    {"execvpe", (void **)&real_execvpe, (void *)wrap_execvpe},
    {"execv", (void **)&real_execv, (void *)wrap_execv},
    {"execvp", (void **)&real_execvp, (void *)wrap_execvp},
    {"posix_spawn", (void **)&real_posix_spawn, (void *)wrap_posix_spawn},
    {"posix_spawnp", (void **)&real_posix_spawnp, (void *)wrap_posix_spawnp},
    {"system", (void **)&real_system, (void *)wrap_system},
    {"popen", (void **)&real_popen, (void *)wrap_popen},
    {"_exit", (void **)&real__exit, (void *)wrap__exit},
    {"_Exit", (void **)&real__Exit, (void *)wrap__Exit},
};

/* -- the loader's audit interface ------------------------------------------ */

unsigned int la_version(unsigned int version) {
    const char *where = getenv(FOLDER_VARIABLE);
    const char *spawn = getenv(SPAWN_VARIABLE);
    if (version < 1 || where == NULL || where[0] != '/' || strlen(where) >= sizeof folder - 64)
        return 0; /* not recording (or not where a child in another folder finds it): the loader drops this
                     library, the process runs unaudited, and the recorder finds no record of it */
    strcpy(folder, where);
    snprintf(spawn_id, sizeof spawn_id, "%s", spawn != NULL && spawn[0] != '\0' ? spawn : "-");
    if (strchr(spawn_id, '/') != NULL)
        strcpy(spawn_id, "-");
    owner = getpid();
    char line[5 * PATH_MAX];
    begin_line(line, sizeof line, "exec");
    snprintf(own_file, sizeof own_file, "%s/%s.%d.%lld.audit", folder, spawn_id, (int)owner, monotonic_ns());
    if (append(own_file, line, O_CREAT | O_EXCL) != 0)
        failed = 1;
    return version < LAV_CURRENT ? version : LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
    (void)lmid;
    const char *name = map->l_name != NULL ? map->l_name : "";
    if (name[0] == '\0' && main_cookie == 0) {
        main_cookie = (uintptr_t)cookie;
        return LA_FLG_BINDFROM;
    }
    char line[LINE_MAX_BYTES], field[LINE_MAX_BYTES - 8];
    if (escape(field, sizeof field, name))
        snprintf(line, sizeof line, "lib\t%s\n", field);
    else
        snprintf(line, sizeof line, "unreadable\tlib\n");
    emit(line);
    const char *base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    /* Only libc's starters are wrapped: calls bound to any other object cost the loader nothing more. */
    return LA_FLG_BINDFROM | (strncmp(base, "libc.so", 7) == 0 ? LA_FLG_BINDTO : 0);
}

uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook, uintptr_t *defcook,
                       unsigned int *flags, const char *symname) {
    (void)ndx, (void)refcook, (void)defcook, (void)flags;
    for (size_t i = 0; i < sizeof STARTERS / sizeof STARTERS[0]; i++) {
        if (strcmp(symname, STARTERS[i].name) == 0) {
            *STARTERS[i].real = (void *)sym->st_value;
            return (uintptr_t)STARTERS[i].wrapper;
        }
    }
    return sym->st_value;
}

unsigned int la_objclose(uintptr_t *cookie) {
    if ((uintptr_t)cookie == main_cookie && main_cookie != 0)
        end();
    return 0;
}
