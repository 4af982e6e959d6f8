__global__ void xk(int* x) { x[threadIdx.x] = 11; }
void launch_xk(int* x, int threads) { xk<<<1, threads>>>(x); }
