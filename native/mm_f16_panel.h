/*
 * mm_f16_panel.h: F16 weights repacked into panels of 8 rows, and the AVX2
 * products that read them (decode at batch 1, and batches: prefill,
 * batched decode, verify).
 *
 * The layout (pm_weight.layout == PM_LAYOUT_PANEL8): rows come in panels
 * of 8, rows.. 8p+7 in panel p; element i of row 8p+j is the half at
 * data + ((p * cols + i) * 8 + j) * 2. A panel occupies the bytes its
 * 8 rows did (row_bytes and pm_weight_row(w, 8p) still give the panel's
 * size and start), so a range of whole panels is contiguous. rows is a
 * multiple of 8.
 *
 * Why: with 8 rows in the lanes, one widened vector of weights is 8 rows
 * of one column, and every row of x multiplies it by a broadcast scalar
 * (an outer product): no horizontal sums, and a tile of 2 panels against
 * 6 rows of x converts 2 vectors per 12 FMAs, where the row-major tile
 * (mm_float.c) converts 3 and loads 4 vectors of x. Measured on AMD EPYC
 * Zen 3, one thread, 96x512 F16 against 24 rows in cache: ~91 GFLOP/s
 * against ~78 for the row-major 3x4 tile (a loop of FMAs alone: ~93).
 *
 * The order of a result: out = 0; for i in 0..cols-1: out = fma(x[i],
 * w[i], out), in float32, one rounding per step. The same in the decode
 * kernel, the batch tile, every tile shape, thread split and x block, so a
 * row's result never depends on the batch (kernels.h). It is not the
 * row-major kernels' order (8 lanes then a tree), so an engine computes
 * an F16 matrix either all in panels or all in rows, never both.
 */
#ifndef PM_MM_F16_PANEL_H
#define PM_MM_F16_PANEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "weights.h"

/* pm_f16_panel_ok: w is F16 in rows, its rows a multiple of 8, and this
 * CPU runs the panel kernels (AVX2, FMA, F16C). */
int pm_f16_panel_ok(const pm_weight *w);

/* pm_f16_panel_pack writes w's elements (F16, in rows) into dst
 * (w->rows * w->row_bytes bytes) in panels. */
void pm_f16_panel_pack(uint16_t *dst, const pm_weight *w);

/* pm_mv_f16_panel: out[m] = x . row m of w (panels), m in [m0, m1), both
 * multiples of 8. */
void pm_mv_f16_panel(float *out, const float *x, const pm_weight *w, int m0, int m1);

/* pm_mm_f16_panel: out[r*ldo + m] = x[r] . row m of w (panels), r < n
 * (x[r] at x + r * w->cols), m in [m0, m1), both multiples of 8. */
void pm_mm_f16_panel(float *out, size_t ldo, const float *x, const pm_weight *w, int n, int m0,
		     int m1);

#endif
