/*
 * qmm_32_avxvnni.c: qmm_32.c's x86 kernels built for AVX-VNNI (the VEX
 * vpdpbusd of CPUs with VNNI but no AVX-512: Alder Lake and later client
 * parts, Sierra Forest, Zen 5 desktop): the AVX2 build's 256-bit decode
 * and batch tiles, the integer step of a block one instruction instead of
 * maddubs + madd (+ the sign trick for Q8_0). pm_qmm_32_x86(type, 2)
 * returns them where the CPU has avxvnni. Bitwise the AVX2 kernels'
 * results (qmm_32_x86.h: the integers are exact either way).
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define QMM_TARGET "avx2,fma,f16c,avxvnni"
#define QMM_VNNI 0
#define QMM_AVXVNNI 1
#define QMM_FN qmm_32_avxvnni
#include "qmm_32_x86.h"
#else
typedef int pm_qmm_32_avxvnni_empty; /* ISO C wants a declaration */
#endif
