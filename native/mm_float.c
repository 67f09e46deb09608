/*
 * mm_float.c: the tiled matrix-matrix product of the float weight types
 * (F32, F16, BF16) for batched decode and prefill, AVX2+FMA(+F16C): each
 * weight chunk is widened in registers (cvtph for F16, a shift for BF16)
 * and fed straight to the FMAs of every row of x in the pass, instead of
 * being dequantized into a scratch tile and read back (pm_matmul_w's path
 * for the other types).
 *
 * Batch invariance: a result is bitwise what kernels.c's matmul gives on
 * the widened rows, and what matvec.c gives at batch 1: one 8-lane
 * accumulator per output fed the row's 8-element chunks in order by
 * fmadd(x, w, acc), a zero-padded tail chunk against the masked tail of x,
 * then the tree ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Tile shape, pass
 * size, x blocking and the thread split never change a result
 * (test_quant.c checks every batch size against the F32 matmul).
 *
 * Two copies of the same code (mm_float_tile.h): one for 16 vector
 * registers, whose tiles are 3 weight rows against passes of up to 4 rows
 * of x (12 accumulators, 3 weight vectors, x as memory operands), so each
 * widened weight vector feeds 4 FMAs and each x vector 3; and one for CPUs
 * with AVX-512VL, compiled for its 32 registers, 4 weight rows against 4
 * rows of x (16 accumulators). The instructions are still 256-bit and
 * compute the same operations, so both copies give the same bits
 * (test_quant.c compares them). Measured on AMD EPYC Zen 4, one thread,
 * F16 1376x512, 256 rows in cache: ~95 GFLOP/s for the 4x4 tile against
 * ~70 for the old 4x2 one; on Zen 3 (F16 1536x576, 256 rows, busy
 * machine): ~72 for the 3x4 tile with L1-sized x blocks against ~55-65
 * for the 4x2 one with L2-sized blocks, and ~40 for a 2x6 tile (its x
 * reloads per FMA double).
 *
 * What else was measured on Zen 3 (F16, 256 rows, the default model's
 * four shapes, kernel alone, alternating, best and median of 41; one FMA
 * loop without loads runs ~93 GFLOP/s there): the 3x4 tile's best runs
 * are ~74, limited by its 7 loads and 3 conversions per 12 FMAs (a loop
 * of the same FMAs with 4 loads runs at peak). Widening each weight tile
 * once per x block into an F32 stack buffer (no conversion in the passes)
 * was slower (best ~65: the buffer and the x block overflow L1), 2x6 with
 * L1-sized blocks too (best ~61), x blocks of 16, 64 or 128 KiB no
 * better than 32. Four chunks a step (tile_) left the best runs the same
 * and made the median under load ~0.85x the time.
 */
#include <string.h>

#include "kernels.h"
#include "weights.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Lanes j < rem are set: loads beyond the row never touch memory. */
static const int32_t mmf_tail_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* How many weight rows ahead the stream is prefetched: one 4-row tile is
 * too close (the prefetch is still in flight when the tile is used), 8
 * rows keep a 16 KiB F16 fetch (k 1024) behind the compute before it. */
#define MMF_AHEAD_ROWS 8

/* mmf_xblock: rows of x per block, so a block (rows * k floats) stays in
 * L1 (32 KiB; at least 8 rows) while the weight rows pass over it: the x
 * rows of a pass are reloaded once per tile, the weights once per block,
 * and in L2 the reloads of x were the limit (AMD EPYC Zen 3, F16
 * 1536x576, 256 rows: ~60 GFLOP/s with 256 KiB blocks, ~75 with L1 ones). */
static int mmf_xblock(int k)
{
	int rows = (int)((32u << 10) / ((unsigned)k * sizeof(float))) & ~3;
	return rows < 8 ? 8 : rows;
}

/* Rows per pass, 16 registers: tiles of 3 weight rows against up to 4
 * rows of x (12 accumulators, 3 weight vectors and x as memory operands).
 * The rows left are split evenly (7 = 4+3), not 4 and a thin rest. */
static inline int pass_rows_16(int n, int left)
{
	(void)n;
	int passes = (left + 3) / 4;
	return (left + passes - 1) / passes;
}

/* Rows per pass, 32 registers: 4 (21 vectors live), the rest in one pass. */
static inline int pass_rows_32(int n, int left)
{
	(void)n;
	return left >= 4 ? 4 : left; 
}

#define MMF_TGT "avx2,fma,f16c"
#define MMF_SFX 16
#define MMF_W 3
#define MMF_RMAX 4
#include "mm_float_tile.h"
#undef MMF_TGT
#undef MMF_SFX
#undef MMF_W
#undef MMF_RMAX

#define MMF_TGT "avx2,fma,f16c,avx512f,avx512vl"
#define MMF_SFX 32
#define MMF_W 4
#define MMF_RMAX 4
#include "mm_float_tile.h"
#undef MMF_TGT
#undef MMF_SFX
#undef MMF_W
#undef MMF_RMAX

pm_tile_fn pm_matmul_float_avx2(uint32_t type, int regs)
{
	if (!pm_cpu_has_avx2() || !__builtin_cpu_supports("f16c"))
		return NULL;
	if (regs == 0)
		regs = pm_cpu_has_avx512vl() ? 32 : 16;
	if (regs == 32 && !pm_cpu_has_avx512vl())
		return NULL;
	switch (type) {
	case PM_TYPE_F32:
		return regs == 32 ? mm_f32_32 : mm_f32_16;
	case PM_TYPE_F16:
		return regs == 32 ? mm_f16_32 : mm_f16_16;
	case PM_TYPE_BF16:
		return regs == 32 ? mm_bf16_32 : mm_bf16_16;
	}
	return NULL;
}

#else

pm_tile_fn pm_matmul_float_avx2(uint32_t type, int regs)
{
	(void)type;
	(void)regs;
	return NULL;
}

#endif
