// Kernels whose names people find hard to read: CUB's, instantiated with a functor of our own.
#include <cub/device/device_reduce.cuh>

struct process_cube_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b * b * b; }
};

namespace ours {
__global__ void unrelated_kernel(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] *= 2.0f;
}
}  // namespace ours

extern "C" __global__ void plain_c_kernel(int* p) { *p = 1; }

void reduce(const float* in, float* out, int n, void* scratch, size_t bytes, cudaStream_t s) {
  cub::DeviceReduce::Reduce(scratch, bytes, in, out, n, process_cube_op{}, 0.0f, s);
}
