/*
 * panels.h: the engine's own copies of the weights it computes with in
 * another layout than the file's: F16 matrices in panels of 8 rows
 * (mm_f16_panel.h), for a kernel set that runs the panel products (AVX2,
 * AVX-VNNI, AVX-512 VNNI: every x86 set but portable), and Q4_K and Q6_K
 * matrices in tiles of 8 rows (kx8.h) for the same sets (each decodes
 * them with the AVX2 tile kernels; AVX-512 VNNI's batch tiles read them
 * too), and, for the AVX2 and AVX-512 VNNI sets, Q4_0 matrices in tiles
 * of 8 rows (q32x8.h; AVX-VNNI's tiles read rows). e->layers are the
 * views forward.c computes with: m->layers when nothing was repacked,
 * else the engine's copy of them with the repacked matrices swapped in.
 *
 * Every matrix a layer multiplies by is repacked when it can be (F16, Q4_K,
 * Q6_K or (AVX2, AVX-512 VNNI) Q4_0, rows a multiple of 8), or left in rows, whole: an engine never computes one
 * matrix both ways, so a row's result never depends on the path it took
 * (mm_f16_panel.h: the two layouts sum in different orders). The token
 * embedding stays in rows: it is read by row. The output matrix (often
 * the embedding itself) is computed in K-quant or Q4_0 tiles when it can be
 * (e->output; bitwise the rows' logits), else in rows: F16 panels would
 * change the logits' rounding, and an embedding the output shares is then
 * read by row from the file's pages (the dropped ones fault back in).
 * On the x86 paths a matrix left in rows (and the output) is copied as it
 * is beside the repacked ones (e->copy_bytes), all in 2 MiB pages, so
 * decode reads no weight through the file's 4 KiB pages.
 *
 * The file's pages of a repacked or copied matrix are dropped from the process
 * (madvise MADV_DONTNEED: the mapping is private and read-only, so a later
 * read faults the same bytes back in), so a model is not resident
 * twice.
 */
#ifndef PM_PANELS_H
#define PM_PANELS_H

#include "engine_internal.h"

/* panels_build sets e->layers and e->output after forward_select_kernels (e->isa, e->m):
 * PM_OK, or PM_ERR_NOMEM with e's error set. */
int panels_build(pm_engine *e);

/* panels_free releases what panels_build allocated (safe on a zeroed e). */
void panels_free(pm_engine *e);

#endif
