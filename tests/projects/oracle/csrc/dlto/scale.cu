// Device link-time optimisation: compiled to LTO IR (code=lto_80), dlto_scale reaches dlto_kernel
// (csrc/dlto/kernel.cu) only in dlto's device link (-dlto), which inlines it there.
__device__ int dlto_scale(int x) { return x * 2 + 1; }
