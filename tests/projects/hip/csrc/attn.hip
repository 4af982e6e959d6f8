#include "common.hpp"
#include "device_only.hpp"
#if defined(__gfx90a__)
#include "arch_only.hpp"
#define ATTN_SCALE arch_only_scale()
#else
#define ATTN_SCALE 1.0f
#endif
__global__ void attn_kernel(float* x) { x[threadIdx.x] = x[threadIdx.x] * ATTN_SCALE + 1.0f + device_only_bias(); }
void attn(float* x) { attn_kernel<<<1, 64>>>(x); scale_kernel<float><<<1, 64>>>(x, 0.5f); }
