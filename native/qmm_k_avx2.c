/*
 * qmm_k_avx2.c: the AVX2 batch path (n > 1 activation rows: prefill and
 * batched decode) of the K-quants, Q4_K, Q5_K and Q6_K, without horizontal
 * sums (qmm_k.c's AVX2 kernels call it for batches; batch 1 stays there).
 *
 * The integers and the float step are qmm_k.c's (its top comment): per
 * output and super-block, sumi = sum over scale groups s of scale[s] *
 * (q_w[s] . q_x[s]) and summ = sum over 16-groups of corr * bsums, then
 * one float32 step (add_k / add_6). What differs is how the sums are
 * reached. The tile qmm_k.c had for batches (4 weight rows x 2 activation
 * rows, one row's 32 codes per register) took every vpmaddubsw to int32
 * at once with a vpmaddwd against its group's scales and summed each
 * output's 8 lanes with vphaddd: two multiplies per 32 products. Here, as
 * in qmm_32_avx2.c, a tile of 8 weight rows of one super-block is
 * interleaved so that 32-bit lane i of q[k] holds row i's codes of
 * elements 4k .. 4k+3, and the activation's 4 codes of those elements,
 * broadcast, meet all 8 rows at once: vpmaddubsw gives each row's two
 * pair sums in its lane's int16 halves, a group's products are added in
 * int16, and one vpmaddwd against the group's scale (the same int16 in
 * both halves of row i's lane) gives scale * dot in each row's own lane.
 * The int16 runs never saturate (activation codes are within +-127,
 * actquant.h): Q4_K codes are at most 15, a pair 2 * 15 * 127 = 3810 and
 * a run of 8 dwords (a 32-group) 30480; Q5_K's at most 31, a pair 7874,
 * so runs of 4 dwords (31496) and two vpmaddwd per group; Q6_K's at most
 * 63, a pair 16002, runs of 2 (32004) and two vpmaddwd per 16-group. A
 * super-block of 8 outputs then takes 64 vpmaddubsw and 8 (Q4_K), 16
 * (Q5_K) or 32 (Q6_K) vpmaddwd for sumi, against 128 multiplies before
 * (and 8 vphaddd-based sums). summ takes one vpmaddwd
 * per pair of 16-groups: lane i of corr[p] holds row i's corr[2p],
 * corr[2p+1] as int16 and meets the activation's bsums[2p], bsums[2p+1]
 * broadcast as one dword. The sums are exact and the float step is
 * add_k / add_6 on 8 lanes, so every output is bitwise what the decode
 * path and the portable kernels give, whatever n, the tile or the split
 * (test_qmm_k.c checks it).
 *
 * A tile is unpacked once per super-block and pass of up to KR activation
 * rows into a 2.9 KiB stack buffer (L1) and used by every row of the
 * pass, four at a time so the integer sums stay in registers; the next
 * tile's rows are prefetched a share per super-block.
 *
 * Measured (AMD EPYC Zen 3, pmbench -kernel avx2, default Q4_K_M, medians
 * of alternating runs against the old tile, a loaded machine): prefill 256
 * at one thread 1.37x. Tried and dropped: pairs of tiles (16 weight rows)
 * against 2 rows of x, each broadcast feeding both: gcc spilled the 8
 * chains and it measured 0.87x.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#include "actquant.h"
#include "qmm_k_avx2.h"
#include "qmm_transpose.h"
#include "kx8.h"

#define KA_ATTR __attribute__((target("avx2,fma,f16c")))
#define KA_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define KA_UNROLL _Pragma("GCC unroll 16")

/* KT: weight rows per tile (the lanes of a ymm register); KR: activation
 * rows per pass (their accumulators, and their quantized rows in L2) */
enum { KT = 8, KR = 64 };

enum { KQ4, KQ5, KQ6 };

/* a 32-bit load of activation codes or bsums that may alias their arrays */
typedef int32_t __attribute__((may_alias, aligned(1))) ka_i32;

/* ktile: one super-block of 8 weight rows, interleaved */
typedef struct {
	__m256i q[64];   /* lane i: row i's codes of elements 4k .. 4k+3 */
	__m256i sc[16];  /* lane i: row i's scale of group s in both int16 halves (Q4_K, Q5_K: 8
			  * groups of 32 elements; Q6_K: 16 of 16) */
	__m256i corr[8]; /* lane i: row i's int16 corr of 16-groups 2p (low half) and 2p+1 */
	__m256 d, dmin;
} ktile;

/* load8t: the 32 bytes at offset off of each block b[i], transposed:
 * lane i of o[k] holds bytes 4k .. 4k+3 of b[i] + off */
KA_INLINE void load8t(__m256i o[8], const uint8_t *const b[8], size_t off)
{
	__m256i r[8];
	KA_UNROLL for (int i = 0; i < 8; i++)
		r[i] = _mm256_loadu_si256((const __m256i *)(b[i] + off));
	pm_transpose8x32(o, r);
}

/* load8x16t: the 16 bytes at offset off of each block as 4 dwords: lane
 * i of o[w] holds dword w of b[i] + off (rows i and i + 4 share a load's
 * register, then a 4 x 4 transpose in each 128-bit half) */
KA_INLINE void load8x16t(__m256i o[4], const uint8_t *const b[8], size_t off)
{
	__m256i r[4];
	KA_UNROLL for (int i = 0; i < 4; i++)
		r[i] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(b[i + 4] + off)),
					_mm_loadu_si128((const __m128i *)(b[i] + off)));
	__m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
	__m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
	o[0] = _mm256_unpacklo_epi64(t0, t2), o[1] = _mm256_unpackhi_epi64(t0, t2);
	o[2] = _mm256_unpacklo_epi64(t1, t3), o[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* pair16: the int32 lanes a (low int16 half) and b (high half) */
KA_INLINE __m256i pair16(__m256i a, __m256i b)
{
	return _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(b, 16));
}

/* half8: the F16 at offset off of each block b[i], as float in lane i */
KA_INLINE __m256 half8(const uint8_t *const b[8], size_t off)
{
	uint16_t h[8];
	KA_UNROLL for (int i = 0; i < 8; i++)
		memcpy(&h[i], b[i] + off, 2);
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* kunpack: the tile of the 8 blocks b[i] (block layouts: quant_k.c), or,
 * x8 not NULL, of the super-block x8 of a tile in PM_LAYOUT_KX8 (kx8.h:
 * the same words, already in their lanes, so nothing is transposed). The
 * scale bytes are transposed as stored (one row per lane) and decoded on
 * all 8 rows at once, by kscales' rule (qmm_k.c): 32-group j < 4 has sc =
 * byte j of u0 & 63, m = byte j of u1 & 63; 4 + j has sc = (byte j of u2)
 * & 15 | (byte j of u0) >> 6 << 4 and m = (byte j of u2) >> 4 | (byte j
 * of u1) >> 6 << 4, u0..u2 the scale words. */
KA_INLINE void kunpack(const int K, ktile *t, const uint8_t *const b[8], const uint8_t *x8)
{
	const __m256i m15 = _mm256_set1_epi8(15);
	__m256i sv[4], q[8];
	if (K == KQ6) {
		if (x8) {
			t->d = t->dmin = pm_kx8_q6_d(x8);
			KA_UNROLL for (int w = 0; w < 4; w++)
				sv[w] = pm_kx8_vec(x8, 48 + w);
		} else {
			t->d = t->dmin = half8(b, 208);
			load8x16t(sv, b, 192); /* lane i of sv[w]: scales 4w .. 4w+3 of row i */
		}
		__m256i s32[16];
		KA_UNROLL for (int s = 0; s < 16; s++) {
			s32[s] = _mm256_srai_epi32(_mm256_slli_epi32(sv[s / 4], 24 - 8 * (s % 4)), 24);
			t->sc[s] = pair16(s32[s], s32[s]);
		}
		KA_UNROLL for (int p = 0; p < 8; p++)
			t->corr[p] = pair16(_mm256_slli_epi32(s32[2 * p], 5), _mm256_slli_epi32(s32[2 * p + 1], 5));
		const __m256i m3 = _mm256_set1_epi8(3);
		KA_UNROLL for (int c = 0; c < 2; c++) {
			__m256i l0[8], l1[8];
			if (x8) {
				KA_UNROLL for (int k = 0; k < 8; k++) {
					l0[k] = pm_kx8_vec(x8, 16 * c + k);
					l1[k] = pm_kx8_vec(x8, 16 * c + 8 + k);
					q[k] = pm_kx8_vec(x8, 32 + 8 * c + k);
				}
			} else {
				load8t(l0, b, 64 * (size_t)c);
				load8t(l1, b, 64 * (size_t)c + 32);
				load8t(q, b, 128 + 32 * (size_t)c);
			}
			KA_UNROLL for (int k = 0; k < 8; k++) {
				__m256i h = q[k], *o = t->q + 32 * c + k;
				o[0] = _mm256_or_si256(_mm256_and_si256(l0[k], m15),
						       _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
				o[8] = _mm256_or_si256(_mm256_and_si256(l1[k], m15),
						       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
				o[16] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0[k], 4), m15),
							_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
				o[24] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1[k], 4), m15),
							_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
			}
		}
		return;
	}
	if (x8) {
		pm_kx8_q4_d(x8, &t->d, &t->dmin);
		KA_UNROLL for (int w = 1; w < 4; w++)
			sv[w] = pm_kx8_vec(x8, w);
	} else {
		t->d = half8(b, 0);
		t->dmin = half8(b, 2);
		load8x16t(sv, b, 0); /* sv[1..3]: the scale words u0, u1, u2 */
	}
	const __m256i m63 = _mm256_set1_epi32(63), m30 = _mm256_set1_epi32(0x30), m0f = _mm256_set1_epi32(15);
	KA_UNROLL for (int j = 0; j < 4; j++) {
		__m256i sc = _mm256_and_si256(_mm256_srli_epi32(sv[1], 8 * j), m63);
		__m256i m = _mm256_and_si256(_mm256_srli_epi32(sv[2], 8 * j), m63);
		t->sc[j] = pair16(sc, sc);
		t->corr[j] = pair16(m, m);
		sc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sv[3], 8 * j), m0f),
				     _mm256_and_si256(_mm256_srli_epi32(sv[1], 8 * j + 2), m30));
		m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sv[3], 8 * j + 4), m0f),
				    _mm256_and_si256(_mm256_srli_epi32(sv[2], 8 * j + 2), m30));
		t->sc[4 + j] = pair16(sc, sc);
		t->corr[4 + j] = pair16(m, m);
	}
	/* qs chunk c: the low nibbles of bytes l are elements 64c + l, the
	 * high ones 64c + 32 + l; Q5_K's bit 2c (2c + 1) of qh byte l is the
	 * fifth bit of the first (second) */
	__m256i hb[8];
	if (K == KQ5)
		load8t(hb, b, 16);
	const size_t qs = K == KQ5 ? 48 : 16;
	const __m256i m16 = _mm256_set1_epi8(16);
	KA_UNROLL for (int c = 0; c < 4; c++) {
		if (x8) {
			KA_UNROLL for (int k = 0; k < 8; k++)
				q[k] = pm_kx8_vec(x8, 4 + 8 * c + k);
		} else {
			load8t(q, b, qs + 32 * (size_t)c);
		}
		KA_UNROLL for (int k = 0; k < 8; k++) {
			__m256i lo = _mm256_and_si256(q[k], m15), hi = _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m15);
			if (K == KQ5) {
				__m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c))), b1 = _mm256_set1_epi8((char)(2 << (2 * c)));
				lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb[k], b0), b0), m16));
				hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb[k], b1), b1), m16));
			}
			t->q[16 * c + k] = lo;
			t->q[16 * c + 8 + k] = hi;
		}
	}
}

/* krows: the super-block's term for the tile and R activation rows x[r]
 * (add_k / add_6 on acc[r], lane i weight row i). H: dwords per int16 run
 * (see the top); G: dwords per scale group. */
KA_INLINE void krows(const int K, const int R, __m256 *acc, const ktile *t, const pm_act256 *const x[])
{
	const int H = K == KQ4 ? 8 : K == KQ5 ? 4 : 2, G = K == KQ6 ? 4 : 8;
	__m256i si[4], sm[4];
	KA_UNROLL for (int r = 0; r < R; r++)
		si[r] = sm[r] = _mm256_setzero_si256();
	/* one run per iteration, not unrolled: unrolled, gcc moved the
	 * broadcasts ahead of their use and spilled them */
	_Pragma("GCC unroll 1") for (int k0 = 0; k0 < 64; k0 += H) {
		__m256i s16[4];
		KA_UNROLL for (int r = 0; r < R; r++)
			s16[r] = _mm256_setzero_si256();
		KA_UNROLL for (int k = k0; k < k0 + H; k++) {
			__m256i w = _mm256_load_si256(&t->q[k]);
			KA_UNROLL for (int r = 0; r < R; r++) {
				__m256i xv = _mm256_set1_epi32(*(const ka_i32 *)(x[r]->q + 4 * k));
				s16[r] = _mm256_add_epi16(s16[r], _mm256_maddubs_epi16(w, xv));
				/* each run one chain in a register: without this gcc
				 * reassociated the adds into a tree, computed every
				 * vpmaddubsw of the run first and spilled them */
				__asm__("" : "+x"(s16[r]));
			}
		}
		__m256i sc = _mm256_load_si256(&t->sc[k0 / G]);
		KA_UNROLL for (int r = 0; r < R; r++)
			si[r] = _mm256_add_epi32(si[r], _mm256_madd_epi16(s16[r], sc));
	}
	KA_UNROLL for (int p = 0; p < 8; p++) {
		__m256i c = _mm256_load_si256(&t->corr[p]);
		KA_UNROLL for (int r = 0; r < R; r++) {
			__m256i bs = _mm256_set1_epi32(*(const ka_i32 *)(x[r]->bsums + 2 * p));
			sm[r] = _mm256_add_epi32(sm[r], _mm256_madd_epi16(c, bs));
		}
	}
	KA_UNROLL for (int r = 0; r < R; r++) {
		__m256 dx = _mm256_set1_ps(x[r]->d), dd = _mm256_mul_ps(t->d, dx);
		if (K == KQ6) {
			acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(_mm256_sub_epi32(si[r], sm[r]))));
		} else {
			__m256 dm = _mm256_mul_ps(t->dmin, dx);
			acc[r] = _mm256_add_ps(acc[r], _mm256_sub_ps(_mm256_mul_ps(dd, _mm256_cvtepi32_ps(si[r])),
								     _mm256_mul_ps(dm, _mm256_cvtepi32_ps(sm[r]))));
		}
	}
}

/* batch: weight rows [m0, m1) in tiles of 8 (a short last tile repeats
 * its last row; those lanes are computed and dropped) against the n
 * activation rows at xq, xs bytes apart, KR rows per pass */
KA_INLINE void batch(const int K, float *out, size_t ldo, const char *xq, size_t xs, const pm_weight *w, int n,
		     int m0, int m1)
{
	const size_t BB = K == KQ4 ? 144 : K == KQ5 ? 176 : 210;
	int nb = w->cols / 256;
	size_t rb = w->row_bytes;
	ktile t __attribute__((aligned(32)));
	__m256 acc[KR];
	for (int m = m0; m < m1; m += KT) {
		int nw = m1 - m < KT ? m1 - m : KT;
		const uint8_t *row[KT];
		KA_UNROLL for (int i = 0; i < KT; i++)
			row[i] = pm_weight_row(w, m + (i < nw ? i : nw - 1));
		/* a tile of PM_LAYOUT_KX8 (kx8.h): its super-blocks in order */
		const uint8_t *x8 = K != KQ5 && w->layout == PM_LAYOUT_KX8 ? row[0] : NULL;
		/* the next tile's bytes (rows are contiguous), a share per
		 * super-block of the first pass */
		const char *next = (const char *)row[0] + KT * rb;
		size_t share = (KT * rb + (size_t)nb - 1) / (size_t)nb;
		int prefetch = m + KT < m1;
		for (int r0 = 0; r0 < n; r0 += KR) {
			int nr = n - r0 < KR ? n - r0 : KR;
			const char *xc = xq + (size_t)r0 * xs;
			for (int r = 0; r < nr; r++)
				acc[r] = _mm256_setzero_ps();
			for (int b = 0; b < nb; b++) {
				if (prefetch && r0 == 0)
					for (size_t o = 0; o < share; o += 64)
						_mm_prefetch(next + (size_t)b * share + o, _MM_HINT_T0);
				const uint8_t *blk[KT];
				KA_UNROLL for (int i = 0; i < KT; i++)
					blk[i] = row[i] + BB * (size_t)b;
				kunpack(K, &t, blk, x8 ? x8 + KT * BB * (size_t)b : NULL);
				const pm_act256 *x[4];
				int r = 0;
				for (; r + 4 <= nr; r += 4) {
					KA_UNROLL for (int i = 0; i < 4; i++)
						x[i] = (const pm_act256 *)(xc + (size_t)(r + i) * xs) + b;
					krows(K, 4, acc + r, &t, x);
				}
				if (r + 2 <= nr) {
					KA_UNROLL for (int i = 0; i < 2; i++)
						x[i] = (const pm_act256 *)(xc + (size_t)(r + i) * xs) + b;
					krows(K, 2, acc + r, &t, x);
					r += 2;
				}
				if (r < nr) {
					x[0] = (const pm_act256 *)(xc + (size_t)r * xs) + b;
					krows(K, 1, acc + r, &t, x);
				}
			}
			for (int r = 0; r < nr; r++) {
				float *o = out + (size_t)(r0 + r) * ldo + m;
				if (nw == KT) {
					_mm256_storeu_ps(o, acc[r]);
				} else {
					float v[KT];
					_mm256_storeu_ps(v, acc[r]);
					memcpy(o, v, sizeof(float) * (size_t)nw);
				}
			}
		}
	}
}

/* the batch kernel of each type (qmm_k_avx2.h) */
#define KA_BATCH(name, K)                                                                                        \
	KA_ATTR void name(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0, \
			  int m1)                                                                                \
	{                                                                                                        \
		batch(K, out, ldo, xq, xs, w, n, m0, m1);                                                        \
	}
KA_BATCH(pm_qmm_q4_k_avx2_batch, KQ4)
KA_BATCH(pm_qmm_q5_k_avx2_batch, KQ5)
KA_BATCH(pm_qmm_q6_k_avx2_batch, KQ6)
#undef KA_BATCH
#else
typedef int pm_qmm_k_avx2_empty; /* ISO C wants a declaration */
#endif
