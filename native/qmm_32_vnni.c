/*
 * qmm_32_vnni.c: qmm_32.c's x86 kernels built for AVX-512 VNNI
 * (vpdpbusd: the integer step of a block in one instruction; 256-bit
 * registers for decode, 512-bit for batches); pm_qmm_32 picks them when
 * the CPU has avx512vnni, avx512vl and avx512bw. Bitwise the AVX2
 * kernels' results (qmm_32_x86.h).
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define QMM_TARGET "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"
#define QMM_VNNI 1
#define QMM_FN qmm_32_vnni
#include "qmm_32_x86.h"
#else
typedef int pm_qmm_32_vnni_empty; /* ISO C wants a declaration */
#endif
