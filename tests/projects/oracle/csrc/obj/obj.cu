// A CMake OBJECT library that two shared libraries (obj_a, obj_b) link: one object, in both.
__global__ void obj_kernel(int* x) { x[threadIdx.x] = 16; }
void obj_launch(int* x) { obj_kernel<<<1, 32>>>(x); }
