// A kernel the corpus renames, its body unchanged: one name goes away, another appears.
__global__ void rename_before(int* x) { x[threadIdx.x] = 17; }
void rename_launch(int* x) { rename_before<<<1, 32>>>(x); }
