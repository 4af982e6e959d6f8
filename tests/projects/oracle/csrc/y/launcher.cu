void launch_xk(int* x, int threads);
__global__ void yk(int* x) { x[threadIdx.x] = 12; }
void y_entry(int* x) { yk<<<1, 32>>>(x); launch_xk(x, 32); }
