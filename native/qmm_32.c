/*
 * qmm_32.c: integer matrix products of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weights
 * against pm_act32 activations (actquant.h).
 * No type is registered yet: each computes with float activations
 * (pm_matmul_w).
 */
#include "actquant.h"

pm_qmm pm_qmm_32(uint32_t type, int avx2)
{
	(void)type;
	(void)avx2;
	return (pm_qmm){0, 0};
}
