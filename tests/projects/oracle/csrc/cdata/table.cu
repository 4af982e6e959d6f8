// __constant__ data defined here, with no kernel, and read by kernels of another object
// (csrc/cdata/reader.cu) through cdata's device link (-rdc).
__constant__ int cdata_coeffs[4] = {2, 4, 6, 8};
