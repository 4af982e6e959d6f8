#include <cstdio>
namespace ns { template<typename T> __global__ void tk(T* p){ p[0]=T(1);} }
extern "C" __global__ void ck(int* p){ p[0]=2; }
static __global__ void sk(int* p){ p[0]=3; }
namespace { __global__ void ak(int* p){ p[0]=4; } }
__device__ int helper(int x){ return x+1; }
void launch(int* p, float* f){ ns::tk<<<1,1>>>(p); ns::tk<<<1,1>>>(f); ck<<<1,1>>>(p); sk<<<1,1>>>(p); ak<<<1,1>>>(p); }
