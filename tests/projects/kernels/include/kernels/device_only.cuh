// Included only in the device compilation pass (__CUDA_ARCH__).
#pragma once
__device__ inline float device_only_fma(float a, float b, float c) { return fmaf(a, b, c); }
