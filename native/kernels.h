/*
 * kernels.h: the engine's numeric kernels, in two sets chosen at run time:
 * AVX2+FMA (when the CPU has them) and portable C (AArch64's NEON set,
 * PM_ISA_NEON below, is portable's with a NEON matmul: the same bits).
 *
 * Batch invariance: every kernel computes a row's result with an operation
 * sequence that depends only on that row's data and the shapes (k, hd, n),
 * never on how many rows are in the batch or on which tile or remainder path
 * the row takes. In matmul every output element is one 8-lane accumulator fed
 * k/8 chunks in order (plus one masked tail chunk), reduced by the same tree
 * ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) in every path (an F16 matrix an
 * engine repacked into panels sums in another order, the same in all of
 * its paths: mm_f16_panel.h). So a request's logits are bitwise identical
 * whatever else is batched with it. The two sets agree
 * closely but not bitwise (FMA rounds once, the portable set twice).
 */
#ifndef PM_KERNELS_H
#define PM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "weights.h"

/* pm_attend_next: the KV head and slot of the next attend call; n is the
 * positions it reads (its n + nr - 1). */
typedef struct {
	const float *kbase, *vbase;
	const int32_t *table;
	int n;
} pm_attend_next;

/*
 * pm_attend_fn: causal attention of nr consecutive rows of one slot (a
 * prefill chunk or a verify draft; nr = 1 in decode), each with g query
 * heads that share one KV head: row j's head h is q[j*ldq + h*hd ..][hd]
 * and sees positions 0..n+j-1 of the slot's paged cache, where position t
 * lives at kbase/vbase + ((size_t)table[t / bs] * bs + t % bs) * stride.
 * out[j*ldq + h*hd ..][hd] = softmax(q k^T * scale) v, nr <= PM_ATTEND_MAX_ROWS.
 * scratch holds nr * g * (n + nr - 1) floats. next, when set, is the call
 * that follows (same hd, bs, stride): a kernel may prefetch its first rows.
 * A row's result depends only on its q, the cached rows it sees and its
 * length: never on nr, on its place among the rows, on the other heads or
 * on next (test_attend.c checks each against nr = 1, g = 1, bitwise).
 */
#define PM_ATTEND_MAX_ROWS 8

typedef void (*pm_attend_fn)(float *out, const float *q, size_t ldq, int nr, int g, int hd,
			     const float *kbase, const float *vbase, const int32_t *table, int bs,
			     size_t stride, int n, float scale, float *scratch,
			     const pm_attend_next *next);

typedef struct {
	const char *name; /* "avx2", "neon" or "portable" */
	int regs;         /* vector registers the float tiles are compiled for: 16, 32; 0 portable, neon */

	/*
	 * matmul: out[r*ldo + m] = sum_i x[r*k + i] * w[m*k + i] for rows r < n
	 * and weight rows m in [m0, m1). Weight tiles are loaded once and used
	 * against every row of x.
	 */
	void (*matmul)(float *out, size_t ldo, const float *x, const float *w, int n, int k, int m0,
		       int m1);

	/* rmsnorm: out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i < n. out may alias x. */
	void (*rmsnorm)(float *out, const float *x, const float *w, int n, float eps);

	/* swiglu: g[i] = silu(g[i]) * u[i], i < n. */
	void (*swiglu)(float *g, const float *u, int n);

	/* add: x[i] += o[i], i < n (one rounding each: every set gives the
	 * same bits; x and o do not overlap). */
	void (*add)(float *x, const float *o, int n);

	/* attend: see pm_attend_fn. */
	pm_attend_fn attend;
} pm_kernels;

extern const pm_kernels pm_kernels_portable;

/*
 * pm_attend_avx2 returns the AVX2 attention compiled for regs vector
 * registers: 16 (any AVX2+FMA CPU), 32 (AVX-512VL: bigger tiles, the same
 * bits), 0 the copy pm_kernels_avx2 uses; NULL when this build or CPU
 * cannot run it.
 */
pm_attend_fn pm_attend_avx2(int regs);

/*
 * The instruction-set paths an engine can compute with (pm_engine_config
 * kernel), from the most portable up. Each is a whole set: the float
 * kernels and attention (16-register copies for AVX2 and AVX-VNNI, the
 * 32-register ones for AVX-512), the 32-block integer products
 * (qmm_32.c: maddubs, 256-bit vpdpbusd, 512-bit vpdpbusd) and the K-quant
 * products (qmm_k.c: AVX2 under AVX-VNNI, which has no K-quant kernel of
 * its own). Every x86 path computes its integers exactly and its floats
 * in the same order, so they give bitwise the same results; portable
 * agrees closely.
 */
/*
 * PM_ISA_NEON is AArch64's path (Advanced SIMD is baseline there; only an
 * ARM64 build has it): the 32-block integer products of qmm_32_neon.c
 * (vmull_s8, or vdotq_s32 where the CPU has the dot-product extension),
 * the K-quant ones of qmm_k_neon.c, the F32/F16/BF16 products of
 * mm_float_neon.c, and the portable set's norms and attention. Unlike the
 * x86 paths it gives bitwise the PORTABLE set's results (same float
 * operations in the same order, none fused).
 */
enum {
	PM_ISA_PORTABLE = 0,
	PM_ISA_AVX2 = 1,
	PM_ISA_AVXVNNI = 2,
	PM_ISA_AVX512VNNI = 3,
	PM_ISA_NEON = 4,
	PM_ISA_COUNT = 5
};

/* pm_isa_name returns "portable", "avx2", "avxvnni", "avx512vnni" or "neon" ("?" otherwise). */
const char *pm_isa_name(int isa);

/* pm_cpu_has_isa reports whether this build and CPU run path isa. */
int pm_cpu_has_isa(int isa);

/* pm_kernels_isa returns path isa's float kernel set (pm_kernels_portable
 * for PM_ISA_PORTABLE), NULL when this build or CPU cannot run it. */
const pm_kernels *pm_kernels_isa(int isa);

/* pm_cpu_has_neon_dot reports whether this build is AArch64 and the CPU
 * has the dot-product extension (HWCAP_ASIMDDP): qmm_32_neon.c's vdotq_s32
 * kernels. 0 elsewhere. */
int pm_cpu_has_neon_dot(void);

/* pm_cpu_has_avx2 reports whether the CPU runs the AVX2+FMA kernels. */
int pm_cpu_has_avx2(void);

/* pm_cpu_has_avx512vl reports whether the CPU has AVX-512F and VL: the
 * 32-register copies of the float tiles and of attention (same bits). */
int pm_cpu_has_avx512vl(void);

/*
 * pm_kernels_avx2 returns the AVX2+FMA set, or NULL when this build or CPU
 * cannot run it.
 */
const pm_kernels *pm_kernels_avx2(void);

/*
 * pm_matvec_fn: out[m] = x . row m of w for m in [m0, m1), one row of x
 * (decode at batch 1), the blocks decoded in registers; bitwise what
 * pm_matmul_w gives with the AVX2 kernels (matvec.c). w->cols must be a
 * multiple of 32.
 */
typedef void (*pm_matvec_fn)(float *out, const float *x, const pm_weight *w, int m0, int m1);

/* pm_matvec_avx2 returns type's AVX2 matvec, NULL when there is none (or
 * no AVX2 build); callers check the CPU (pm_cpu_has_avx2) first. */
pm_matvec_fn pm_matvec_avx2(uint32_t type);

/*
 * pm_tile_fn: out[r*ldo + m] = x[r] . row m of w for rows r < n of x
 * (x[r] at x + r * w->cols) and m in [m0, m1): the tiled product with the
 * weight chunks widened in registers (mm_float.c); bitwise what matmul
 * gives on the widened rows.
 */
typedef void (*pm_tile_fn)(float *out, size_t ldo, const float *x, const pm_weight *w, int n,
			   int m0, int m1);

/*
 * pm_matmul_float_avx2 returns the AVX2 tile product of an F32, F16 or
 * BF16 weight, NULL for other types or when this build or CPU cannot run
 * it. regs picks the copy: 16 (any AVX2+FMA+F16C CPU), 32 (compiled for
 * AVX-512VL's 32 registers: bigger tiles, the same bits), 0 the best this
 * CPU runs.
 */
pm_tile_fn pm_matmul_float_avx2(uint32_t type, int regs);

#endif
