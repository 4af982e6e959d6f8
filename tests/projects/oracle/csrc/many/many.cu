// Output mode's corpus (issue 27): 22 kernels in one file, so that a change reaching one kernel (or none)
// can be told from one reaching the file. Each special kernel stands for one class of change.
#include "many_pick.cuh"

#ifndef MANY_FACTOR
#error "MANY_FACTOR comes from CMakeLists.txt (target_compile_definitions)"
#endif

// Read by many_table_user only; its initialiser is module data of the image.
__constant__ int many_table[4] = {3, 5, 7, 9};

// Called by many_shared_a and many_shared_b (nvcc 13 clones it into each caller's code).
__device__ __noinline__ int many_shared(int v) { return v * 5 + 1; }

// Filler: kernels that no change of the corpus reaches.
__global__ void many_00(int* x) { x[threadIdx.x] = 100; }
__global__ void many_01(int* x) { x[threadIdx.x] = 101; }
__global__ void many_02(int* x) { x[threadIdx.x] = 102; }
__global__ void many_03(int* x) { x[threadIdx.x] = 103; }
__global__ void many_04(int* x) { x[threadIdx.x] = 104; }
__global__ void many_05(int* x) { x[threadIdx.x] = 105; }
__global__ void many_06(int* x) { x[threadIdx.x] = 106; }
__global__ void many_07(int* x) { x[threadIdx.x] = 107; }
__global__ void many_08(int* x) { x[threadIdx.x] = 108; }
__global__ void many_09(int* x) { x[threadIdx.x] = 109; }
__global__ void many_10(int* x) { x[threadIdx.x] = 110; }
__global__ void many_11(int* x) { x[threadIdx.x] = 111; }
__global__ void many_12(int* x) { x[threadIdx.x] = 112; }
__global__ void many_13(int* x) { x[threadIdx.x] = 113; }
__global__ void many_14(int* x) { x[threadIdx.x] = 114; }
__global__ void many_15(int* x) { x[threadIdx.x] = 115; }

__global__ void many_body(int* x) { x[threadIdx.x] = 1; }
__global__ void many_pick_user(int* x) { x[threadIdx.x] = many_pick(); }
__global__ void many_shared_a(int* x) { x[threadIdx.x] = many_shared(x[threadIdx.x]); }
__global__ void many_shared_b(int* x) { x[threadIdx.x] = many_shared(x[threadIdx.x]) + 2; }
__global__ void many_table_user(int* x) { x[threadIdx.x] = many_table[threadIdx.x % 4]; }
__global__ void many_define_user(int* x) { x[threadIdx.x] = MANY_FACTOR; }

// Host code only: no kernel's device code depends on it.
int many_host_value() { return 41; }
