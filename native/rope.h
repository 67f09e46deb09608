/*
 * rope.h: rotary position embeddings as llama.cpp applies them (ggml_rope_ext
 * without YaRN): pair i of a head of n dimensions, at position p, turns by
 *
 *     angle(p, i) = p * freq_scale * base^(-2i/n) / factor[i]
 *
 * base is rope.freq_base; freq_scale is 1/rope.scaling.factor for linear
 * scaling (1 without); factor[] is the rope_freqs tensor (Llama 3.1+ scaling:
 * the converter bakes the low/high-frequency rule into it), all 1 when the
 * file has none. The pair is (x[2i], x[2i+1]) in PM_ROPE_NORM layout and
 * (x[i], x[i+n/2]) in PM_ROPE_NEOX layout (arch.h).
 */
#ifndef PM_ROPE_H
#define PM_ROPE_H

/*
 * pm_rope_table fills cos_t and sin_t, each [ctx][n/2], for positions
 * 0..ctx-1 (angles computed in double, stored as float). factors may be NULL.
 */
void pm_rope_table(float *cos_t, float *sin_t, int ctx, int n, double base, double freq_scale,
		   const float *factors);

/*
 * pm_rope_apply rotates each of heads heads of n floats in x in place, with
 * one position's row c, s (n/2 entries each) of the table, in layout type.
 */
void pm_rope_apply(float *x, int heads, int n, const float *c, const float *s, int type);

#endif
