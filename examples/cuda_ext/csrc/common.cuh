// Shared by both targets: a header-defined kernel template, as in vLLM's
// csrc/*.cuh, instantiated from more than one .cu file.
#pragma once

namespace demo {

template <typename T>
__global__ void scale_kernel(T* out, const T* in, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}

}  // namespace demo
