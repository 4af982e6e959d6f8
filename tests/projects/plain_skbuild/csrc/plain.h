#pragma once
#ifdef __CUDACC__
__host__ __device__
#endif
inline float plain_step() { return 1.0f; }
