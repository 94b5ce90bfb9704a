// GPU kernels of CustomOps>DeformableConv2d: none yet (the entry points
// report that the core has no GPU kernel for the op).
