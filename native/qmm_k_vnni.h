/*
 * qmm_k_vnni.h: the AVX512-VNNI kernels of qmm_k_vnni.c, which qmm_k.c's
 * pm_qmm_k returns for Q4_K, Q5_K and Q6_K where the CPU has AVX512-VNNI
 * with VL and BW. x86-64 only.
 */
#ifndef PM_QMM_K_VNNI_H
#define PM_QMM_K_VNNI_H

#include <stdint.h>

#include "actquant.h"

/* pm_qmm_k_vnni returns type's kernel (batch 1 and batches, pm_qmm_fn's
 * arguments), NULL for a type that is not Q4_K, Q5_K or Q6_K. It does not
 * check the CPU: pm_qmm_k does. */
pm_qmm_fn pm_qmm_k_vnni(uint32_t type);

#endif
