// util.cu number one (target core)
__global__ void util_a_kernel(int* p) { p[threadIdx.x] = 1; }
void util_a(int* p) { util_a_kernel<<<1, 32>>>(p); }
