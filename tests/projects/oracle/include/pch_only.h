#pragma once
// pchlib's precompiled header; a kernel (csrc/k/b.cu) includes it too.
#ifdef __CUDACC__
#define ORACLE_PCH_HD __host__ __device__
#else
#define ORACLE_PCH_HD
#endif
ORACLE_PCH_HD inline int pch_value() { return 2; }
