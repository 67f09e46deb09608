/*
 * actquant.c: the activation quantizers (the rule is in actquant.h) and
 * the dispatch to the integer kernels of qmm_32.c and qmm_k.c.
 */
#include "actquant.h"

#include <math.h>

/* quant_block quantizes n floats of x into q and returns d. */
static float quant_block(int8_t *q, const float *x, int n)
{
	float amax = 0;
	for (int i = 0; i < n; i++) {
		float a = fabsf(x[i]);
		if (a > amax)
			amax = a;
	}
	float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
	for (int i = 0; i < n; i++) {
		float v = rintf(x[i] * id);
		if (v != v)
			v = 0;
		else if (v > 127)
			v = 127;
		else if (v < -127)
			v = -127;
		q[i] = (int8_t)v;
	}
	return d;
}

void pm_quant_act32(pm_act32 *dst, const float *x, int k)
{
	for (int b = 0; b < k / 32; b++) {
		pm_act32 *y = dst + b;
		y->d = quant_block(y->q, x + 32 * (size_t)b, 32);
		int sum = 0;
		for (int i = 0; i < 32; i++)
			sum += y->q[i];
		y->s = y->d * (float)sum;
	}
}

void pm_quant_act256(pm_act256 *dst, const float *x, int k)
{
	for (int b = 0; b < k / 256; b++) {
		pm_act256 *y = dst + b;
		y->d = quant_block(y->q, x + 256 * (size_t)b, 256);
		for (int j = 0; j < 16; j++) {
			int sum = 0;
			for (int i = 0; i < 16; i++)
				sum += y->q[16 * j + i];
			y->bsums[j] = (int16_t)sum;
		}
	}
}

size_t pm_act_row_bytes(int block, int k)
{
	if (k < 1 || k % (block > 0 ? block : 1) != 0)
		return 0;
	switch (block) {
	case 32:
		return (size_t)(k / 32) * sizeof(pm_act32);
	case 256:
		return (size_t)(k / 256) * sizeof(pm_act256);
	}
	return 0;
}

pm_qmm pm_qmm_for(uint32_t type, int avx2)
{
	pm_qmm q = pm_qmm_32(type, avx2);
	if (q.fn)
		return q;
	return pm_qmm_k(type, avx2);
}

void pm_matmul_q(pm_qmm q, float *out, size_t ldo, const float *x, size_t ldx, const pm_weight *w,
		 int n, int m0, int m1, void *scratch)
{
	int k = w->cols;
	size_t rb = pm_act_row_bytes(q.block, k);
	for (int r = 0; r < n; r++) {
		void *dst = (char *)scratch + (size_t)r * rb;
		if (q.block == 32)
			pm_quant_act32(dst, x + (size_t)r * ldx, k);
		else
			pm_quant_act256(dst, x + (size_t)r * ldx, k);
	}
	q.fn(out, ldo, scratch, rb, w, n, m0, m1);
}
