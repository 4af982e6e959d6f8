// Kernels named like the module's own sections (.nv.info, .nv.global.init, .nv.uft.entry): their bytes
// must not be taken for these kernels' (issue 21).
extern "C" __global__ void info(int* p) { p[threadIdx.x] = 1; }
extern "C" __global__ void init(int* p) { p[threadIdx.x] = 2; }
extern "C" __global__ void entry(int* p) { p[threadIdx.x] = 3; }
