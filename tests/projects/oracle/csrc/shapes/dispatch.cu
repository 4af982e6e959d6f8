// Kernels launched only through a host table of kernel pointers, indexed at run time.
__global__ void disp_add(int* x) { x[threadIdx.x] += 1; }
__global__ void disp_mul(int* x) { x[threadIdx.x] *= 3; }
__global__ void disp_neg(int* x) { x[threadIdx.x] = -x[threadIdx.x]; }
using DispOp = void (*)(int*);
static const DispOp disp_table[] = {disp_add, disp_mul, disp_neg};
void dispatch(int* x, int op) { disp_table[op]<<<1, 32>>>(x); }
