/*
 * panels.c: the engine's repacked weight copies (panels.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mm_f16_panel.h"
#include "panels.h"
#include "kx8.h"
#include "q32x8.h"

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
	/* the K-quant tiles: every x86 set reads them (the AVX2 kernels at
	 * batch 1, each set's own tiles in batches) */
	if (pm_kx8_ok(w))
		return PM_LAYOUT_KX8;
	/* the Q4_0 tiles: the AVX2 kernels read them, and AVX-512 VNNI's
	 * (its batch tiles; decode on them is AVX2's); AVX-VNNI reads rows */
	if ((e->isa == PM_ISA_AVX2 || e->isa == PM_ISA_AVX512VNNI) && pm_q32x8_ok(w))
		return PM_LAYOUT_Q32X8;
	return PM_LAYOUT_ROWS;
}

/* in_map: w, to be computed in layout, goes into the engine's mapping:
 * repacked, or (rows) copied as it is on every x86 path, so a decode
 * reads all its weights in the 2 MiB pages map_huge gives rather than the
 * file's 4 KiB ones (Q8_0, Q4_0, F32 matrices and an output in rows) */
static int in_map(const pm_engine *e, const pm_weight *w, uint32_t layout)
{
	return layout != PM_LAYOUT_ROWS || (e->isa != PM_ISA_PORTABLE && e->isa != PM_ISA_NEON && w->data &&
					    w->rows > 0 && w->row_bytes > 0);
}

/* output_layout: the layout e computes the output matrix in: K-quant
 * or Q4_0 tiles when they can be (bitwise the rows' logits), never F16 panels
 * (they sum in another order than the rows, and the embedding is read by
 * row from the file either way) */
static uint32_t output_layout(const pm_engine *e)
{
	uint32_t l = repack_layout(e, &e->m->output);
	return l == PM_LAYOUT_KX8 || l == PM_LAYOUT_Q32X8 ? l : PM_LAYOUT_ROWS;
}

/* repack writes w into at in layout (rows: a copy, in_map) and points
 * w at it, dropping the file's pages of it; its bytes are added to the
 * count of the layout */
static void repack(pm_engine *e, pm_weight *w, uint32_t layout, uint8_t *at)
{
	size_t n = (size_t)w->rows * w->row_bytes;
	if (layout == PM_LAYOUT_ROWS) {
		memcpy(at, w->data, n);
		e->copy_bytes += n;
	} else if (layout == PM_LAYOUT_PANEL8) {
		pm_f16_panel_pack((uint16_t *)(void *)at, w);
		e->panel_bytes += n;
	} else if (layout == PM_LAYOUT_KX8) {
		pm_kx8_pack(at, w);
		e->kx8_bytes += n;
	} else {
		pm_q32x8_pack(at, w);
		e->q32x8_bytes += n;
	}
	drop_pages(e->m, w->data, n);
	w->data = at;
	w->layout = layout;
}

/* map_huge maps n bytes (zeroed) for the repacked weights, *len bytes in
 * all, in 2 MiB pages where the kernel gives them (transparent huge pages
 * on request, the madvise mode Debian ships): decode streams every byte
 * once per token, and in 4 KiB pages that is a TLB miss every 4 KiB, each
 * a two-level walk under a hypervisor. NULL when mmap fails. */
static void *map_huge(size_t n, size_t *len)
{
	const size_t H = (size_t)2 << 20;
	size_t l = (n + H - 1) / H * H;
	uint8_t *p = mmap(NULL, l + H, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uint8_t *a = (uint8_t *)(((uintptr_t)p + H - 1) & ~(uintptr_t)(H - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + l < p + l + H)
		munmap(a + l, (size_t)(p + l + H - (a + l)));
#ifdef MADV_HUGEPAGE
	madvise(a, l, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
	*len = l;
	return a;
}

/* llc_bytes: the size of CPU 0's last-level cache as Linux reports it
 * (sysfs: the highest cache/index*; 32 MiB, a Zen 4 CCX's L3, where
 * sysconf(_SC_LEVEL3_CACHE_SIZE) said 320 MiB in a KVM guest), 0 when
 * unknown */
static size_t llc_bytes(void)
{
	size_t best = 0;
	int best_level = 0;
	for (int i = 0; i < 16; i++) {
		char path[96], buf[32];
		int level = 0;
		unsigned long long v = 0;
		char unit = 0;
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
		FILE *f = fopen(path, "r");
		if (!f)
			break;
		int ok = fscanf(f, "%d", &level) == 1;
		fclose(f);
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		if (!ok || !(f = fopen(path, "r")))
			continue;
		ok = fgets(buf, sizeof buf, f) != NULL && sscanf(buf, "%llu%c", &v, &unit) >= 1;
		fclose(f);
		if (!ok)
			continue;
		v *= unit == 'K' ? 1024ull : unit == 'M' ? 1024ull * 1024 : unit == 'G' ? 1024ull * 1024 * 1024 : 1;
		if (level > best_level)
			best_level = level, best = (size_t)v;
	}
	return best_level >= 2 ? best : 0;
}

/* mark_far sets far on every matrix of e->layers and e->output when the
 * n bytes one decode step reads exceed the last-level cache: then each
 * token streams them from memory, and a kernel's prefetch goes to L2
 * (which keeps more misses in flight than L1) whatever its distance.
 * smollm2-135m Q8_0 (143 MB, 612-byte rows: 9.8 KiB ahead, under
 * qmv_32_avx2.c's PF_L1) decoded 1.10x faster into L2 at one thread
 * (alternating pmbench, AMD EPYC Zen 4, 32 MiB L3), where the L3-resident
 * default model runs 0.89x. */
static void mark_far(pm_engine *e, pm_layer *layers, size_t n)
{
	const pm_model *m = e->m;
	e->step_bytes = n;
	e->llc_bytes = llc_bytes();
	uint32_t far = e->llc_bytes > 0 && n > e->llc_bytes;
	for (int l = 0; l < m->n_layers; l++) {
		pm_weight *ws[N_MATS] = LAYER_MATS(&layers[l]);
		for (int i = 0; i < N_MATS; i++)
			ws[i]->far = far;
	}
	e->output.far = far;
}

static size_t padded(const pm_weight *w)
{
	return ((size_t)w->rows * w->row_bytes + 63) / 64 * 64;
}

int panels_build(pm_engine *e)
{
	const pm_model *m = e->m;
	e->layers = m->layers;
	e->output = m->output;
	e->panel_bytes = e->kx8_bytes = e->q32x8_bytes = e->copy_bytes = 0;
	uint32_t ol = output_layout(e);
	size_t bytes = in_map(e, &m->output, ol) ? padded(&m->output) : 0;
	size_t step = (size_t)m->output.rows * m->output.row_bytes; /* a decode step's reads */
	for (int l = 0; l < m->n_layers; l++) {
		const pm_layer *L = &m->layers[l];
		const pm_weight *ws[N_MATS] = LAYER_MATS(L);
		for (int i = 0; i < N_MATS; i++) {
			uint32_t layout = repack_layout(e, ws[i]);
			if (in_map(e, ws[i], layout))
				bytes += padded(ws[i]);
			step += (size_t)ws[i]->rows * ws[i]->row_bytes;
		}
	}
	if (bytes == 0) {
		e->step_bytes = e->llc_bytes = 0; /* no kernel here prefetches */
		return PM_OK;
	}
	e->panel_layers = calloc((size_t)m->n_layers, sizeof *e->panel_layers);
	e->panel_mem = map_huge(bytes, &e->panel_map);
	if (!e->panel_layers || !e->panel_mem) {
		panels_free(e);
		e->layers = m->layers;
		e->output = m->output;
		return PM_ERR_NOMEM; /* the caller names it */
	}
	uint8_t *at = e->panel_mem;
	for (int l = 0; l < m->n_layers; l++) {
		pm_layer *P = &e->panel_layers[l];
		*P = m->layers[l];
		pm_weight *ws[N_MATS] = LAYER_MATS(P);
		for (int i = 0; i < N_MATS; i++) {
			uint32_t layout = repack_layout(e, ws[i]);
			if (in_map(e, ws[i], layout)) {
				size_t n = padded(ws[i]);
				repack(e, ws[i], layout, at);
				at += n;
			}
		}
	}
	if (in_map(e, &e->output, ol))
		repack(e, &e->output, ol, at);
	e->layers = e->panel_layers;
	mark_far(e, e->panel_layers, step);
	return PM_OK;
}

void panels_free(pm_engine *e)
{
	free(e->panel_layers);
	if (e->panel_mem)
		munmap(e->panel_mem, e->panel_map);
	e->panel_map = 0;
	e->panel_layers = NULL;
	e->panel_mem = NULL;
	e->panel_bytes = 0;
	e->kx8_bytes = 0;
	e->q32x8_bytes = 0;
	e->copy_bytes = 0;
	e->step_bytes = 0;
	e->llc_bytes = 0;
}
