/* Host coverage for kernel-symbol-map: which host functions ran, test by test.
 *
 * kernel_symbol_map(HOST_COVERAGE) compiles a project's host code with
 * -finstrument-functions, so that every function calls
 * __cyg_profile_func_enter(its own address, ...) as it starts, and links this
 * file into each library and executable it maps. Each of them holds its own
 * table (the hooks are hidden: a library's calls reach its own copy, with no
 * PLT in between); the recorder (python/kernel_symbol_map/recorder/
 * hostcoverage.py) finds each copy by the one exported function,
 * kernel_symbol_map_coverage_take, and asks it at each test's start and end
 * which functions were entered since it last asked.
 *
 * The table is a set of addresses, open addressing, lock-free: threads insert
 * with a compare-and-swap; a take empties each slot with an exchange, so that
 * an address entered during a take is either taken now or entered again into
 * an empty slot later. A set fuller than its limit makes the next take fail,
 * and the recorder then says nothing of that window (never less than ran).
 *
 * It compiles as C or C++ (the languages a project enables), and nothing in
 * it is instrumented.
 */
#include <stddef.h>
#include <stdint.h>

#define KSM_BITS 18
#define KSM_SLOTS (1u << KSM_BITS)
#define KSM_LIMIT (KSM_SLOTS / 4u * 3u) /* beyond this a probe may run long: the window is given up */

#define KSM_HOOK __attribute__((no_instrument_function)) /* hidden by the directives below */
#define KSM_API __attribute__((no_instrument_function, visibility("default"), used))

#ifdef __cplusplus
extern "C" {
#endif

static uintptr_t ksm_slots[KSM_SLOTS];
static unsigned ksm_used;
static int ksm_full;

KSM_HOOK void __cyg_profile_func_enter(void *fn, void *site);
KSM_HOOK void __cyg_profile_func_exit(void *fn, void *site);
/* C++ compilers know the hooks as builtins and ignore a visibility attribute on them; the assembler does not.
 * Hidden, every call binds to this library's copy: glibc's own no-op hooks must never take the calls. */
__asm__(".hidden __cyg_profile_func_enter");
__asm__(".hidden __cyg_profile_func_exit");
KSM_API long kernel_symbol_map_coverage_take(uintptr_t *out, long capacity);
KSM_API long kernel_symbol_map_coverage_capacity(void);

void __cyg_profile_func_enter(void *fn, void *site) {
  uintptr_t key = (uintptr_t)fn;
  size_t i = (size_t)(((uint64_t)(key >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - KSM_BITS));
  unsigned probes;
  (void)site;
  if (__atomic_load_n(&ksm_full, __ATOMIC_RELAXED)) {
    return;
  }
  for (probes = 0; probes < KSM_SLOTS; probes++) {
    uintptr_t seen = __atomic_load_n(&ksm_slots[i], __ATOMIC_RELAXED);
    if (seen == key) {
      return;
    }
    if (seen == 0) {
      uintptr_t expected = 0;
      if (__atomic_compare_exchange_n(&ksm_slots[i], &expected, key, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        if (__atomic_add_fetch(&ksm_used, 1u, __ATOMIC_RELAXED) > KSM_LIMIT) {
          __atomic_store_n(&ksm_full, 1, __ATOMIC_RELAXED);
        }
        return;
      }
      if (expected == key) {
        return;
      }
    }
    i = (i + 1) & (KSM_SLOTS - 1);
  }
  __atomic_store_n(&ksm_full, 1, __ATOMIC_RELAXED);
}

void __cyg_profile_func_exit(void *fn, void *site) {
  (void)fn;
  (void)site;
}

/* Writes the address of every function entered since the last take to out (at most capacity of them,
 * capacity_of() is always enough) and forgets them. Returns how many, or -1 when some were lost: the
 * table overflowed since the last take (it is emptied all the same, for the next window). */
long kernel_symbol_map_coverage_take(uintptr_t *out, long capacity) {
  long n = 0;
  unsigned i;
  int lost = __atomic_exchange_n(&ksm_full, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&ksm_used, 0u, __ATOMIC_RELAXED);
  for (i = 0; i < KSM_SLOTS; i++) {
    uintptr_t key;
    if (__atomic_load_n(&ksm_slots[i], __ATOMIC_RELAXED) == 0) {
      continue;
    }
    key = __atomic_exchange_n(&ksm_slots[i], (uintptr_t)0, __ATOMIC_RELAXED);
    if (key == 0) {
      continue;
    }
    if (n < capacity) {
      out[n] = key;
    } else {
      lost = 1;
    }
    n++;
  }
  return lost ? -1 : n;
}

/* How many addresses one take may write. */
long kernel_symbol_map_coverage_capacity(void) {
  return (long)KSM_SLOTS;
}

#ifdef __cplusplus
}
#endif
