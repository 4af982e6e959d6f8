#pragma once

// The package also compiles kernels.cu when it runs, with -DOPS_JIT (as FlashInfer's JIT and
// torch.utils.cpp_extension.load do): this branch is that compile's alone, and the build never sees it.
#ifdef OPS_JIT
#define OPS_UNROLL 4
#else
#define OPS_UNROLL 1
#endif
static_assert(OPS_UNROLL >= 1, "an unroll factor is one or more");
