/*
 * rope.c: rotary position embeddings (rope.h).
 */
#include "rope.h"

#include <math.h>
#include <stddef.h>

#include "arch.h"

void pm_rope_table(float *cos_t, float *sin_t, int ctx, int n, double base, double freq_scale,
		   const float *factors)
{
	int half = n / 2;
	for (int i = 0; i < half; i++) {
		double f = freq_scale * pow(base, -2.0 * i / n);
		if (factors)
			f /= (double)factors[i];
		for (int p = 0; p < ctx; p++) {
			double a = p * f;
			cos_t[(size_t)p * half + i] = (float)cos(a);
			sin_t[(size_t)p * half + i] = (float)sin(a);
		}
	}
}

void pm_rope_apply(float *x, int heads, int n, const float *c, const float *s, int type)
{
	int half = n / 2;
	/* element j of pair i: NORM (2i, 2i+1), NEOX (i, i+half) */
	int stride = type == PM_ROPE_NEOX ? 1 : 2, off = type == PM_ROPE_NEOX ? half : 1;
	for (int h = 0; h < heads; h++) {
		float *v = x + (size_t)h * n;
		for (int i = 0; i < half; i++) {
			float *a = v + (size_t)i * stride, *b = a + off;
			float x0 = *a, x1 = *b;
			*a = x0 * c[i] - x1 * s[i];
			*b = x0 * s[i] + x1 * c[i];
		}
	}
}
