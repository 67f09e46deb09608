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

int panels_build(pm_engine *e)
{
	const pm_model *m = e->m;
	e->layers = m->layers;
	if (e->isa == PM_ISA_PORTABLE || e->isa == PM_ISA_NEON)
		return PM_OK;
	size_t bytes = 0;
	for (int l = 0; l < m->n_layers; l++) {
		const pm_layer *L = &m->layers[l];
		const pm_weight *ws[N_MATS] = LAYER_MATS(L);
		for (int i = 0; i < N_MATS; i++)
			if (pm_f16_panel_ok(ws[i]))
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
	size_t packed = 0;
	for (int l = 0; l < m->n_layers; l++) {
		pm_layer *P = &e->panel_layers[l];
		*P = m->layers[l];
		pm_weight *ws[N_MATS] = LAYER_MATS(P);
		for (int i = 0; i < N_MATS; i++) {
			pm_weight *w = ws[i];
			if (!pm_f16_panel_ok(w))
				continue;
			size_t n = (size_t)w->rows * w->row_bytes;
			pm_f16_panel_pack((uint16_t *)(void *)at, w);
			drop_pages(m, w->data, n);
			w->data = at;
			w->layout = PM_LAYOUT_PANEL8;
			at += (n + 63) / 64 * 64;
			packed += n;
		}
	}
	e->layers = e->panel_layers;
	e->panel_bytes = packed;
	return PM_OK;
}

void panels_free(pm_engine *e)
{
	free(e->panel_layers);
	free(e->panel_mem);
	e->panel_layers = NULL;
	e->panel_mem = NULL;
	e->panel_bytes = 0;
}
