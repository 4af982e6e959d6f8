// A second translation unit, so that libraries hold more than one container.
template <int N> __global__ void fill(int* p) { p[threadIdx.x] = N; }
template __global__ void fill<1>(int*);
template __global__ void fill<2>(int*);
__global__ void child(int* p) { p[0] = 7; }
