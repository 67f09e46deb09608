/*
 * qmm_k.c: integer matrix products of Q4_K, Q5_K and Q6_K weights against
 * pm_act256 activations (actquant.h).
 * No type is registered yet: each computes with float activations
 * (pm_matmul_w).
 */
#include "actquant.h"

pm_qmm pm_qmm_k(uint32_t type, int avx2)
{
	(void)type;
	(void)avx2;
	return (pm_qmm){0, 0};
}
