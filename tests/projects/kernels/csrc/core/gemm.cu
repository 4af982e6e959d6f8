#include "kernels/common.h"
#ifdef __CUDA_ARCH__
#include "kernels/device_only.cuh"
#endif
namespace kernels {
__global__ void gemm_kernel(float* c, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef __CUDA_ARCH__
  if (i < n) c[i] = device_only_fma(a[i], b[i], c[i]);
#endif
}
void gemm(float* c, const float* a, const float* b, int n) { gemm_kernel<<<n / kWarp + 1, kWarp>>>(c, a, b, n); }
}  // namespace kernels
