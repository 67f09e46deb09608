/*
 * engine_api.c: the engine object: configuration, build, free, and the
 * public API engine.h declares.
 *
 * B_max slots share one paged KV cache. Every step admits waiting requests
 * into free slots, runs at most one prefill chunk per prefilling slot, then
 * one forward over every decoding slot: a plain decode row each, or (with
 * n-gram speculation) the last token plus up to spec_k draft tokens, verified
 * in that same forward and rolled back where rejected. All rows of a forward
 * go through batch-invariant kernels (kernels.h), so a request's tokens do
 * not depend on what else is batched with it, nor on whether its logits came
 * from a prefill, decode or verify row.
 *
 * The stages, one file each (engine_internal.h holds their shared types):
 * pool.c (threads and jobs), forward.c (the forward pass), kv.c (KV
 * blocks), sample.c (sampling), stepmetrics.c (metrics), spec.c (n-gram
 * drafts), sched.c (admission, preemption, prefill and decode steps).
 * Memory: engine_build allocates everything at create time and
 * pm_engine_free releases it (pool_start pairs with pool_stop); the step
 * loop allocates nothing. Every entry point validates its arguments and
 * returns a status; nothing exits.
 *
 * The backend seam (DESIGN.md decision 8): the scheduler reaches the compute
 * backend only as a device runtime would offer it: load (engine_build),
 * reserve KV (kv_reserve), run a ragged batch of rows (forward_rows) and
 * truncate a slot (kv_truncate). The CPU kernels are the one backend.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actquant.h"
#include "engine_internal.h"
#include "grammar.h"
#include "grammar_mask.h"
#include "panels.h"

void pm_engine_config_default(pm_engine_config *c)
{
	memset(c, 0, sizeof *c);
	c->b_max = 8;
	c->spec_k = 4;
	c->spec_ngram_min = PM_SPEC_NGRAM_MIN_DEFAULT;
	c->prefill_chunk = 64;
	c->block_size = 16;
	c->kv_blocks = 0;
	c->max_waiting = 256;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN); /* the online CPUs, 1..64 */
	c->threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int32_t)cpus;
	c->step_ring = 4096;
	c->kernel = PM_KERNEL_AUTO;
}

static int check_config(pm_engine *e, const pm_engine_config *c)
{
	if (c->b_max < 1 || c->b_max > PM_MAX_BATCH)
		return seterr(e, PM_ERR_ARG, "b_max: %d not in 1..%d", (int)c->b_max, PM_MAX_BATCH);
	if (c->spec_k < 0 || c->spec_k > PM_MAX_SPEC_K)
		return seterr(e, PM_ERR_ARG, "spec_k: %d not in 0..%d", (int)c->spec_k, PM_MAX_SPEC_K);
	if (c->spec_ngram_min < 0 || c->spec_ngram_min > PM_SPEC_NGRAM_MAX)
		return seterr(e, PM_ERR_ARG, "spec_ngram_min: %d not 0 or in 1..%d", (int)c->spec_ngram_min,
			      PM_SPEC_NGRAM_MAX);
	if (c->prefill_chunk < 1)
		return seterr(e, PM_ERR_ARG, "prefill_chunk: %d < 1", (int)c->prefill_chunk);
	if (c->block_size < 1)
		return seterr(e, PM_ERR_ARG, "block_size: %d < 1", (int)c->block_size);
	if (c->kv_blocks < 0)
		return seterr(e, PM_ERR_ARG, "kv_blocks: %d < 0", (int)c->kv_blocks);
	if (c->ctx != 0 && (c->ctx < 2 || c->ctx > (1 << 22)))
		return seterr(e, PM_ERR_ARG, "ctx: %d not 0 or in 2..%d", (int)c->ctx, 1 << 22);
	if (c->max_waiting < 0 || c->max_waiting > (1 << 24))
		return seterr(e, PM_ERR_ARG, "max_waiting: %d not in 0..%d", (int)c->max_waiting,
			      1 << 24);
	if (c->threads < 1 || c->threads > 64)
		return seterr(e, PM_ERR_ARG, "threads: %d not in 1..64", (int)c->threads);
	if (c->step_ring < 1 || c->step_ring > (1 << 24))
		return seterr(e, PM_ERR_ARG, "step_ring: %d not in 1..%d", (int)c->step_ring, 1 << 24);
	return PM_OK;
}

/* calloc of n*size bytes with an overflow check; NULL on failure. */
static void *alloc(size_t n, size_t size)
{
	size_t b;
	if (__builtin_mul_overflow(n, size, &b))
		return NULL;
	return calloc(b ? n : 1, b ? size : 1);
}

/* alloc_lines is alloc at a cache-line (64-byte) boundary: the matmul
 * outputs' rows then start on a line, so two threads writing the columns
 * either side of a chunk boundary at a multiple of 16 floats (forward.c:
 * MM_UNIT) never share a line. calloc's large blocks start 16 bytes into a
 * page: every boundary shared one line per row (F16 prefill at two
 * threads: 3-5 % of its time). Zeroed as calloc's are. */
static void *alloc_lines(size_t n, size_t size)
{
	size_t b;
	if (__builtin_mul_overflow(n, size, &b) || b > SIZE_MAX - 64)
		return NULL;
	b = b ? (b + 63) / 64 * 64 : 64;
	void *p = aligned_alloc(64, b);
	if (p)
		memset(p, 0, b);
	return p;
}

/* ALLOC_BY sets ptr to fn(n, sizeof *ptr) (alloc or alloc_lines), or
 * returns PM_ERR_NOMEM from the caller, naming ptr. */
#define ALLOC_BY(fn, ptr, n)                                                            \
	do {                                                                            \
		if (!((ptr) = fn((size_t)(n), sizeof *(ptr))))                          \
			return seterr(e, PM_ERR_NOMEM, "out of memory allocating %s (%zu x %zu bytes)", \
				      #ptr, (size_t)(n), sizeof *(ptr));                \
	} while (0)
#define ALLOC(ptr, n) ALLOC_BY(alloc, ptr, n)
#define ALLOC_LINES(ptr, n) ALLOC_BY(alloc_lines, ptr, n)

static int engine_build(pm_engine *e, const pm_model *m, const pm_engine_config *cfg)
{
	int rc = check_config(e, cfg);
	if (rc)
		return rc;
	if ((rc = forward_check_model(e, m)))
		return rc;
	e->m = m;
	e->cfg = *cfg;
	if (e->cfg.spec_ngram_min == 0)
		e->cfg.spec_ngram_min = PM_SPEC_NGRAM_MIN_DEFAULT;
	if ((rc = forward_select_kernels(e)))
		return rc;
	if ((rc = panels_build(e)))
		return seterr(e, rc, "out of memory repacking the F16 weights into panels");
	forward_build_geo(e);
	e->dim = m->dim;
	e->n_layers = m->n_layers;
	e->n_heads = m->n_heads;
	e->n_kv_heads = m->n_kv_heads;
	e->hd = m->head_dim;
	e->qdim = m->n_heads * m->head_dim;
	e->kvdim = m->n_kv_heads * m->head_dim;
	e->ffn = m->ffn_dim;
	e->vocab = m->vocab;
	e->ctx = e->cfg.ctx ? e->cfg.ctx : m->ctx_len < PM_DEFAULT_CTX ? m->ctx_len : PM_DEFAULT_CTX;
	if (e->ctx > m->ctx_len)
		return seterr(e, PM_ERR_ARG, "ctx: %d exceeds the model's context_length %d",
			      (int)e->cfg.ctx, m->ctx_len);
	e->cfg.ctx = e->ctx;
	e->attn_scale = 1.0f / sqrtf((float)e->hd);

	int b = e->cfg.b_max;
	e->bs = e->cfg.block_size < e->ctx ? e->cfg.block_size : e->ctx;
	e->cfg.block_size = e->bs;
	e->blocks_per_slot = kv_blocks_for(e, e->ctx);
	if (e->cfg.kv_blocks == 0)
		e->cfg.kv_blocks = b * e->blocks_per_slot;
	if (e->cfg.kv_blocks < e->blocks_per_slot)
		return seterr(e, PM_ERR_ARG,
			      "kv_blocks: %d is fewer than the %d blocks one request needs to reach "
			      "the context limit (%d tokens, block_size %d)",
			      (int)e->cfg.kv_blocks, e->blocks_per_slot, e->ctx, e->bs);
	e->n_blocks = e->cfg.kv_blocks;
	e->n_reqs = e->cfg.max_waiting + b;

	int chunk = e->cfg.prefill_chunk < e->ctx ? e->cfg.prefill_chunk : e->ctx;
	int decode_rows = b * (e->cfg.spec_k + 1);
	int prefill_rows = b * chunk < FORWARD_ROWS_CAP ? b * chunk : FORWARD_ROWS_CAP;
	e->max_rows = decode_rows > prefill_rows ? decode_rows : prefill_rows;
	e->max_logit_rows = decode_rows;
	int g = e->n_heads / e->n_kv_heads;

	size_t kv = (size_t)e->n_layers * e->n_blocks * e->bs;
	ALLOC(e->rope_cos, (size_t)e->ctx * (e->hd / 2));
	ALLOC(e->rope_sin, (size_t)e->ctx * (e->hd / 2));
	if (__builtin_mul_overflow(kv, (size_t)e->kvdim, &kv))
		return seterr(e, PM_ERR_NOMEM, "kv cache: size overflows");
	ALLOC(e->kcache, kv);
	ALLOC(e->vcache, kv);
	if (prefix_alloc(e) != 0)
		return seterr(e, PM_ERR_NOMEM, "out of memory allocating the prefix cache's bookkeeping (%d blocks of %d tokens)",
			      e->n_blocks, e->bs);
	ALLOC(e->slots, b);
	ALLOC(e->tables, (size_t)b * e->blocks_per_slot);
	ALLOC(e->reqs, e->n_reqs);
	ALLOC(e->req_tokens, (size_t)e->n_reqs * e->ctx);
	ALLOC(e->req_emit, (size_t)e->n_reqs * e->ctx);
	ALLOC(e->free_reqs, e->n_reqs);
	ALLOC(e->wait, e->n_reqs);
	ALLOC(e->retired, e->n_reqs);
	ALLOC_LINES(e->x, (size_t)e->max_rows * e->dim);
	ALLOC_LINES(e->xb, (size_t)e->max_rows * e->dim);
	ALLOC_LINES(e->q, (size_t)e->max_rows * e->qdim);
	ALLOC_LINES(e->kr, (size_t)e->max_rows * e->kvdim);
	ALLOC_LINES(e->vr, (size_t)e->max_rows * e->kvdim);
	ALLOC_LINES(e->att, (size_t)e->max_rows * e->qdim);
	ALLOC_LINES(e->hb, (size_t)e->max_rows * e->ffn);
	ALLOC_LINES(e->hb2, (size_t)e->max_rows * e->ffn);
	ALLOC(e->lx, (size_t)e->max_logit_rows * e->dim);
	ALLOC(e->logits, (size_t)e->max_logit_rows * e->vocab);
	ALLOC(e->att_scratch, (size_t)e->cfg.threads * ATT_ROWS * g * e->ctx);
	int widest = e->dim > e->qdim ? e->dim : e->qdim;
	widest = widest > e->ffn ? widest : e->ffn;
	e->w_scratch_len = (size_t)4 * widest;
	ALLOC(e->w_scratch, (size_t)e->cfg.threads * e->w_scratch_len);
	/* every matmul input is at most widest wide (vocab is only an output) */
	ALLOC(e->aq32, (size_t)e->max_rows * (size_t)(widest / 32 + 1) * sizeof(pm_act32));
	ALLOC(e->aq256, (size_t)e->max_rows * (size_t)(widest / 256 + 1) * sizeof(pm_act256));
	ALLOC(e->row_tok, e->max_rows);
	ALLOC(e->row_pos, e->max_rows);
	ALLOC(e->row_slot, e->max_rows);
	ALLOC(e->logit_row, e->max_rows);
	ALLOC(e->order, b);
	ALLOC(e->sp, e->vocab);
	ALLOC(e->sidx, e->vocab);
	ALLOC(e->pl, e->vocab);
	ALLOC(e->pcnt, e->vocab);
	ALLOC(e->lp, (size_t)b * (PM_MAX_SPEC_K + 1));
	ALLOC(e->top_id, (size_t)b * (PM_MAX_SPEC_K + 1) * PM_MAX_TOP_LOGPROBS);
	ALLOC(e->top_lp, (size_t)b * (PM_MAX_SPEC_K + 1) * PM_MAX_TOP_LOGPROBS);
	ALLOC(e->outs, b);
	ALLOC(e->out_req, b);
	ALLOC(e->ring, e->cfg.step_ring);
	if (e->cfg.threads > 1) {
		size_t nt = (size_t)e->cfg.threads - 1;
		e->workers = alloc(1, nt * (sizeof(pthread_t) + sizeof(worker_arg)));
		if (!e->workers)
			return seterr(e, PM_ERR_NOMEM, "out of memory allocating threads");
	}

	forward_build_rope(e);
	kv_init(e);
	for (int i = 0; i < b; i++) {
		e->slots[i].req = -1;
		e->slots[i].table = e->tables + (size_t)i * e->blocks_per_slot;
	}
	for (int i = 0; i < e->n_reqs; i++) {
		e->reqs[i].slot = -1;
		e->reqs[i].seq = e->req_tokens + (size_t)i * e->ctx;
		e->reqs[i].emit = e->req_emit + (size_t)i * e->ctx;
		e->free_reqs[i] = e->n_reqs - 1 - i;
	}
	e->n_free_reqs = e->n_reqs;
	e->next_id = 1;
	e->met.slots = b;
	e->met.kv_blocks_total = e->n_blocks;
	return pool_start(e);
}

void pm_engine_free(pm_engine *e)
{
	if (!e)
		return;
	pool_stop(e);
	if (e->reqs)
		for (int i = 0; i < e->n_reqs; i++)
			pm_grammar_release(e->reqs[i].p.grammar);
	gmask_free(e);
	free(e->workers);
	free(e->rope_cos);
	free(e->rope_sin);
	free(e->kcache);
	free(e->vcache);
	prefix_free(e);
	panels_free(e);
	free(e->slots);
	free(e->tables);
	free(e->reqs);
	free(e->req_tokens);
	free(e->req_emit);
	free(e->free_reqs);
	free(e->wait);
	free(e->retired);
	free(e->x);
	free(e->xb);
	free(e->q);
	free(e->kr);
	free(e->vr);
	free(e->att);
	free(e->hb);
	free(e->hb2);
	free(e->lx);
	free(e->logits);
	free(e->att_scratch);
	free(e->w_scratch);
	free(e->aq32);
	free(e->aq256);
	free(e->row_tok);
	free(e->row_pos);
	free(e->row_slot);
	free(e->logit_row);
	free(e->order);
	free(e->sp);
	free(e->sidx);
	free(e->pl);
	free(e->pcnt);
	free(e->lp);
	free(e->top_id);
	free(e->top_lp);
	free(e->outs);
	free(e->out_req);
	free(e->ring);
	if (e->owns_model)
		pm_model_free(&e->owned_model);
	free(e);
}

static void copy_err(char *err, size_t errlen, const char *msg)
{
	if (err && errlen > 0)
		snprintf(err, errlen, "%s", msg);
}

static int create(pm_engine *e, const pm_model *m, const pm_engine_config *cfg, pm_engine **out,
		  char *err, size_t errlen)
{
	pm_engine_config def;
	if (!cfg) {
		pm_engine_config_default(&def);
		cfg = &def;
	}
	int rc = engine_build(e, m, cfg);
	if (rc) {
		copy_err(err, errlen, e->err);
		pm_engine_free(e);
		return rc;
	}
	*out = e;
	return PM_OK;
}

int pm_engine_create(const pm_model *m, const pm_engine_config *cfg, pm_engine **out, char *err,
		     size_t errlen)
{
	if (!out || !m) {
		copy_err(err, errlen, "pm_engine_create: NULL argument");
		return PM_ERR_ARG;
	}
	*out = NULL;
	pm_engine *e = calloc(1, sizeof *e);
	if (!e) {
		copy_err(err, errlen, "out of memory allocating the engine");
		return PM_ERR_NOMEM;
	}
	return create(e, m, cfg, out, err, errlen);
}

int pm_engine_open(const char *path, const pm_engine_config *cfg, pm_engine **out, char *err,
		   size_t errlen)
{
	if (!out || !path) {
		copy_err(err, errlen, "pm_engine_open: NULL argument");
		return PM_ERR_ARG;
	}
	*out = NULL;
	pm_engine *e = calloc(1, sizeof *e);
	if (!e) {
		copy_err(err, errlen, "out of memory allocating the engine");
		return PM_ERR_NOMEM;
	}
	int rc = pm_model_load(path, &e->owned_model, err, errlen);
	if (rc) {
		free(e);
		return rc;
	}
	e->owns_model = 1;
	return create(e, &e->owned_model, cfg, out, err, errlen);
}

const char *pm_engine_errmsg(const pm_engine *e)
{
	return e ? e->err : "no engine";
}

int pm_engine_model(const pm_engine *e, const pm_model **m)
{
	if (!e || !m)
		return PM_ERR_ARG;
	*m = e->m;
	return PM_OK;
}

int pm_engine_get_config(const pm_engine *e, pm_engine_config *c)
{
	if (!e || !c)
		return PM_ERR_ARG;
	*c = e->cfg;
	return PM_OK;
}

int pm_kernel_runs(int32_t kernel)
{
	switch (kernel) {
	case PM_KERNEL_AUTO:
	case PM_KERNEL_PORTABLE:
		return 1;
	case PM_KERNEL_AVX2:
		return pm_cpu_has_isa(PM_ISA_AVX2);
	case PM_KERNEL_AVXVNNI:
		return pm_cpu_has_isa(PM_ISA_AVXVNNI);
	case PM_KERNEL_AVX512VNNI:
		return pm_cpu_has_isa(PM_ISA_AVX512VNNI);
	case PM_KERNEL_NEON:
		return pm_cpu_has_isa(PM_ISA_NEON);
	}
	return 0;
}

int pm_engine_kernel_name(const pm_engine *e, const char **name)
{
	if (!e || !name)
		return PM_ERR_ARG;
	*name = pm_isa_name(e->isa);
	return PM_OK;
}

int pm_engine_f16_panel_bytes(const pm_engine *e, uint64_t *bytes)
{
	if (!e || !bytes)
		return PM_ERR_ARG;
	*bytes = e->panel_bytes;
	return PM_OK;
}

int pm_engine_kx8_bytes(const pm_engine *e, uint64_t *bytes)
{
	if (!e || !bytes)
		return PM_ERR_ARG;
	*bytes = e->kx8_bytes;
	return PM_OK;
}

int pm_engine_q32x8_bytes(const pm_engine *e, uint64_t *bytes)
{
	if (!e || !bytes)
		return PM_ERR_ARG;
	*bytes = e->q32x8_bytes;
	return PM_OK;
}

int pm_engine_row_copy_bytes(const pm_engine *e, uint64_t *bytes)
{
	if (!e || !bytes)
		return PM_ERR_ARG;
	*bytes = e->copy_bytes;
	return PM_OK;
}

int pm_engine_cache_fit(const pm_engine *e, uint64_t *llc, uint64_t *step)
{
	if (!e || !llc || !step)
		return PM_ERR_ARG;
	*llc = e->llc_bytes;
	*step = e->step_bytes;
	return PM_OK;
}

static int check_tokens(pm_engine *e, const char *what, const int32_t *t, int n)
{
	for (int i = 0; i < n; i++)
		if (t[i] < 0 || t[i] >= e->vocab)
			return seterr(e, PM_ERR_ARG, "%s[%d]: token %d outside the vocabulary 0..%d",
				      what, i, (int)t[i], e->vocab - 1);
	return PM_OK;
}

int pm_engine_set_token_bytes(pm_engine *e, const uint8_t *bytes, const uint32_t *offs, int32_t n)
{
	if (!e)
		return PM_ERR_ARG;
	if (!bytes || !offs || n != e->vocab)
		return seterr(e, PM_ERR_ARG, "token bytes: %d tokens, the vocabulary has %d", (int)n,
			      e->vocab);
	return gmask_build(e, bytes, offs, n);
}

int pm_engine_submit(pm_engine *e, const int32_t *prompt, int32_t n, const pm_params *p,
		     uint64_t *id)
{
	if (!e)
		return PM_ERR_ARG;
	if (!p || !id || (n > 0 && !prompt))
		return seterr(e, PM_ERR_ARG, "submit: NULL argument");
	sched_reclaim(e);
	int rc;
	if (n < 1)
		return seterr(e, PM_ERR_ARG, "prompt: empty");
	if (n >= e->ctx)
		return seterr(e, PM_ERR_ARG,
			      "prompt: %d tokens do not fit the context of %d (at most %d)", (int)n,
			      e->ctx, e->ctx - 1);
	if ((rc = check_tokens(e, "prompt", prompt, n)))
		return rc;
	if (p->max_tokens < 1)
		return seterr(e, PM_ERR_ARG, "max_tokens: %d < 1", (int)p->max_tokens);
	if (!(p->temperature >= 0) || isinf(p->temperature))
		return seterr(e, PM_ERR_ARG, "temperature: %g is not a finite number >= 0",
			      (double)p->temperature);
	if (p->top_k < 0)
		return seterr(e, PM_ERR_ARG, "top_k: %d < 0", (int)p->top_k);
	if (!(p->top_p >= 0 && p->top_p <= 1))
		return seterr(e, PM_ERR_ARG, "top_p: %g not in 0..1", (double)p->top_p);
	if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
		return seterr(e, PM_ERR_ARG, "presence_penalty: %g not in -2..2",
			      (double)p->presence_penalty);
	if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
		return seterr(e, PM_ERR_ARG, "frequency_penalty: %g not in -2..2",
			      (double)p->frequency_penalty);
	if (!(p->repetition_penalty >= 0) || isinf(p->repetition_penalty))
		return seterr(e, PM_ERR_ARG, "repetition_penalty: %g is not a finite number >= 0",
			      (double)p->repetition_penalty);
	if (p->logprobs != 0 && p->logprobs != 1)
		return seterr(e, PM_ERR_ARG, "logprobs: %d is not 0 or 1", (int)p->logprobs);
	if (p->top_logprobs < 0 || p->top_logprobs > PM_MAX_TOP_LOGPROBS)
		return seterr(e, PM_ERR_ARG, "top_logprobs: %d not in 0..%d", (int)p->top_logprobs,
			      PM_MAX_TOP_LOGPROBS);
	if (p->n_stop < 0 || p->n_stop > PM_MAX_STOP)
		return seterr(e, PM_ERR_ARG, "stop: %d tokens, at most %d", (int)p->n_stop,
			      PM_MAX_STOP);
	if ((rc = check_tokens(e, "stop", p->stop, p->n_stop)))
		return rc;
	if (!(p->min_p >= 0 && p->min_p <= 1))
		return seterr(e, PM_ERR_ARG, "min_p: %g not in 0..1", (double)p->min_p);
	if (p->grammar && !e->gm)
		return seterr(e, PM_ERR_STATE,
			      "grammar: the engine has no token bytes yet (pm_engine_set_token_bytes)");

	int direct = e->n_waiting == 0 && e->n_running < e->cfg.b_max &&
		     kv_blocks_for(e, n) <= e->n_free - kv_reserved_blocks(e);
	if (!direct && e->n_waiting >= e->cfg.max_waiting)
		return seterr(e, PM_ERR_FULL, "waiting queue full (%d requests wait)",
			      (int)e->n_waiting);
	if (e->n_free_reqs == 0)
		return seterr(e, PM_ERR_INTERNAL, "BUG: no free request record");
	int ri = e->free_reqs[--e->n_free_reqs];
	req *r = &e->reqs[ri];
	int32_t *seq = r->seq;
	int64_t *emit = r->emit;
	pm_grammar_release(r->p.grammar); /* the record's last request's */
	memset(r, 0, sizeof *r);
	r->seq = seq;
	r->emit = emit;
	r->slot = -1;
	r->id = e->next_id++;
	r->p = *p;
	if (p->grammar) {
		if ((rc = gmask_start(e, r))) {
			r->p.grammar = NULL;
			e->free_reqs[e->n_free_reqs++] = ri;
			return rc;
		}
		pm_grammar_retain(p->grammar);
	}
	memcpy(r->seq, prompt, (size_t)n * sizeof(int32_t));
	r->n_seq = n;
	int64_t now = pm_now();
	r->st.arrival_ns = p->arrival_ns ? p->arrival_ns : now;
	r->st.prompt_tokens = n;
	r->st.emit_ns = r->emit;
	sample_seed(r->rng, p->seed);
	if (direct) {
		sched_admit(e, ri, sched_free_slot(e), now);
	} else {
		r->state = REQ_WAITING;
		e->wait[(e->wait_head + e->n_waiting) % e->n_reqs] = ri;
		e->n_waiting++;
	}
	*id = r->id;
	return PM_OK;
}

int pm_engine_step(pm_engine *e, const pm_output **outs, int32_t *n_out)
{
	if (!e)
		return PM_ERR_ARG;
	if (!outs || !n_out)
		return seterr(e, PM_ERR_ARG, "step: NULL argument");
	sched_reclaim(e);
	e->n_outs = 0;
	*outs = e->outs;
	*n_out = 0;
	if (e->n_running == 0 && e->n_waiting == 0)
		return PM_OK;
	sched_step(e);
	*n_out = e->n_outs;
	return PM_OK;
}

int pm_engine_cancel(pm_engine *e, uint64_t id, const pm_request_stats **stats)
{
	if (!e)
		return PM_ERR_ARG;
	if (!stats)
		return seterr(e, PM_ERR_ARG, "cancel: NULL argument");
	sched_reclaim(e);
	int ri = -1;
	for (int i = 0; i < e->n_reqs; i++)
		if (e->reqs[i].id == id &&
		    (e->reqs[i].state == REQ_WAITING || e->reqs[i].state == REQ_RUNNING)) {
			ri = i;
			break;
		}
	if (ri < 0)
		return seterr(e, PM_ERR_NOTFOUND, "cancel: no running or waiting request %llu",
			      (unsigned long long)id);
	if (e->reqs[ri].state == REQ_WAITING) {
		int k = 0;
		while (e->wait[(e->wait_head + k) % e->n_reqs] != ri)
			k++;
		for (; k + 1 < e->n_waiting; k++)
			e->wait[(e->wait_head + k) % e->n_reqs] =
				e->wait[(e->wait_head + k + 1) % e->n_reqs];
		e->n_waiting--;
	}
	sched_finish(e, ri, PM_FINISH_ABORT);
	if (!e->cfg.no_metrics)
		metrics_finished_at(e, &e->reqs[ri], pm_now());
	*stats = &e->reqs[ri].st;
	return PM_OK;
}

int pm_engine_load(const pm_engine *e, int32_t *running, int32_t *waiting)
{
	if (!e || !running || !waiting)
		return PM_ERR_ARG;
	*running = e->n_running;
	*waiting = e->n_waiting;
	return PM_OK;
}

int pm_engine_get_metrics(pm_engine *e, const pm_engine_metrics **m)
{
	if (!e || !m)
		return PM_ERR_ARG;
	e->met.running = e->n_running;
	e->met.waiting = e->n_waiting;
	e->met.slots = e->cfg.b_max;
	e->met.kv_blocks_total = e->n_blocks;
	e->met.kv_blocks_used = e->n_blocks - e->n_free;
	e->met.kv_blocks_cached = e->n_cached;
	*m = &e->met;
	return PM_OK;
}

int pm_engine_take_steps(pm_engine *e, pm_step_record *dst, int32_t cap, int32_t *n)
{
	if (!e || !n || (cap > 0 && !dst))
		return PM_ERR_ARG;
	int k = e->ring_n < cap ? e->ring_n : (cap > 0 ? cap : 0);
	for (int i = 0; i < k; i++)
		dst[i] = e->ring[(e->ring_head + i) % e->cfg.step_ring];
	e->met.steps_dropped += e->ring_n - k;
	e->ring_head = 0;
	e->ring_n = 0;
	*n = k;
	return PM_OK;
}

int pm_engine_set_no_metrics(pm_engine *e, int32_t off)
{
	if (!e)
		return PM_ERR_ARG;
	e->cfg.no_metrics = off != 0;
	return PM_OK;
}

int pm_engine_score(pm_engine *e, const int32_t *tokens, int32_t n, float *logits)
{
	if (!e)
		return PM_ERR_ARG;
	if (!tokens || !logits)
		return seterr(e, PM_ERR_ARG, "score: NULL argument");
	sched_reclaim(e);
	if (e->n_running || e->n_waiting)
		return seterr(e, PM_ERR_STATE, "score: the engine is busy (%d running, %d waiting)",
			      (int)e->n_running, (int)e->n_waiting);
	if (n < 1 || n > e->ctx)
		return seterr(e, PM_ERR_ARG, "score: %d tokens not in 1..%d", (int)n, e->ctx);
	int rc = check_tokens(e, "tokens", tokens, n);
	if (rc)
		return rc;
	slot *s = &e->slots[0];
	kv_reserve(e, s, n);
	int chunk = e->max_rows < e->max_logit_rows ? e->max_rows : e->max_logit_rows;
	for (int at = 0; at < n; at += chunk) {
		int c = n - at < chunk ? n - at : chunk;
		for (int i = 0; i < c; i++) {
			e->row_tok[i] = tokens[at + i];
			e->row_pos[i] = at + i;
			e->row_slot[i] = 0;
			e->logit_row[i] = i;
		}
		forward_rows(e, c, c);
		memcpy(logits + (size_t)at * e->vocab, e->logits, (size_t)c * e->vocab * sizeof(float));
	}
	kv_truncate(e, s, 0);
	return PM_OK;
}
