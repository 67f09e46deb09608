/*
 * qmm_32_vnni.c: qmm_32.c's x86 kernels built for AVX-512 VNNI
 * (vpdpbusd: the integer step of a block in one instruction; 256-bit
 * registers for decode, 512-bit for batches); pm_qmm_32 picks them when
 * the CPU has avx512vnni, avx512vl and avx512bw. Bitwise the AVX2
 * kernels' results (qmm_32_x86.h), whose decode kernel this build
 * borrows for Q8_0 where it is faster (below).
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define QMM_TARGET "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"
#define QMM_VNNI 1
#define QMM_FN qmm_32_vnni_tiles
#include "qmm_32_x86.h"
#include "qmv_32_avx2.h"

/*
 * Q8_0's decode of wide rows streamed from memory (pm_weight.far) goes to
 * the AVX2 build's 8-row tiles (bitwise these kernels' results:
 * test_qmm_decode.c), which prefetch them into L2. llama-3.2-1b Q8_0
 * (2176-byte rows), one thread, AMD EPYC Zen 4: 19.2 -> 22.5 tokens/s
 * (this build's 4-row tile prefetching into L2: 21.0). Not narrow rows
 * (smollm2-135m's 612 bytes: 176 tokens/s here, 162 there) nor
 * L3-resident ones (the default model: 0.93x there).
 */
static void qmm_q8_0_vnni(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			  int m1)
{
	if (n == 1 && w->far && pm_qmv_32_avx2_wide(w->row_bytes))
		pm_qmv_q8_0_avx2(out, xq, w, m0, m1);
	else
		qmm_q8_0(out, ldo, xq, xs, w, n, m0, m1);
}

/*
 * Q4_0 in tiles of 8 rows (PM_LAYOUT_Q32X8: panels.c repacks it for this
 * build too): decode goes to the AVX2 build's tile8_x8, which reads the
 * tiles as they lie (default Q4_0, one thread, AMD EPYC Zen 4: ~3,300
 * tokens/s there against ~2,150 for this build's decode of the rows);
 * batches to this build's 16-row vpdpbusd tiles, two tiles of 8 each
 * (T4X: the interleave is the packer's). Both bitwise the rows'
 * (test_q32x8.c).
 */
static void qmm_q4_0_vnni(float *out, size_t ldo, const void *xq, size_t xs, const pm_weight *w, int n, int m0,
			  int m1)
{
	if (w->layout != PM_LAYOUT_Q32X8)
		qmm_q4_0(out, ldo, xq, xs, w, n, m0, m1);
	else if (n == 1)
		pm_qmv_q4_0_avx2(out, xq, w, m0, m1);
	else
		qmm_q4_0x_batch(out, ldo, xq, xs, w, n, m0, m1);
}

pm_qmm_fn qmm_32_vnni(uint32_t type);
pm_qmm_fn qmm_32_vnni(uint32_t type)
{
	return type == PM_TYPE_Q8_0 ? qmm_q8_0_vnni : type == PM_TYPE_Q4_0 ? qmm_q4_0_vnni : qmm_32_vnni_tiles(type);
}
#else
typedef int pm_qmm_32_vnni_empty; /* ISO C wants a declaration */
#endif
