/*
 * qmm_32_avx2.c: the AVX2 batch path (n > 1 activation rows: prefill and
 * batched decode) of the 4-bit 32-block types, Q4_0 and Q4_1, without
 * horizontal sums (qmm_32.c picks it for PM_ISA_AVX2; decode stays in
 * qmm_32_x86.h).
 *
 * The old AVX2 tile (qmm_32_x86.h's tile: 4 weight rows x 4 activation
 * rows) took each output's 8 int32 lanes per block to one sum with
 * vphaddd, several uops each on Zen 3, and spilled its accumulators:
 * prefill spent its time on lane sums, not multiplies. Here, as in the
 * VNNI batch path, a tile of 8 weight rows is interleaved per block so
 * that 32-bit lane i holds 4 codes of row i (g[j]: elements 4j .. 4j+3),
 * and the activation's 4 codes of group j, broadcast, meet every row at
 * once: vpmaddubsw gives each row's two pair sums in its lane's two int16
 * halves, the 8 groups are added in int16 and one vpmaddwd against ones
 * gives each row's S in its own lane. No int16 step saturates: a pair is
 * at most 2 * 15 * 128 = 3840 and a lane adds 8 pairs (30720 < 32767), so
 * S is exact; the float steps per block are qmm_32_x86.h's (y =
 * fmadd(d_w * d_x, float(S), y), z = fmadd(m', s_x, z), out y + z), so
 * every output is bitwise what the decode path and the other builds give,
 * whatever n, the tile or the split (test_quant.c checks it).
 *
 * The 8 rows' codes of a k-chunk of KB blocks are interleaved once into a
 * 5 KiB stack buffer (L1) and shared by every activation row of the chunk,
 * 4 rows at a time so the int16 sums and float accumulators stay in
 * registers; the next tile's rows are prefetched block by block.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#include "actquant.h"
#include "qmm_32_avx2.h"

#define A2_ATTR __attribute__((target("avx2,fma,f16c")))
#define A2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define A2_UNROLL _Pragma("GCC unroll 8")

/* KB: blocks per k-chunk (8 rows x KB blocks of codes, 4 KiB, stay in L1);
 * WT: weight rows per tile (the lanes of a ymm register); XCHUNK:
 * activation rows per pass (their quantized rows stay in L2) */
enum { KB = 16, WT = 8, XCHUNK = 64 };

/* a 32-bit load of 4 activation codes that may alias the int8 array */
typedef int32_t __attribute__((may_alias, aligned(1))) a2_i32;

/* wblock: block j of the 8 weight rows wr (bb bytes a block, codes at qo)
 * interleaved: g[j] < 4 is 32-bit word j of each row's qs masked to its
 * low nibbles (elements 4j .. 4j+3), g[j + 4] the high nibbles (elements
 * 16+4j ..); dw the scales, mw the min terms (m_w for Q4_1, -8 * d_w for
 * Q4_0: exact, a power of two times d_w) */
A2_INLINE void wblock(const int MIN, __m256i g[8], __m256 *dw, __m256 *mw, const uint8_t *const wr[8], size_t off)
{
	const int qo = MIN ? 4 : 2;
	uint16_t hd[8], hm[8];
	__m256i r[4];
	A2_UNROLL for (int i = 0; i < 8; i++) {
		memcpy(&hd[i], wr[i] + off, 2);
		memcpy(&hm[i], wr[i] + off + 2, 2);
	}
	A2_UNROLL for (int i = 0; i < 4; i++)
		r[i] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(wr[i + 4] + off + qo)),
					_mm_loadu_si128((const __m128i *)(wr[i] + off + qo)));
	__m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
	__m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
	__m256i v[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
			_mm256_unpackhi_epi64(t1, t3)};
	const __m256i m = _mm256_set1_epi8(15);
	A2_UNROLL for (int j = 0; j < 4; j++) {
		g[j] = _mm256_and_si256(v[j], m);
		g[j + 4] = _mm256_and_si256(_mm256_srli_epi16(v[j], 4), m);
	}
	*dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hd));
	*mw = MIN ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hm)) : _mm256_mul_ps(*dw, _mm256_set1_ps(-8.0f));
}

/* rows: R activation rows (xs bytes apart, blocks k0 ..) against the
 * chunk's kn interleaved blocks, their accumulators y, z updated in block
 * order */
A2_INLINE void rows(const int R, __m256 *y, __m256 *z, const __m256i g[KB][8], const __m256 *dw, const __m256 *mw,
		    const char *xq, size_t xs, int k0, int kn)
{
	__m256 yr[R], zr[R];
	A2_UNROLL for (int r = 0; r < R; r++)
		yr[r] = y[r], zr[r] = z[r];
	const __m256i ones = _mm256_set1_epi16(1);
	for (int b = 0; b < kn; b++) {
		const pm_act32 *a[R];
		__m256i s[R];
		A2_UNROLL for (int r = 0; r < R; r++) {
			a[r] = (const pm_act32 *)(xq + (size_t)r * xs) + k0 + b;
			s[r] = _mm256_setzero_si256();
		}
		A2_UNROLL for (int j = 0; j < 8; j++) {
			__m256i gj = _mm256_load_si256(&g[b][j]);
			A2_UNROLL for (int r = 0; r < R; r++) {
				__m256i x = _mm256_set1_epi32(*(const a2_i32 *)(a[r]->q + 4 * j));
				s[r] = _mm256_add_epi16(s[r], _mm256_maddubs_epi16(gj, x));
			}
		}
		A2_UNROLL for (int r = 0; r < R; r++) {
			__m256 si = _mm256_cvtepi32_ps(_mm256_madd_epi16(s[r], ones));
			yr[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw[b], _mm256_set1_ps(a[r]->d)), si, yr[r]);
			zr[r] = _mm256_fmadd_ps(mw[b], _mm256_set1_ps(a[r]->s), zr[r]);
		}
	}
	A2_UNROLL for (int r = 0; r < R; r++)
		y[r] = yr[r], z[r] = zr[r];
}

/* tile8: outputs of weight rows w .. w + nw - 1 (nw <= 8, rb bytes apart;
 * a short tile repeats its last row and stores nw outputs) against the n
 * (<= XCHUNK) activation rows at xq. Block j of the next tile (the bytes
 * after these) is prefetched with block j of this one: the hardware
 * prefetcher does not follow 8 interleaved row streams. */
A2_INLINE void tile8(const int MIN, float *out, size_t ldo, const uint8_t *w, size_t rb, int nw, const char *xq,
		     size_t xs, int n, int nb)
{
	const int BB = MIN ? 20 : 18;
	__m256i g[KB][8];
	__m256 dw[KB], mw[KB], y[XCHUNK], z[XCHUNK];
	const uint8_t *wr[WT];
	A2_UNROLL for (int i = 0; i < WT; i++)
		wr[i] = w + (size_t)(i < nw ? i : nw - 1) * rb;
	for (int r = 0; r < n; r++)
		y[r] = z[r] = _mm256_setzero_ps();
	const char *nx = (const char *)w + WT * rb;
	for (int k0 = 0; k0 < nb; k0 += KB) {
		int kn = nb - k0 < KB ? nb - k0 : KB;
		for (int b = 0; b < kn; b++) {
			size_t off = (size_t)(k0 + b) * BB;
			for (int o = 0; o < WT * BB; o += 64)
				_mm_prefetch(nx + WT * off + o, _MM_HINT_T0);
			wblock(MIN, g[b], &dw[b], &mw[b], wr, off);
		}
		int r = 0;
		for (; r + 4 <= n; r += 4)
			rows(4, y + r, z + r, g, dw, mw, xq + (size_t)r * xs, xs, k0, kn);
		if (r + 2 <= n) {
			rows(2, y + r, z + r, g, dw, mw, xq + (size_t)r * xs, xs, k0, kn);
			r += 2;
		}
		if (r < n)
			rows(1, y + r, z + r, g, dw, mw, xq + (size_t)r * xs, xs, k0, kn);
	}
	for (int r = 0; r < n; r++) {
		float *o = out + (size_t)r * ldo;
		__m256 v = _mm256_add_ps(y[r], z[r]);
		if (nw == WT) {
			_mm256_storeu_ps(o, v);
		} else {
			float t[WT];
			_mm256_storeu_ps(t, v);
			for (int i = 0; i < nw; i++)
				o[i] = t[i];
		}
	}
}

A2_INLINE void batch(const int MIN, float *out, size_t ldo, const char *x, size_t xs, const pm_weight *w, int n,
		     int m0, int m1)
{
	int nb = w->cols / 32;
	size_t rb = w->row_bytes;
	for (int r0 = 0; r0 < n; r0 += XCHUNK) {
		int rn = n - r0 < XCHUNK ? n - r0 : XCHUNK;
		for (int m = m0; m < m1; m += WT)
			tile8(MIN, out + (size_t)r0 * ldo + m, ldo, pm_weight_row(w, m), rb, m1 - m < WT ? m1 - m : WT,
			      x + (size_t)r0 * xs, xs, rn, nb);
	}
}

A2_ATTR void pm_qmm_q4_0_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n,
				    int m0, int m1)
{
	batch(0, out, ldo, xq, xs, w, n, m0, m1);
}

A2_ATTR void pm_qmm_q4_1_avx2_batch(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n,
				    int m0, int m1)
{
	batch(1, out, ldo, xq, xs, w, n, m0, m1);
}
#else
typedef int pm_qmm_32_avx2_empty; /* ISO C wants a declaration */
#endif
