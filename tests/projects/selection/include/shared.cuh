#pragma once
template <typename T>
__global__ void shared_kernel(T* x) { x[threadIdx.x] += T(1); }
