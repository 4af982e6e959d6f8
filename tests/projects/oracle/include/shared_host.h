#pragma once
// Shared by host-only code (hostlib) and a kernel (csrc/k/a.cu).
#ifdef __CUDACC__
#define ORACLE_HD __host__ __device__
#else
#define ORACLE_HD
#endif
ORACLE_HD inline int shared_host_value() { return 1; }
