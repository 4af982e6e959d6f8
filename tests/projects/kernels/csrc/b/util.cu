// util.cu number two (target ops)
__global__ void util_b_kernel(int* p) { p[threadIdx.x] = 2; }
void util_b(int* p) { util_b_kernel<<<1, 32>>>(p); }
