/*
 * Qualifiers for math written once and compiled into both backends.
 * Keyed on __CUDACC__ (the compiler), never on __CUDA_ARCH__, so that host
 * and device passes see the same declarations.
 */
#ifndef PS_SRC_PS_HD_H
#define PS_SRC_PS_HD_H

#ifdef __CUDACC__
#define PS_HD __host__ __device__ __forceinline__
#else
#define PS_HD static inline
#endif

#endif /* PS_SRC_PS_HD_H */
