// HIP without the HIP headers, for clang-19 with -nogpuinc: Debian's HIP
// headers match clang-15 (hipcc). The declarations below are what clang needs
// to lower kernel launches.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
typedef struct { unsigned x, y, z; } dim3;
extern "C" int hipLaunchKernel(const void*, dim3, dim3, void**, unsigned long, void*);
extern "C" int __hipPushCallConfiguration(dim3, dim3, unsigned long, void*);
extern "C" int __hipPopCallConfiguration(dim3*, dim3*, unsigned long*, void*);
namespace ns { template <typename T> __global__ void tk(T* p) { p[0] = T(1); } }
template __global__ void ns::tk<int>(int*);
template __global__ void ns::tk<float>(float*);
extern "C" __global__ void ck(int* p) { p[0] = 2; }
__device__ int helper(int x) { return x + 1; }
