/*
 * qmm_k_vnni.c: the K-quant (Q4_K, Q5_K, Q6_K) kernels of CPUs with
 * AVX512-VNNI with VL and BW, which pm_qmm_k (qmm_k.c) picks there in
 * place of the plain AVX2 set's: batch 1 on matrices in rows with pairdot
 * (direct4, vqmv; batch 1 on tiles of 8 rows, kx8.h, stays qmv_k_avx2.c's)
 * and batches with kqmm_vnni's vpdpbusd tiles (where the AVX2 set has
 * qmm_k_avx2.c's). x86-64 only; qmm_k_vnni.h declares the kernels. The
 * batch-1 path is compiled for AVX2 and writes its VNNI instructions as
 * inline assembly (dpacc, dpbz), the batch path is compiled for the VNNI
 * target with each scale group's chains one asm statement (kchain). The
 * integer sums and the float step per super-block are qmm_k.c's (its top
 * comment), so every output is bitwise what the portable and AVX2 kernels
 * give, whatever n, the tile or the split (test_qmm_k.c checks it).
 *
 * Batch 1 began as the AVX2 set's: four weight rows decoded straight into
 * registers, prefetching the next four, with madd + add one vpdpwssd
 * (dpacc) where the CPU has AVX512-VNNI with VL. Then batch 1 on VNNI
 * CPUs took vpdpbusd on the codes as they are and one vpdpwssd per two
 * groups' sums (pairdot): 1376 x 512, one thread, GMAC/s, Q4_K 36.6 ->
 * 39.2, Q5_K 25.6 -> 26.4, Q6_K 28.5 -> 31.6; and Q4_K/Q5_K decoded two
 * rows' scales per register and took the mins against pair sums of bsums
 * (direct4): Q4_K 38.8 -> 41.8 (the plain AVX2 path, with the unrolled
 * prefetches too: 31.4 -> 35.0), Q5_K 26.1 -> 27.2. Batch 1 without VNNI
 * has since moved to qmv_k_avx2.c (Q4_K on 8 interleaved rows); direct4
 * and vqmv here are the VNNI CPUs' batch-1 path for Q5_K and for matrices
 * in rows. Q4_K and Q6_K in tiles of 8 rows (kx8.h, as every x86 engine
 * now computes them) take qmv_k_avx2.c's tile kernels at batch 1 on VNNI
 * CPUs too, and kqmm_vnni reads the tiles' words as they are (tload):
 * llama-3.2-1b Q4_K_M decode at one thread, alternating pmbench on AMD
 * EPYC Zen 4, 1.41x against these rows (22.9 -> 32.3 tokens/s).
 *
 * Batches on AVX512-VNNI CPUs take kqmm_vnni (below): vpdpbusd on tiles
 * of 8 interleaved weight rows. Against the vpdpwssd tiles (1376 x 512,
 * one thread, CPU time of the kernel alone, GMAC/s): Q4_K 60 -> 78 at 8
 * rows, 69 -> 91 at 16, 77 -> 101 at 64; Q5_K 55 -> 74, 65 -> 87, 74 ->
 * 99; Q6_K 53 -> 68, 63 -> 82, 74 -> 95. The default Q4_K_M model
 * (pmbench, one thread, process CPU time, medians of 7 alternating runs):
 * batched decode at 8 1.18x, at 16 1.21x, prefill 256 1.14x.
 *
 * Then kqmm_vnni took pairs of those tiles (16 weight rows) against four
 * rows of x, each broadcast activation dword feeding both tiles, with each
 * scale group's chains written as one asm statement (kchain says why), the
 * scales transposed as stored and decoded on 8 rows at once, and Q4_K's
 * nibbles taken in the dot product instead of stored: same measure, GMAC/s
 * at 8, 16, 64 rows: Q4_K 76 -> 117, 85 -> 131, 98 -> 140; Q5_K 71 -> 96,
 * 81 -> 114, 94 -> 137; Q6_K 65 -> 86, 74 -> 106, 85 -> 129.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <limits.h>
#include <string.h>

#include "actquant.h"
#include "kscales_avx2.h"
#include "kx8.h"
#include "qmm_k_vnni.h"
#include "qmv_k_avx2.h"
#include "qmv_k_rows.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

enum { K_Q4, K_Q5, K_Q6 };

enum {
	NR = 64, /* rows of x per pass over a tile (kqmm_vnni's accumulators) */
};

/* hsum4 returns the 4 horizontal sums of a, b, c, d (int32, exact). */
AVX2_INLINE __m128i hsum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
	__m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
	return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/* dpacc returns a + madd(p, s) (pairs of int16 products summed into int32
 * lanes, exact in our ranges). With vnni (AVX512-VNNI with VL, checked at
 * run time by pm_qmm_k) that is one instruction, vpdpwssd, on ymm
 * registers: the same integers, one uop fewer per 32 elements. It is
 * written as inline assembly so the kernels stay compiled for AVX2 and
 * the instruction only runs where the CPU has it. */
AVX2_INLINE __m256i dpacc(__m256i a, __m256i p, __m256i s, int vnni)
{
	if (vnni) {
		__asm__("%{evex%} vpdpwssd %2, %1, %0" : "+v"(a) : "v"(p), "vm"(s));
		return a;
	}
	return _mm256_add_epi32(a, _mm256_madd_epi16(p, s));
}

/* finish4 is add_k / add_6 on 4 lanes (the same float32 operations). */
AVX2_INLINE __m128 finish4(__m128 acc, __m128i sumi, __m128i summ, __m128 d, __m128 dmin, float x_d, int kind)
{
	__m128 dx = _mm_set1_ps(x_d), dd = _mm_mul_ps(d, dx);
	if (kind == K_Q6)
		return _mm_add_ps(acc, _mm_mul_ps(dd, _mm_cvtepi32_ps(_mm_sub_epi32(sumi, summ))));
	__m128 dm = _mm_mul_ps(dmin, dx);
	return _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(dd, _mm_cvtepi32_ps(sumi)), _mm_mul_ps(dm, _mm_cvtepi32_ps(summ))));
}

/*
 * The batch-1 path: four weight rows at a time decoded straight into
 * registers, 64 elements at a time against the same x codes, no buffer;
 * the integer sums and the float step are those of every other path, so
 * a row alone gives bitwise what it gives in a batch.
 */

/* PAIR(s, p): int16 words 0..3 of each lane = word 2p of s's lane, words
 * 4..7 = word 2p+1: the scales of the two groups that a packs_epi32 of two
 * dpbusd sums puts there (pairdot) */
#define PAIR(s, p)                                                                                  \
	_mm256_shuffle_epi8((s), _mm256_set_epi64x((long long)((0x302u + 0x404u * (p)) * 0x0001000100010001ull), \
						   (long long)((0x100u + 0x404u * (p)) * 0x0001000100010001ull), \
						   (long long)((0x302u + 0x404u * (p)) * 0x0001000100010001ull), \
						   (long long)((0x100u + 0x404u * (p)) * 0x0001000100010001ull)))

/* pairdot (the batch-1 path with vnni 2): vpdpbusd takes 32 unsigned
 * codes against 32 activation codes straight to 8 int32 sums of 4
 * products (|sum| <= 4 * 63 * 127 = 32004, so they fit in int16); a
 * packs_epi32 of two of them (w0 . x0 and w1 . x1) puts, per 128-bit lane,
 * the 4 sums of x0 in words 0..3 and those of x1 in words 4..7, and one
 * vpdpwssd against sc (PAIR) multiplies each by its group's scale and adds
 * into a: 4 uops per 64 products where maddubs + shuffle + dpwssd take 6.
 * The integers are exactly sumi's (sums of products, in any order),
 * so the float step and the result are too. */
AVX2_INLINE __m256i dpbz(__m256i w, __m256i x)
{
	__m256i a = _mm256_setzero_si256();
	__asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(a) : "v"(w), "vm"(x));
	return a;
}

AVX2_INLINE __m256i pairdot(__m256i a, __m256i w0, __m256i x0, __m256i w1, __m256i x1, __m256i sc)
{
	return dpacc(a, _mm256_packs_epi32(dpbz(w0, x0), dpbz(w1, x1)), sc, 1);
}

/* q6scales_v: Q6_K's 16 int8 scales as int16, the even ones in the low
 * lane and the odd ones in the high lane (for PAIR), and corr = 32 * scale
 * in element order. */
AVX2_INLINE __m256i q6scales_v(const uint8_t *b, __m256i *corr)
{
	__m128i s8 = _mm_loadu_si128((const __m128i *)(b + 192));
	*corr = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 5);
	__m128i eo = _mm_shuffle_epi8(s8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
	return _mm256_cvtepi8_epi16(eo);
}

AVX2_INLINE int load16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

AVX2_INLINE int load32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* direct4: the super-block's term for 4 weight rows b[0..3] and x, with
 * pairdot (the batch-1 path of AVX512-VNNI CPUs; the AVX2 one is in
 * qmv_k_avx2.c). */
AVX2_INLINE void direct4(__m128 *acc, const uint8_t *const b[4], const pm_act256 *x, int kind)
{
	__m256i a[4], s[4];
	__m128 d, dmin;
	__m128i summ;
	const __m256i m15 = _mm256_set1_epi8(15);
	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		a[i] = _mm256_setzero_si256();
	if (kind == K_Q6) {
		__m256i corr[4];
		#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
			s[i] = q6scales_v(b[i], &corr[i]);
		__m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
		summ = hsum4(_mm256_madd_epi16(corr[0], bs), _mm256_madd_epi16(corr[1], bs),
			     _mm256_madd_epi16(corr[2], bs), _mm256_madd_epi16(corr[3], bs));
	} else {
		/* Q4_K, Q5_K: two rows' scales and mins decoded in one register
		 * (pm_kscales8x2); summ = sum over 32-groups g of min[g] times
		 * bsums[2g] + bsums[2g+1] (bs2, at most 2 * 16 * 127: int16),
		 * the same integer as the sum over 16-groups with corr */
		const __m256i z = _mm256_setzero_si256();
		__m256i k01 = pm_kscales8x2(b[0], b[1]), k23 = pm_kscales8x2(b[2], b[3]);
		__m256i sc01 = _mm256_unpacklo_epi8(k01, z), sc23 = _mm256_unpacklo_epi8(k23, z);
		s[0] = _mm256_permute4x64_epi64(sc01, 0x44);
		s[1] = _mm256_permute4x64_epi64(sc01, 0xee);
		s[2] = _mm256_permute4x64_epi64(sc23, 0x44);
		s[3] = _mm256_permute4x64_epi64(sc23, 0xee);
		__m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1));
		__m256i bs2 = _mm256_broadcastsi128_si256(
			_mm_packs_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
		/* lanes: row 0 | row 1 (v01), row 2 | row 3 (v23) */
		__m256i v01 = _mm256_madd_epi16(_mm256_unpackhi_epi8(k01, z), bs2);
		__m256i v23 = _mm256_madd_epi16(_mm256_unpackhi_epi8(k23, z), bs2);
		__m256i t = _mm256_hadd_epi32(v01, v23);
		t = _mm256_hadd_epi32(t, t); /* lanes: r0 r2 r0 r2 | r1 r3 r1 r3 */
		summ = _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
	}
	/* (the halves go through registers: four small stores read back as
	 * one vector stall on store forwarding) */
	if (kind == K_Q6) {
		__m128i hv = _mm_cvtsi32_si128(load16(b[0] + 208));
		hv = _mm_insert_epi16(hv, load16(b[1] + 208), 1);
		hv = _mm_insert_epi16(hv, load16(b[2] + 208), 2);
		hv = _mm_insert_epi16(hv, load16(b[3] + 208), 3);
		d = dmin = _mm_cvtph_ps(hv);
	} else {
		__m128i hv = _mm_cvtsi32_si128(load32(b[0]));
		hv = _mm_insert_epi32(hv, load32(b[1]), 1);
		hv = _mm_insert_epi32(hv, load32(b[2]), 2);
		hv = _mm_insert_epi32(hv, load32(b[3]), 3);
		/* d, dmin of each row */
		__m256 f = _mm256_cvtph_ps(hv);
		__m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
		d = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
		dmin = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
	}
	if (kind == K_Q6) {
		const __m256i m3 = _mm256_set1_epi8(3);
		#pragma GCC unroll 4
		for (int c = 0; c < 2; c++) {
			__m256i x0 = _mm256_loadu_si256((const __m256i *)(x->q + 128 * c));
			__m256i x1 = _mm256_loadu_si256((const __m256i *)(x->q + 128 * c + 32));
			__m256i x2 = _mm256_loadu_si256((const __m256i *)(x->q + 128 * c + 64));
			__m256i x3 = _mm256_loadu_si256((const __m256i *)(x->q + 128 * c + 96));
			#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				__m256i l0 = _mm256_loadu_si256((const __m256i *)(b[i] + 64 * c));
				__m256i l1 = _mm256_loadu_si256((const __m256i *)(b[i] + 64 * c + 32));
				__m256i h = _mm256_loadu_si256((const __m256i *)(b[i] + 128 + 32 * c));
				__m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m15),
							     _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
				__m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m15),
							     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
				__m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
							     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
				__m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
							     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
				a[i] = pairdot(a[i], q0, x0, q1, x1, PAIR(s[i], 2 * c));
				a[i] = pairdot(a[i], q2, x2, q3, x3, PAIR(s[i], 2 * c + 1));
			}
		}
	} else {
		const __m256i m16 = _mm256_set1_epi8(16);
		__m256i hb[4];
		if (kind == K_Q5)
			#pragma GCC unroll 4
			for (int i = 0; i < 4; i++)
				hb[i] = _mm256_loadu_si256((const __m256i *)(b[i] + 16));
		const uint8_t *qs[4];
		#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
			qs[i] = b[i] + (kind == K_Q5 ? 48 : 16);
		#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			__m256i x0 = _mm256_loadu_si256((const __m256i *)(x->q + 64 * c));
			__m256i x1 = _mm256_loadu_si256((const __m256i *)(x->q + 64 * c + 32));
			#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				__m256i v = _mm256_loadu_si256((const __m256i *)(qs[i] + 32 * c));
				__m256i lo = _mm256_and_si256(v, m15), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m15);
				if (kind == K_Q5) {
					__m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c)));
					__m256i b1 = _mm256_set1_epi8((char)(2 << (2 * c)));
					lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb[i], b0), b0), m16));
					hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb[i], b1), b1), m16));
				}
				a[i] = pairdot(a[i], lo, x0, hi, x1, PAIR(s[i], c));
			}
		}
	}
	*acc = finish4(*acc, hsum4(a[0], a[1], a[2], a[3]), summ, d, dmin, x->d, kind);
}

/* vqmv: n == 1 on AVX512-VNNI CPUs, rows four at a time, the next four
 * prefetched (qmv_k_rows.h) */
AVX2_INLINE void vqmv(float *out, const pm_act256 *x, const pm_weight *w, int m0, int m1, int kind, size_t bb)
{
	PM_QMV4_ROWS(out, x, w, m0, m1, bb, direct4(&acc, blk, x + b, kind));
}

/*
 * The VNNI batch path (n > 1 where the CPU has AVX512-VNNI with VL):
 * vpdpbusd multiplies unsigned bytes by signed bytes and adds each four
 * products into an int32 lane, and the K-quant codes are unsigned (at most
 * 63, no saturation anywhere). A tile of 8 weight rows of one super-block
 * is stored interleaved (kblk8: q[e/4] holds, in lane i, row i's codes of
 * elements e..e+3), so one vpdpbusd against the 4 activation codes of
 * elements e..e+3 broadcast to every lane adds those 4 products for all 8
 * rows: no horizontal sums. A group's sum (32 elements for Q4_K/Q5_K, 16
 * for Q6_K) then takes its scale by one vpmulld, and summ is 8 vpdpwssd
 * of the rows' int16 correction pairs against broadcast pairs of bsums.
 * The integers are exactly sumi and summ, and the float step is finish4's
 * on 8 lanes, so the results are bitwise those of the other paths. The
 * interleave is a dword transpose of the packed bytes (each dword of qs,
 * ql or qh holds 4 consecutive elements of one or two groups), done once
 * per tile and super-block and used by every row of x. kqmm_vnni runs two
 * such tiles (16 weight rows) against four rows of x at a time (kdot16xr):
 * a broadcast costs a load, and at 8 rows against 2 the two loads per
 * vpdpbusd held it at about half the vpdpbusd rate.
 */
#define VNNI __attribute__((target("avx2,fma,f16c,avx512vl,avx512vnni")))
#define VNNI_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c,avx512vl,avx512vnni")))

typedef struct {
	__m256i q[64];   /* lane i: row i's codes of elements 4k..4k+3 (Q4_K: q[8c + k] its
			  * packed bytes 4k..4k+3 of qs chunk c, elements 64c + 4k.. in the
			  * low nibbles, 64c + 32 + 4k.. in the high ones) */
	__m256i sc[16];  /* int32 scale per row: of 32-group g (Q4_K, Q5_K) or 16-group s (Q6_K) */
	__m256i corr[8]; /* lane i: row i's int16 corr[2p], corr[2p+1] */
	__m256 d, dmin;
} __attribute__((aligned(32))) kblk8;

/* tr8: o[k] lane i = r[i] lane k (8 x 8 dwords) */
VNNI_INLINE void tr8(__m256i o[8], const __m256i r[8])
{
	__m256i t[8], u[8];
#pragma GCC unroll 16
	for (int p = 0; p < 4; p++) {
		t[2 * p] = _mm256_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
		t[2 * p + 1] = _mm256_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
	}
#pragma GCC unroll 16
	for (int h = 0; h < 2; h++) {
		u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
		u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
	}
#pragma GCC unroll 16
	for (int k = 0; k < 4; k++) {
		o[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
		o[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
	}
}

/* load8t: the 32 bytes at offset off of each block, transposed */
VNNI_INLINE void load8t(__m256i o[8], const uint8_t *const b[8], size_t off)
{
	__m256i r[8];
#pragma GCC unroll 16
	for (int i = 0; i < 8; i++)
		r[i] = _mm256_loadu_si256((const __m256i *)(b[i] + off));
	tr8(o, r);
}

/* pair16: int16 a in the low half of each lane, b in the high half */
VNNI_INLINE __m256i pair16(__m256i a, __m256i b)
{
	return _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(b, 16));
}

/* load8x16t: the 16 bytes at offset off of each block as 4 dwords, o[w]
 * lane i holding dword w of row i (rows i and i + 4 share a load's
 * register, then a 4 x 4 transpose in each 128-bit half) */
VNNI_INLINE void load8x16t(__m256i o[4], const uint8_t *const b[8], size_t off)
{
	__m256i r[4], t[4];
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		r[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b[i] + off))),
					       _mm_loadu_si128((const __m128i *)(b[i + 4] + off)), 1);
	t[0] = _mm256_unpacklo_epi32(r[0], r[1]), t[1] = _mm256_unpackhi_epi32(r[0], r[1]);
	t[2] = _mm256_unpacklo_epi32(r[2], r[3]), t[3] = _mm256_unpackhi_epi32(r[2], r[3]);
	o[0] = _mm256_unpacklo_epi64(t[0], t[2]), o[1] = _mm256_unpackhi_epi64(t[0], t[2]);
	o[2] = _mm256_unpacklo_epi64(t[1], t[3]), o[3] = _mm256_unpackhi_epi64(t[1], t[3]);
}

/* tload: N (8: load8t, 4: load8x16t) vectors at offset off of the
 * blocks b, transposed, or with x8 (a super-block of a tile in
 * PM_LAYOUT_KX8, kx8.h) its vectors off / 4 .. off / 4 + N - 1: the same
 * words, already in their lanes */
VNNI_INLINE void tload(const int N, __m256i *o, const uint8_t *const b[8], const uint8_t *x8, size_t off)
{
	if (!x8 && N == 8)
		load8t(o, b, off);
	else if (!x8)
		load8x16t(o, b, off);
	else
#pragma GCC unroll 8
		for (int k = 0; k < N; k++)
			o[k] = pm_kx8_vec(x8, (int)(off / 4) + k);
}

/* kunpack8: the tile of 8 blocks b[i], or (x8 not NULL, Q4_K and Q6_K)
 * the super-block x8 of a tile in PM_LAYOUT_KX8, whose words need no
 * transposing. The scales are transposed as
 * they are stored (one row per lane) and decoded on all 8 rows at once:
 * decoding each row's 12 Q4_K/Q5_K scale bytes first and transposing the
 * results was about a third of the unpacking's instructions. */
VNNI_INLINE void kunpack8(kblk8 *t, const uint8_t *const b[8], const uint8_t *x8, int kind)
{
	const __m256i m15 = _mm256_set1_epi8(15);
	__m256i sv[4];
	if (kind == K_Q6) {
		if (x8) {
			t->d = t->dmin = pm_kx8_q6_d(x8);
		} else {
			__m128i h[8];
#pragma GCC unroll 16
			for (int i = 0; i < 8; i++)
				h[i] = _mm_cvtsi32_si128(load16(b[i] + 208));
			__m128i h01 = _mm_unpacklo_epi32(h[0], h[1]), h23 = _mm_unpacklo_epi32(h[2], h[3]);
			__m128i h45 = _mm_unpacklo_epi32(h[4], h[5]), h67 = _mm_unpacklo_epi32(h[6], h[7]);
			__m256i hw = _mm256_set_m128i(_mm_unpacklo_epi64(h45, h67), _mm_unpacklo_epi64(h01, h23));
			t->d = t->dmin =
				_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_and_si256(hw, _mm256_set1_epi32(0xffff))));
		}
		tload(4, sv, b, x8, 192); /* sv[w] lane i: scales 4w..4w+3 of row i */
#pragma GCC unroll 16
		for (int s = 0; s < 16; s++)
			t->sc[s] = _mm256_srai_epi32(_mm256_slli_epi32(sv[s / 4], 24 - 8 * (s % 4)), 24);
#pragma GCC unroll 16
		for (int p = 0; p < 8; p++)
			t->corr[p] = pair16(_mm256_slli_epi32(t->sc[2 * p], 5), _mm256_slli_epi32(t->sc[2 * p + 1], 5));
	} else {
		/* sv[0] lane i: row i's d, dmin; sv[1..3]: its scale words u0,
		 * u1, u2 (kscales: sub-block s < 4 has sc = byte s of u0, m =
		 * byte s of u1, 6 bits each; s = 4 + j has sc = (byte j of u2)
		 * & 15 | (byte j of u0) >> 6 << 4, m = (byte j of u2) >> 4 |
		 * (byte j of u1) >> 6 << 4) */
		tload(4, sv, b, x8, 0);
		t->d = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_and_si256(sv[0], _mm256_set1_epi32(0xffff))));
		t->dmin = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(sv[0], 16)));
		const __m256i m63 = _mm256_set1_epi32(63), m30 = _mm256_set1_epi32(0x30), m0f = _mm256_set1_epi32(15);
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m256i sc = _mm256_and_si256(_mm256_srli_epi32(sv[1], 8 * j), m63);
			__m256i m = _mm256_and_si256(_mm256_srli_epi32(sv[2], 8 * j), m63);
			t->sc[j] = sc;
			t->corr[j] = _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
			sc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sv[3], 8 * j), m0f),
					     _mm256_and_si256(_mm256_srli_epi32(sv[1], 8 * j + 2), m30));
			m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sv[3], 8 * j + 4), m0f),
					    _mm256_and_si256(_mm256_srli_epi32(sv[2], 8 * j + 2), m30));
			t->sc[4 + j] = sc;
			t->corr[4 + j] = _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
		}
	}
	__m256i q[8];
	if (kind == K_Q6) {
		const __m256i m3 = _mm256_set1_epi8(3);
#pragma GCC unroll 16
		for (int c = 0; c < 2; c++) {
			__m256i l0[8], l1[8];
			tload(8, l0, b, x8, 64 * (size_t)c);
			tload(8, l1, b, x8, 64 * (size_t)c + 32);
			tload(8, q, b, x8, 128 + 32 * (size_t)c);
#pragma GCC unroll 16
			for (int k = 0; k < 8; k++) {
				__m256i hb = q[k];
				__m256i *o = t->q + 32 * c + k;
				o[0] = _mm256_or_si256(_mm256_and_si256(l0[k], m15), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
				o[8] = _mm256_or_si256(_mm256_and_si256(l1[k], m15),
						       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
				o[16] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0[k], 4), m15),
							_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
				o[24] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1[k], 4), m15),
							_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
			}
		}
		return;
	}
	if (kind == K_Q4) {
		/* the packed bytes, transposed: kchain takes the nibbles */
#pragma GCC unroll 16
		for (int c = 0; c < 4; c++) {
			tload(8, q, b, x8, 16 + 32 * (size_t)c);
#pragma GCC unroll 16
			for (int k = 0; k < 8; k++)
				t->q[8 * c + k] = q[k];
		}
		return;
	}
	__m256i hb[8];
	if (kind == K_Q5)
		load8t(hb, b, 16);
	const __m256i m16 = _mm256_set1_epi8(16);
#pragma GCC unroll 16
	for (int c = 0; c < 4; c++) {
		load8t(q, b, 48 + 32 * (size_t)c);
#pragma GCC unroll 16
		for (int k = 0; k < 8; k++) {
			__m256i lo = _mm256_and_si256(q[k], m15), hi = _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m15);
			if (kind == K_Q5) {
				__m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c))), b1 = _mm256_set1_epi8((char)(2 << (2 * c)));
				lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb[k], b0), b0), m16));
				hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb[k], b1), b1), m16));
			}
			t->q[16 * c + k] = lo;
			t->q[16 * c + 8 + k] = hi;
		}
	}
}

/* kfinish8 is add_k / add_6 on 8 lanes (the same float32 operations) */
VNNI_INLINE __m256 kfinish8(__m256 acc, __m256i sumi, __m256i summ, const kblk8 *t, float x_d, int kind)
{
	__m256 dx = _mm256_set1_ps(x_d), dd = _mm256_mul_ps(t->d, dx);
	if (kind == K_Q6)
		return _mm256_add_ps(acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, summ))));
	__m256 dm = _mm256_mul_ps(t->dmin, dx);
	return _mm256_add_ps(acc, _mm256_sub_ps(_mm256_mul_ps(dd, _mm256_cvtepi32_ps(sumi)),
						_mm256_mul_ps(dm, _mm256_cvtepi32_ps(summ))));
}

/*
 * kchain adds to si[j][r] (tile j of the pair, row r of x) one scale
 * group: the chain of len (8 or 4) dwords from k0, each dword of R (4 or
 * 2) rows of x broadcast against both tiles' weight vectors, then times
 * the group's scale (sc[s] of each tile). Rows of x: x0, x0 + xs, x2, x2
 * + xs (R 2: x0, x0 + xs; xs 0 repeats a row). It is one asm statement on
 * fixed registers (ymm16..23 the chains, ymm29..31 the weight vectors and
 * the broadcast): left to itself the compiler emitted one chain after
 * another (8 dependent vpdpbusd in a row, too few independent ones in the
 * scheduler window to hide their latency), computed the broadcasts ahead
 * and spilled them, and spilled chains: about half the vpdpbusd rate.
 */
#define KB8 "2880" /* sizeof(kblk8): tile 1 of the pair, from tile 0 */
#define KW(o) "vmovdqa32 " o "(%[wp]), %%ymm29\n\tvmovdqa32 " o "+" KB8 "(%[wp]), %%ymm30\n\t"
#define KWL(o) "vpandd " o "(%[wp]), %[m15], %%ymm29\n\tvpandd " o "+" KB8 "(%[wp]), %[m15], %%ymm30\n\t"
#define KWH(o)                                                                                       \
	"vpsrlw $4, " o "(%[wp]), %%ymm29\n\tvpsrlw $4, " o "+" KB8 "(%[wp]), %%ymm30\n\t"              \
	"vpandd %%ymm29, %[m15], %%ymm29\n\tvpandd %%ymm30, %[m15], %%ymm30\n\t"
#define KX(o, src, a0, a1)                                                                          \
	"vpbroadcastd " o src ", %%ymm31\n\t%{evex%} vpdpbusd %%ymm31, %%ymm29, %%ymm" a0 "\n\t"    \
	"%{evex%} vpdpbusd %%ymm31, %%ymm30, %%ymm" a1 "\n\t"
#define KS(r, a0, a1)                                                                               \
	"vpmulld (%[sp]), %%ymm" a0 ", %%ymm" a0 "\n\tvpaddd %%ymm" a0 ", %[s0" #r "], %[s0" #r "]\n\t" \
	"vpmulld " KB8 "(%[sp]), %%ymm" a1 ", %%ymm" a1 "\n\tvpaddd %%ymm" a1 ", %[s1" #r "], %[s1" #r "]\n\t"
#define KZ(a) "vpxord %%ymm" a ", %%ymm" a ", %%ymm" a "\n\t"
#define KX4(xo) \
	KX(xo, "(%[x0])", "16", "20") KX(xo, "(%[x0],%[xs])", "17", "21") KX(xo, "(%[x2])", "18", "22") \
		KX(xo, "(%[x2],%[xs])", "19", "23")
#define KX2(xo) KX(xo, "(%[x0])", "16", "20") KX(xo, "(%[x0],%[xs])", "17", "21")
#define KSTEP4(wo, xo) KW(wo) KX4(xo)
#define KSTEP2(wo, xo) KW(wo) KX2(xo)
#define KSTEP4L(wo, xo) KWL(wo) KX4(xo)
#define KSTEP2L(wo, xo) KWL(wo) KX2(xo)
#define KSTEP4H(wo, xo) KWH(wo) KX4(xo)
#define KSTEP2H(wo, xo) KWH(wo) KX2(xo)
#define KCH4(STEP) STEP("0", "0") STEP("32", "4") STEP("64", "8") STEP("96", "12")
#define KCH8(STEP) KCH4(STEP) STEP("128", "16") STEP("160", "20") STEP("192", "24") STEP("224", "28")
#define KZ4 KZ("16") KZ("17") KZ("18") KZ("19") KZ("20") KZ("21") KZ("22") KZ("23")
#define KZ2 KZ("16") KZ("17") KZ("20") KZ("21")
#define KS4 KS(0, "16", "20") KS(1, "17", "21") KS(2, "18", "22") KS(3, "19", "23")
#define KS2 KS(0, "16", "20") KS(1, "17", "21")
#define KOUT4                                                                                              \
	[s00] "+v"(si[0][0]), [s01] "+v"(si[0][1]), [s02] "+v"(si[0][2]), [s03] "+v"(si[0][3]),            \
		[s10] "+v"(si[1][0]), [s11] "+v"(si[1][1]), [s12] "+v"(si[1][2]), [s13] "+v"(si[1][3])
#define KOUT2 [s00] "+v"(si[0][0]), [s01] "+v"(si[0][1]), [s10] "+v"(si[1][0]), [s11] "+v"(si[1][1])
#define KIN [wp] "r"(wp), [sp] "r"(sp), [x0] "r"(x0), [x2] "r"(x2), [xs] "r"(xs), [m15] "v"(m15)
#define KCLOB "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm29", "xmm30", "xmm31", "memory"
_Static_assert(sizeof(kblk8) == 2880, "KB8 is sizeof(kblk8)");

VNNI_INLINE void kchain(__m256i si[2][4], const kblk8 *t, const uint8_t *x0, const uint8_t *x2, size_t xs, int R,
			int k0, int len, int s, int wk, int nib)
{
	const __m256i *wp = &t[0].q[wk], *sp = &t[0].sc[s], m15 = _mm256_set1_epi8(15);
	x0 += 4 * k0, x2 += 4 * k0;
	if (R == 4 && len == 8 && nib == 1)
		__asm__(KZ4 KCH8(KSTEP4L) KS4 : KOUT4 : KIN : KCLOB);
	else if (R == 4 && len == 8 && nib == 2)
		__asm__(KZ4 KCH8(KSTEP4H) KS4 : KOUT4 : KIN : KCLOB);
	else if (R == 4 && len == 8)
		__asm__(KZ4 KCH8(KSTEP4) KS4 : KOUT4 : KIN : KCLOB);
	else if (R == 4)
		__asm__(KZ4 KCH4(KSTEP4) KS4 : KOUT4 : KIN : KCLOB);
	else if (len == 8 && nib == 1)
		__asm__(KZ2 KCH8(KSTEP2L) KS2 : KOUT2 : KIN : KCLOB);
	else if (len == 8 && nib == 2)
		__asm__(KZ2 KCH8(KSTEP2H) KS2 : KOUT2 : KIN : KCLOB);
	else if (len == 8)
		__asm__(KZ2 KCH8(KSTEP2) KS2 : KOUT2 : KIN : KCLOB);
	else
		__asm__(KZ2 KCH4(KSTEP2) KS2 : KOUT2 : KIN : KCLOB);
}

/* kdot16xr: the super-block's term for a pair of tiles (t[0], t[1]: 16
 * weight rows) and R (2 or 4) rows of x (x[r], at stride xs as kchain
 * says). Each broadcast activation dword feeds both tiles and each weight
 * vector all R rows: a broadcast costs a load, and the loads (two per
 * vpdpbusd for one tile against two rows of x) held the kernel well under
 * the vpdpbusd rate. A group's sum is one chain per tile and row (Q4_K
 * and Q5_K: 8 dwords, the 32 elements of a scale; Q6_K: 4, the 16 of
 * each of its scales). */
VNNI_INLINE void kdot16xr(float *const acc[], const kblk8 *t, const pm_act256 *const x[], size_t xs, int R, int kind)
{
	__m256i si[2][4], sm[2][4];
#pragma GCC unroll 4
	for (int r = 0; r < 4; r++)
		si[0][r] = si[1][r] = sm[0][r] = sm[1][r] = _mm256_setzero_si256();
	const uint8_t *x0 = (const uint8_t *)x[0]->q, *x2 = R == 4 ? (const uint8_t *)x[2]->q : x0;
#pragma GCC unroll 8
	for (int g = 0; g < 8; g++) {
		if (kind == K_Q6) {
			kchain(si, t, x0, x2, xs, R, 8 * g, 4, 2 * g, 8 * g, 0);
			kchain(si, t, x0, x2, xs, R, 8 * g + 4, 4, 2 * g + 1, 8 * g + 4, 0);
		} else if (kind == K_Q4) {
			/* group g: the low (g even) or high nibbles of chunk g / 2 */
			kchain(si, t, x0, x2, xs, R, 8 * g, 8, g, 8 * (g / 2), 1 + g % 2);
		} else {
			kchain(si, t, x0, x2, xs, R, 8 * g, 8, g, 8 * g, 0);
		}
	}
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		__m256i c0 = t[0].corr[p], c1 = t[1].corr[p];
#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			__m256i bs = _mm256_set1_epi32(load32((const uint8_t *)(x[r]->bsums + 2 * p)));
			sm[0][r] = _mm256_dpwssd_epi32(sm[0][r], c0, bs);
			sm[1][r] = _mm256_dpwssd_epi32(sm[1][r], c1, bs);
		}
	}
#pragma GCC unroll 4
	for (int r = 0; r < R; r++) {
		_mm256_storeu_ps(acc[r], kfinish8(_mm256_loadu_ps(acc[r]), si[0][r], sm[0][r], &t[0], x[r]->d, kind));
		_mm256_storeu_ps(acc[r] + 8,
				 kfinish8(_mm256_loadu_ps(acc[r] + 8), si[1][r], sm[1][r], &t[1], x[r]->d, kind));
	}
}

/* kprefetch prefetches up to lines cache lines from p (not past end) and
 * returns where it stopped. */
VNNI_INLINE const char *kprefetch(const char *p, const char *end, int lines)
{
	for (; lines > 0 && p < end; lines--, p += 64)
		_mm_prefetch(p, _MM_HINT_T0);
	return p;
}

/* kqmm_vnni: vqmm's loop with tiles of 16 rows, two kblk8 (a short last
 * tile repeats its last row; those lanes are computed and dropped), rows
 * of x four at a time (the last one to three in twos, a single row with
 * itself, the copy's outputs dropped). A whole tile accumulates in out
 * itself; a short one in acc, copied out after its last super-block. */
VNNI_INLINE void kqmm_vnni(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			   int m1, int kind, size_t bb)
{
	int nb = w->cols / 256;
	size_t rb = w->row_bytes;
	kblk8 t[2];
	float acc[NR * 16] __attribute__((aligned(32))), spare[16] __attribute__((aligned(32)));
	for (int mt = m0; mt < m1; mt += 16) {
		int rows = m1 - mt < 16 ? m1 - mt : 16;
		const uint8_t *row[16];
		for (int i = 0; i < 16; i++)
			row[i] = pm_weight_row(w, mt + (i < rows ? i : rows - 1));
		/* tiles of PM_LAYOUT_KX8 (kx8.h; rows a multiple of 8, so a
		 * short pair is one tile, repeated like the rows) */
		const uint8_t *x8[2] = {NULL, NULL};
		if (w->layout == PM_LAYOUT_KX8)
			x8[0] = row[0], x8[1] = rows == 16 ? row[8] : row[0];
		const char *next = (const char *)row[0] + 16 * rb;
		size_t share = (16 * rb + (size_t)nb - 1) / (size_t)nb;
		int prefetch = mt + 16 < m1;
		for (int r0 = 0; r0 < n; r0 += NR) {
			int nr = n - r0 < NR ? n - r0 : NR;
			float *o = rows == 16 ? out + (size_t)r0 * ldo + mt : acc;
			size_t ld = rows == 16 ? ldo : 16;
			for (int r = 0; r < nr; r++)
				memset(o + (size_t)r * ld, 0, sizeof(float) * 16);
			for (int b = 0; b < nb; b++) {
				/* this super-block's share of the next tile, a few
				 * lines after each step (a burst of them all at once
				 * filled the miss buffers and stalled the loads) */
				const char *pf = next + (size_t)b * share, *pfe = prefetch && r0 == 0 ? pf + share : pf;
				const uint8_t *blk[16];
				for (int i = 0; i < 16; i++)
					blk[i] = row[i] + bb * (size_t)b;
				const size_t tb = 8 * bb * (size_t)b;
				kunpack8(&t[0], blk, x8[0] ? x8[0] + tb : NULL, kind);
				pf = kprefetch(pf, pfe, 8);
				kunpack8(&t[1], blk + 8, x8[1] ? x8[1] + tb : NULL, kind);
				pf = kprefetch(pf, pfe, 8);
				const pm_act256 *x0 = (const pm_act256 *)((const char *)xq + (size_t)r0 * xs) + b;
				int r = 0;
				for (; r + 4 <= nr; r += 4) {
					const pm_act256 *x[4];
					float *a[4];
					for (int i = 0; i < 4; i++) {
						x[i] = (const pm_act256 *)((const char *)x0 + (size_t)(r + i) * xs);
						a[i] = o + (size_t)(r + i) * ld;
					}
					kdot16xr(a, t, x, xs, 4, kind);
					pf = kprefetch(pf, pfe, 8);
				}
				for (; r < nr; r += 2) {
					/* two rows, or the last one with itself (xs 0) */
					int two = r + 1 < nr;
					const pm_act256 *x[2] = {(const pm_act256 *)((const char *)x0 + (size_t)r * xs), NULL};
					x[1] = two ? (const pm_act256 *)((const char *)x[0] + xs) : x[0];
					float *a[2] = {o + (size_t)r * ld, two ? o + (size_t)(r + 1) * ld : spare};
					kdot16xr(a, t, x, two ? xs : 0, 2, kind);
					pf = kprefetch(pf, pfe, 8);
				}
				kprefetch(pf, pfe, INT_MAX);
			}
			if (rows < 16)
				for (int r = 0; r < nr; r++)
					memcpy(out + (size_t)(r0 + r) * ldo + mt, acc + 16 * r, sizeof(float) * (size_t)rows);
		}
	}
}

/* KVNNI_TYPE(t, K, bytes) defines type t's kernels: kqmm_vnni_t (the
 * interleaved vpdpbusd tiles for batches, compiled for VNNI) and
 * vqmm_t_vnni (pairdot at batch 1 on rows, qmv_k_avx2.c's tiles at batch
 * 1 on tiles of 8 rows, kqmm_vnni_t for batches), which pm_qmm_k_vnni
 * returns. */
#define KVNNI_TYPE(T, K, BYTES)                                                                  \
	static VNNI void kqmm_vnni_##T(float *out, size_t ldo, const void *xq, size_t xs,       \
				       const pm_weight *w, int n, int m0, int m1)              \
	{                                                                                        \
		kqmm_vnni(out, ldo, xq, xs, w, n, m0, m1, K, BYTES);                             \
	}                                                                                        \
	static AVX2 void vqmm_##T##_vnni(float *out, size_t ldo, const void *xq, size_t xs,     \
					 const pm_weight *w, int n, int m0, int m1)            \
	{                                                                                        \
		if (n == 1 && w->layout == PM_LAYOUT_KX8)                                        \
			pm_qmv_##T##_avx2(out, xq, w, m0, m1);                                   \
		else if (n == 1)                                                                 \
			vqmv(out, xq, w, m0, m1, K, BYTES);                                      \
		else                                                                             \
			kqmm_vnni_##T(out, ldo, xq, xs, w, n, m0, m1);                           \
	}

KVNNI_TYPE(q4_k, K_Q4, 144)
KVNNI_TYPE(q5_k, K_Q5, 176)
KVNNI_TYPE(q6_k, K_Q6, 210)

/* type's kernel (qmm_k_vnni.h) */
pm_qmm_fn pm_qmm_k_vnni(uint32_t type)
{
	switch (type) {
	case PM_TYPE_Q4_K:
		return vqmm_q4_k_vnni;
	case PM_TYPE_Q5_K:
		return vqmm_q5_k_vnni;
	case PM_TYPE_Q6_K:
		return vqmm_q6_k_vnni;
	}
	return NULL;
}
#else
typedef int pm_qmm_k_vnni_empty; /* ISO C wants a declaration */
#endif
