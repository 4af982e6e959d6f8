#include <cassert>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "jit_config.h"
#include "ops.h"

// A static initializer, as an op registry or an iostream include makes.
static std::string registry_name = "twofolders";

// As PyTorch's CUDA_KERNEL_ASSERT: kept in a release build (NDEBUG), __FILE__ and all.
extern "C" __host__ __device__ void __assert_fail(const char* assertion, const char* file, unsigned int line,
                                                  const char* function) noexcept __attribute__((__noreturn__));
#define KERNEL_ASSERT(cond) \
  if (!(cond)) __assert_fail(#cond, __FILE__, static_cast<unsigned int>(__LINE__), __func__)

__global__ void checked(int* x) {
  KERNEL_ASSERT(x[0] >= 0 && "x must not be negative");
  x[threadIdx.x] += 1;
}

__global__ void plain(int* x) { x[threadIdx.x] *= 2; }

__global__ void message(int* x) {
  if (x[0] < 0) printf("negative: %d\n", x[0]);
}

// An anonymous namespace: nvcc names it after a hash of the file's path, in host and device code alike.
namespace {
__global__ void hidden(int* x) { x[threadIdx.x] -= 1; }
}  // namespace

// A kernel templated on a file-static device function, as ggml's binary ops are: its name holds the
// function's, which nvcc names after the same hash (_INTERNAL_<hash>_...).
static __device__ int twice(int v) { return 2 * v; }
template <int (*op)(int)>
__global__ void applied(int* x) { x[threadIdx.x] = op(x[threadIdx.x]); }

void ops_fail(const char* file, int line, const char* what) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what);
}

void launch_checked(int* x) {
  OPS_CHECK(x != nullptr, "x is null");
  checked<<<1, 32>>>(x);
}

void launch_plain(int* x) {
  OPS_CHECK(x != nullptr, "x is null");
  plain<<<1, 32>>>(x);
}

void launch_message(int* x) { message<<<1, 1>>>(x); }

void launch_hidden(int* x) { hidden<<<1, 32>>>(x); }

void launch_applied(int* x) { applied<twice><<<1, 32>>>(x); }

int registry_size() { return int(registry_name.size()); }
