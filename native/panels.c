/*
 * panels.c: the engine's repacked weight copies (panels.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mm_f16_panel.h"
#include "panels.h"
#include "kx8.h"

/* The matrices of a layer, in one list: a pointer to each in l. */
#define LAYER_MATS(l) {&(l)->wq, &(l)->wk, &(l)->wv, &(l)->wo, &(l)->w_gate, &(l)->w_up, &(l)->w_down}
enum { N_MATS = 7 };

/* drop_pages drops the whole pages of [p, p + len) that lie in m's
 * mapping from the process (never a byte outside it). */
static void drop_pages(const pm_model *m, const void *p, size_t len)
{
	if (!m->map)
		return;
	uintptr_t lo = (uintptr_t)m->map, hi = lo + m->map_len;
	uintptr_t a = (uintptr_t)p, b = a + len;
	if (a < lo || b > hi)
		return;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	a = (a + pg - 1) / pg * pg;
	b = b / pg * pg;
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

/* repack_layout: the layout e computes w in (PM_LAYOUT_ROWS: as loaded) */
static uint32_t repack_layout(const pm_engine *e, const pm_weight *w)
{
	if (e->isa == PM_ISA_PORTABLE || e->isa == PM_ISA_NEON)
		return PM_LAYOUT_ROWS;
	if (pm_f16_panel_ok(w))
		return PM_LAYOUT_PANEL8;
	/* the K-quant tiles are read by the AVX2 K-quant kernels, which the
	 * AVX-VNNI set runs too; the AVX-512 VNNI set has its own (rows) */
	if ((e->isa == PM_ISA_AVX2 || e->isa == PM_ISA_AVXVNNI) && pm_kx8_ok(w))
		return PM_LAYOUT_KX8;
	return PM_LAYOUT_ROWS;
}

int panels_build(pm_engine *e)
{
	const pm_model *m = e->m;
	e->layers = m->layers;
	size_t bytes = 0;
	for (int l = 0; l < m->n_layers; l++) {
		const pm_layer *L = &m->layers[l];
		const pm_weight *ws[N_MATS] = LAYER_MATS(L);
		for (int i = 0; i < N_MATS; i++)
			if (repack_layout(e, ws[i]) != PM_LAYOUT_ROWS)
				bytes += ((size_t)ws[i]->rows * ws[i]->row_bytes + 63) / 64 * 64;
	}
	if (bytes == 0)
		return PM_OK;
	e->panel_layers = calloc((size_t)m->n_layers, sizeof *e->panel_layers);
	e->panel_mem = aligned_alloc(64, bytes);
	if (!e->panel_layers || !e->panel_mem) {
		panels_free(e);
		e->layers = m->layers;
		return PM_ERR_NOMEM; /* the caller names it */
	}
	uint8_t *at = e->panel_mem;
	size_t packed = 0, packed_kx8 = 0;
	for (int l = 0; l < m->n_layers; l++) {
		pm_layer *P = &e->panel_layers[l];
		*P = m->layers[l];
		pm_weight *ws[N_MATS] = LAYER_MATS(P);
		for (int i = 0; i < N_MATS; i++) {
			pm_weight *w = ws[i];
			uint32_t layout = repack_layout(e, w);
			if (layout == PM_LAYOUT_ROWS)
				continue;
			size_t n = (size_t)w->rows * w->row_bytes;
			if (layout == PM_LAYOUT_PANEL8) {
				pm_f16_panel_pack((uint16_t *)(void *)at, w);
				packed += n;
			} else {
				pm_kx8_pack(at, w);
				packed_kx8 += n;
			}
			drop_pages(m, w->data, n);
			w->data = at;
			w->layout = layout;
			at += (n + 63) / 64 * 64;
		}
	}
	e->layers = e->panel_layers;
	e->panel_bytes = packed;
	e->kx8_bytes = packed_kx8;
	return PM_OK;
}

void panels_free(pm_engine *e)
{
	free(e->panel_layers);
	free(e->panel_mem);
	e->panel_layers = NULL;
	e->panel_mem = NULL;
	e->panel_bytes = 0;
	e->kx8_bytes = 0;
}
