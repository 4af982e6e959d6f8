// Second target's kernels, plus an extern "C" entry.
#include "common.cuh"

extern "C" __global__ void sum_kernel(float* out, const float* in, int n) {
  __shared__ float acc;
  if (threadIdx.x == 0) acc = 0.0f;
  __syncthreads();
  if (threadIdx.x < n) atomicAdd(&acc, in[threadIdx.x]);
  __syncthreads();
  if (threadIdx.x == 0) *out = acc;
}

void reduce(float* out, const float* in, int n) {
  sum_kernel<<<1, 256>>>(out, in, n);
  demo::scale_kernel<double><<<1, 256>>>(nullptr, nullptr, 1.0, 0);
}

// For Python (cuda_ext.reduce, through ctypes).
extern "C" int cuda_ext_reduce(int n) {
  float* buf = nullptr;
  if (cudaMalloc(&buf, (n + 1) * sizeof(float)) != cudaSuccess) return 1;
  reduce(buf, buf + 1, n);
  cudaError_t err = cudaDeviceSynchronize();
  cudaFree(buf);
  return err == cudaSuccess ? 0 : 2;
}
