/*
 * mm_f16_panel.c: the F16 panel layout's packer and its AVX2+FMA+F16C
 * products (the layout, the order of a result and why: mm_f16_panel.h).
 *
 * Decode (one row of x): groups of up to 8 panels, one accumulator each (8
 * independent FMA chains hide the FMA latency), x[i] broadcast once per
 * column for the group; while a group runs, the next group's bytes (the
 * same offsets, one group on) are prefetched.
 *
 * Batches: tiles of 2 panels (16 weight rows) against passes of up to 6
 * rows of x (12 accumulators, 2 weight vectors, 1 broadcast), or of the
 * last lone panel against up to 12 rows. x goes in blocks of rows that
 * stay in L2 while every tile of the range passes over them; a tile's
 * panels, 16 * cols halves, stay in L1 or L2 across the block's passes,
 * and its first pass prefetches the next tile.
 */
#include <string.h>

#include "mm_f16_panel.h"

void pm_f16_panel_pack(uint16_t *dst, const pm_weight *w)
{
	size_t k = (size_t)w->cols;
	for (int p = 0; p < w->rows / 8; p++) {
		uint16_t *d = dst + (size_t)p * k * 8;
		for (int j = 0; j < 8; j++) {
			const uint8_t *row = pm_weight_row(w, 8 * p + j);
			for (size_t i = 0; i < k; i++) {
				uint16_t h;
				memcpy(&h, row + 2 * i, 2);
				d[i * 8 + (size_t)j] = h;
			}
		}
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

int pm_f16_panel_ok(const pm_weight *w)
{
	return w->type == PM_TYPE_F16 && w->layout == PM_LAYOUT_ROWS && w->rows > 0 &&
	       w->rows % 8 == 0 && w->cols > 0 && pm_cpu_has_avx2() &&
	       __builtin_cpu_supports("f16c");
}

/* ldp widens the 8 halves at p: column i of a panel's 8 rows. */
AVX2_INLINE __m256 ldp(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/*
 * mv_group: out[8q + j] = x . row j of panel q, q < P, the P panels
 * consecutive from pan (ps halves apart). pf: the next group's first
 * panel (NULL: none), prefetched a line per panel every 4 columns.
 */
AVX2_INLINE void mv_group(const int P, float *out, const float *x, const uint16_t *pan, size_t ps,
			  int k, const char *pf)
{
	__m256 a[8];
#pragma GCC unroll 8
	for (int q = 0; q < P; q++)
		a[q] = _mm256_setzero_ps();
	int i = 0;
	for (; i + 4 <= k; i += 4) {
		if (pf) {
#pragma GCC unroll 8
			for (int q = 0; q < P; q++)
				_mm_prefetch(pf + 2 * ((size_t)q * ps + (size_t)i * 8), _MM_HINT_T1);
		}
#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			__m256 u = _mm256_broadcast_ss(x + i + c);
#pragma GCC unroll 8
			for (int q = 0; q < P; q++)
				a[q] = _mm256_fmadd_ps(u, ldp(pan + (size_t)q * ps + (size_t)(i + c) * 8), a[q]);
		}
	}
	for (; i < k; i++) {
		__m256 u = _mm256_broadcast_ss(x + i);
#pragma GCC unroll 8
		for (int q = 0; q < P; q++)
			a[q] = _mm256_fmadd_ps(u, ldp(pan + (size_t)q * ps + (size_t)i * 8), a[q]);
	}
#pragma GCC unroll 8
	for (int q = 0; q < P; q++)
		_mm256_storeu_ps(out + 8 * q, a[q]);
}

AVX2 void pm_mv_f16_panel(float *out, const float *x, const pm_weight *w, int m0, int m1)
{
	int k = w->cols, p = m0 / 8, pe = m1 / 8, all = w->rows / 8;
	size_t ps = (size_t)k * 8;
	const uint16_t *base = w->data;
	while (p < pe) {
		int P = pe - p >= 8 ? 8 : pe - p >= 4 ? 4 : pe - p >= 2 ? 2 : 1;
		const char *pf = p + 2 * P <= all ? (const char *)(base + (size_t)(p + P) * ps) : NULL;
		const uint16_t *pan = base + (size_t)p * ps;
		switch (P) {
		case 8: mv_group(8, out + 8 * p, x, pan, ps, k, pf); break;
		case 4: mv_group(4, out + 8 * p, x, pan, ps, k, pf); break;
		case 2: mv_group(2, out + 8 * p, x, pan, ps, k, pf); break;
		default: mv_group(1, out + 8 * p, x, pan, ps, k, pf); break;
		}
		p += P;
	}
}

/*
 * The 2-panel, 6-row tile's columns in whole steps of 4, written as one asm
 * block: gcc -O2 kept accumulators of this loop on the stack (a quarter of
 * the tile's samples sat on an FMA after the reload) or recomputed the
 * row addresses every column. The same operations in the same order as
 * tile()'s C loop: per column, the 2 panels widened, then per row of x
 * fma(broadcast x, w, acc) into its 2 accumulators; so the same bits.
 * The step's share of the next tile (a line per panel) is prefetched.
 */
#define T26_ROW(off, base, idx, i0, i1)                                          \
	"vbroadcastss " off "(" base idx "), %%ymm14\n\t"                        \
	"vfmadd231ps %%ymm12, %%ymm14, %%ymm" i0 "\n\t"                        \
	"vfmadd231ps %%ymm13, %%ymm14, %%ymm" i1 "\n\t"
#define T26_COL(wo, xo)                                                          \
	"vcvtph2ps " wo "(%[p0]), %%ymm12\n\t"                                   \
	"vcvtph2ps " wo "(%[p0],%[ps2]), %%ymm13\n\t"                            \
	T26_ROW(xo, "%[xa]", "", "0", "1") T26_ROW(xo, "%[xa]", ",%[s]", "2", "3") \
	T26_ROW(xo, "%[xa]", ",%[s],2", "4", "5") T26_ROW(xo, "%[xb]", "", "6", "7") \
	T26_ROW(xo, "%[xb]", ",%[s]", "8", "9") T26_ROW(xo, "%[xb]", ",%[s],2", "10", "11")
#define T26_ZERO(i) "vxorps %%ymm" #i ", %%ymm" #i ", %%ymm" #i "\n\t"

/* tile26_steps: acc[12][8] (row r's panel q at 2r + q) = the first k & ~3
 * columns of the tile, from zero, as tile()'s loop would add them. The
 * accumulators start at zero in the block (vxorps): zeroing acc in C
 * compiled to a rep stos per pass, 9 % of the kernel's samples. */
AVX2_INLINE void tile26_steps(float *acc, const float *x, int k, const uint16_t *pan, size_t ps,
			      const char *pf)
{
	long steps = k / 4;
	if (steps == 0)
		return;
	const float *xa = x, *xb = x + 3 * (size_t)k;
	const uint16_t *p0 = pan;
	const char *pp = pf ? pf : (const char *)pan;
	long s = (long)k * 4, ps2 = (long)ps * 2;
	__asm__ volatile(T26_ZERO(0) T26_ZERO(1) T26_ZERO(2) T26_ZERO(3) T26_ZERO(4) T26_ZERO(5)
			 T26_ZERO(6) T26_ZERO(7) T26_ZERO(8) T26_ZERO(9) T26_ZERO(10) T26_ZERO(11)
			 "1:\n\t"
			 "prefetcht1 (%[pf])\n\t"
			 "prefetcht1 (%[pf],%[ps2])\n\t"
			 T26_COL("0", "0") T26_COL("16", "4") T26_COL("32", "8") T26_COL("48", "12")
			 "add $64, %[p0]\n\t"
			 "add $64, %[pf]\n\t"
			 "add $16, %[xa]\n\t"
			 "add $16, %[xb]\n\t"
			 "dec %[n]\n\t"
			 "jnz 1b\n\t"
			 "vmovups %%ymm0, 0(%[acc])\n\t"
			 "vmovups %%ymm1, 32(%[acc])\n\t"
			 "vmovups %%ymm2, 64(%[acc])\n\t"
			 "vmovups %%ymm3, 96(%[acc])\n\t"
			 "vmovups %%ymm4, 128(%[acc])\n\t"
			 "vmovups %%ymm5, 160(%[acc])\n\t"
			 "vmovups %%ymm6, 192(%[acc])\n\t"
			 "vmovups %%ymm7, 224(%[acc])\n\t"
			 "vmovups %%ymm8, 256(%[acc])\n\t"
			 "vmovups %%ymm9, 288(%[acc])\n\t"
			 "vmovups %%ymm10, 320(%[acc])\n\t"
			 "vmovups %%ymm11, 352(%[acc])\n\t"
			 : [p0] "+r"(p0), [pf] "+r"(pp), [xa] "+r"(xa), [xb] "+r"(xb), [n] "+r"(steps)
			 : [s] "r"(s), [ps2] "r"(ps2), [acc] "r"(acc)
			 : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14");
}

/*
 * tile: out[r*ldo + 8q + j] = x[r] . row j of panel q, r < R, q < NP
 * (1 or 2), x[r] at x + r * k. pf: the next tile's first panel (NULL:
 * none), prefetched into L2 a line per panel every 4 columns.
 */
AVX2_INLINE void tile(const int NP, const int R, float *out, size_t ldo, const float *x, int k,
		      const uint16_t *pan, size_t ps, const char *pf)
{
	__m256 a[12][2], v[2];
#pragma GCC unroll 12
	for (int r = 0; r < R; r++)
#pragma GCC unroll 2
		for (int q = 0; q < NP; q++)
			a[r][q] = _mm256_setzero_ps();
	int i = 0;
	if (NP == 2 && R == 6 && k >= 4) {
		float acc[12 * 8] __attribute__((aligned(32)));
		tile26_steps(acc, x, k, pan, ps, pf);
#pragma GCC unroll 12
		for (int r = 0; r < 6; r++)
#pragma GCC unroll 2
			for (int q = 0; q < 2; q++)
				a[r][q] = _mm256_load_ps(acc + 8 * (2 * r + q));
		i = k & ~3;
	}
	for (; i < k; i++) {
		if (pf && (i & 3) == 0) {
#pragma GCC unroll 2
			for (int q = 0; q < NP; q++)
				_mm_prefetch(pf + 2 * ((size_t)q * ps + (size_t)i * 8), _MM_HINT_T1);
		}
#pragma GCC unroll 2
		for (int q = 0; q < NP; q++)
			v[q] = ldp(pan + (size_t)q * ps + (size_t)i * 8);
#pragma GCC unroll 12
		for (int r = 0; r < R; r++) {
			__m256 u = _mm256_broadcast_ss(x + (size_t)r * k + i);
#pragma GCC unroll 2
			for (int q = 0; q < NP; q++)
				a[r][q] = _mm256_fmadd_ps(u, v[q], a[r][q]);
		}
	}
#pragma GCC unroll 12
	for (int r = 0; r < R; r++)
#pragma GCC unroll 2
		for (int q = 0; q < NP; q++)
			_mm256_storeu_ps(out + (size_t)r * ldo + 8 * q, a[r][q]);
}

/* xblock: rows of x per block, so a block (rows * k floats) stays in L2
 * (128 KiB of the 512 KiB a Zen 3 core has) beside a tile's panels: a
 * multiple of 6 (whole passes of the 2-panel tile), at least 12. Blocks of
 * 24 to 384 KiB measured the same (AMD EPYC Zen 3, the default model's
 * shapes, 256 rows, within the machine's noise). */
static int xblock(int k)
{
	int rows = (int)((128u << 10) / ((unsigned)k * sizeof(float))) / 6 * 6;
	return rows < 12 ? 12 : rows;
}

/* pass_rows: rows of x for the next pass when left remain and a pass takes
 * at most max: the rest split evenly (8 = 4+4, not 6+2). */
static inline int pass_rows(int left, int max)
{
	int passes = (left + max - 1) / max;
	return (left + passes - 1) / passes;
}

AVX2 void pm_mm_f16_panel(float *out, size_t ldo, const float *x, const pm_weight *w, int n, int m0,
			  int m1)
{
	int k = w->cols, pe = m1 / 8, all = w->rows / 8, xb = xblock(k);
	size_t ps = (size_t)k * 8;
	const uint16_t *base = w->data;
	for (int r0 = 0; r0 < n; r0 += xb) {
		int rn = n - r0 < xb ? n - r0 : xb;
		const float *xr0 = x + (size_t)r0 * k;
		float *or0 = out + (size_t)r0 * ldo;
		for (int p = m0 / 8; p < pe;) {
			int NP = pe - p >= 2 ? 2 : 1;
			const uint16_t *pan = base + (size_t)p * ps;
			const char *pf = p + 2 * NP <= all ? (const char *)(base + (size_t)(p + NP) * ps) : NULL;
			for (int r = 0; r < rn;) {
				float *o = or0 + (size_t)r * ldo + 8 * p;
				const float *xr = xr0 + (size_t)r * k;
				int R = pass_rows(rn - r, NP == 2 ? 6 : 12);
#define TILE_R(NPC, RC)                                                        \
	case RC:                                                               \
		tile(NPC, RC, o, ldo, xr, k, pan, ps, pf);                    \
		break;
				if (NP == 2) {
					switch (R) {
						TILE_R(2, 6) TILE_R(2, 5) TILE_R(2, 4) TILE_R(2, 3) TILE_R(2, 2)
					default: tile(2, 1, o, ldo, xr, k, pan, ps, pf); break;
					}
				} else {
					switch (R) {
						TILE_R(1, 12) TILE_R(1, 11) TILE_R(1, 10) TILE_R(1, 9) TILE_R(1, 8)
						TILE_R(1, 7) TILE_R(1, 6) TILE_R(1, 5) TILE_R(1, 4) TILE_R(1, 3)
						TILE_R(1, 2)
					default: tile(1, 1, o, ldo, xr, k, pan, ps, pf); break;
					}
				}
#undef TILE_R
				pf = NULL;
				r += R;
			}
			p += NP;
		}
	}
}

#else

int pm_f16_panel_ok(const pm_weight *w)
{
	(void)w;
	return 0;
}

void pm_mv_f16_panel(float *out, const float *x, const pm_weight *w, int m0, int m1)
{
	(void)out, (void)x, (void)w, (void)m0, (void)m1;
}

void pm_mm_f16_panel(float *out, size_t ldo, const float *x, const pm_weight *w, int n, int m0,
		     int m1)
{
	(void)out, (void)ldo, (void)x, (void)w, (void)n, (void)m0, (void)m1;
}

#endif
