/*
 * engine.c: picometer's continuous-batching Llama engine.
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
 * Sections: model · kernels · batch/scheduler · sampler · metrics · API.
 * Memory: engine_build allocates everything at create time and
 * pm_engine_free releases it (build_workers pairs with stop_workers); the
 * step loop allocates nothing.
 *
 * The backend seam (DESIGN.md decision 8): the scheduler reaches the compute
 * backend only as a device runtime would offer it: load (engine_build),
 * reserve KV (kv_reserve), run a ragged batch of rows (forward) and truncate
 * a slot (kv_truncate). The CPU kernels are the one backend.
 */
#include "engine.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actquant.h"
#include "kernels.h"
#include "matmul.h"
#include "arch.h"
#include "rope.h"

/* n-gram lookup: the longest suffix of the context (at most NGRAM_MAX tokens,
 * at least NGRAM_MIN) that occurred before; the tokens after it are the draft.
 * With byte tokens a 1-token match predicts little: on the default model
 * ~1-2% of such drafts were accepted. */
#define NGRAM_MAX 8
#define NGRAM_MIN 2

/*
 * A request whose draft was rejected outright skips its next 2^f - 1
 * lookups (f failures in a row, at most SPEC_BACKOFF_MAX); any accepted
 * draft token resets it. Text the model copies from its context keeps
 * drafting every step; text it does not copy stops paying for verify rows
 * that are rejected. On the random default model (which never copies) the
 * two rules took speculation from 8-22% slower than none to within 1-3%.
 */
#define SPEC_BACKOFF_MAX 63

/*
 * Draft rows share a budget: a verify forward holds at most
 * max(SPEC_ROWS, slots) rows. Up to a few rows a forward costs about the same
 * (the weights are the memory traffic); beyond that every row costs compute,
 * and drafts that are mostly rejected would make a full batch slower than no
 * speculation at all. The longest n-gram matches get the budget first.
 */
#define SPEC_ROWS 8

/* Most rows of one forward pass (prefill rows beyond it run in several
 * forwards of the same step; results do not change, kernels are invariant). */
#define FORWARD_ROWS_CAP 256

enum { REQ_FREE = 0, REQ_WAITING, REQ_RUNNING, REQ_RETIRED };
enum { SLOT_FREE = 0, SLOT_PREFILL, SLOT_DECODE };

/* One request, from Submit until the call after it finished. */
typedef struct {
	uint64_t id;
	int32_t state; /* REQ_* */
	int32_t slot;  /* while running, else -1 */
	pm_params p;
	int32_t *seq;  /* [ctx] prompt, then output tokens */
	int32_t n_seq;
	int64_t *emit; /* [ctx] end time of every emitting step */
	pm_request_stats st;
	uint64_t rng[4]; /* xoshiro256** state, seeded from p.seed */
	int32_t spec_skip;  /* decode steps left without a draft lookup */
	int32_t spec_fails; /* drafts in a row with nothing accepted */
} req;

/* One slot of the batch. */
typedef struct {
	int32_t req;         /* request index, -1 when free */
	int32_t state;       /* SLOT_* */
	int32_t n_kv;        /* positions 0..n_kv-1 hold this request's K/V */
	int32_t prefill_end; /* prefill covers seq[0..prefill_end) */
	int32_t n_blocks;    /* entries of table in use */
	int32_t *table;      /* [blocks_per_slot] KV block of positions b*bs.. */
	int64_t admit_order; /* larger = admitted more recently */
	/* per step */
	int32_t draft[PM_MAX_SPEC_K];
	int32_t n_draft;
	int32_t match;     /* n-gram length the draft came from */
	int32_t row0;      /* first row of this slot in the forward */
	int32_t pf_start;  /* first position prefilled this step */
	int32_t emit0;     /* seq index of the first token emitted this step */
	int32_t n_emitted; /* tokens emitted this step */
	int32_t fin;       /* finish reason caused this step */
	int32_t busy;      /* 1 = took part in this step's prefill */
} slot;

/*
 * A parallel job is cut into chunks c = 0..nc-1; fn(e, arg, c, nc, tid)
 * runs chunk c on compute thread tid (0 = the caller), which picks the
 * thread's scratch. Which thread runs a chunk varies from run to run, so
 * a chunk's result must depend only on c and nc.
 */
typedef void (*job_fn)(struct pm_engine *e, const void *arg, int c, int nc, int tid);

/* Chunks of a matmul job per compute thread (mm_chunks), and the most a
 * job has (threads <= 64). */
#define MM_CHUNKS_PER_THREAD 4
#define MM_GEO_MAX (MM_CHUNKS_PER_THREAD * 64)

struct pm_engine {
	char err[PM_ERRMSG_MAX];
	pm_engine_config cfg;
	const pm_model *m;
	pm_model owned_model; /* pm_engine_open's model */
	int owns_model;
	const pm_kernels *k;
	pm_dequant_fn dq[PM_TYPE_COUNT]; /* row dequantizers of the chosen kernel set */
	pm_qmm qmm[PM_TYPE_COUNT];       /* integer kernels (actquant.h); fn NULL: float path */

	/* model shape */
	int dim, n_layers, n_heads, n_kv_heads, hd, qdim, kvdim, ffn, vocab, ctx;
	float attn_scale;

	/* RoPE tables */
	float *rope_cos; /* [ctx][hd/2] */
	float *rope_sin; /* [ctx][hd/2] */

	/* paged KV cache */
	int bs;              /* tokens per block */
	int n_blocks;        /* blocks in total */
	int blocks_per_slot; /* ceil(ctx/bs) */
	float *kcache;       /* [n_layers][n_blocks][bs][kvdim] */
	float *vcache;       /* [n_layers][n_blocks][bs][kvdim] */
	int32_t *free_blocks; /* [n_blocks] stack of free block ids */
	int32_t n_free;

	/* slots and requests */
	slot *slots;          /* [b_max] */
	int32_t *tables;      /* [b_max][blocks_per_slot] */
	req *reqs;            /* [n_reqs] = max_waiting + b_max */
	int32_t n_reqs;
	int32_t *req_tokens;  /* [n_reqs][ctx] backing req.seq */
	int64_t *req_emit;    /* [n_reqs][ctx] backing req.emit */
	int32_t *free_reqs;   /* [n_reqs] stack */
	int32_t n_free_reqs;
	int32_t *wait;        /* [n_reqs] ring of waiting request indices */
	int32_t wait_head, n_waiting;
	int32_t *retired;     /* [n_reqs] finished last call, freed on the next */
	int32_t n_retired;
	int32_t n_running;
	uint64_t next_id;
	int64_t admit_counter;

	/* forward scratch */
	int max_rows;       /* rows of one forward */
	int rows_n;         /* rows of the current forward (row jobs) */
	int max_logit_rows; /* rows whose logits one forward computes */
	float *x;           /* [max_rows][dim] residual stream */
	float *xb;          /* [max_rows][dim] normed input / projection output */
	float *q;           /* [max_rows][qdim] */
	float *kr;          /* [max_rows][kvdim] */
	float *vr;          /* [max_rows][kvdim] */
	float *att;         /* [max_rows][qdim] attention output */
	float *hb;          /* [max_rows][ffn] gate, then swiglu */
	float *hb2;         /* [max_rows][ffn] up */
	float *lx;          /* [max_logit_rows][dim] final-normed rows */
	float *logits;      /* [max_logit_rows][vocab] */
	float *att_scratch; /* [threads][ATT_ROWS][heads per kv head][ctx] scores */
	float *w_scratch;   /* [threads][w_scratch_len] dequantized weight tiles */
	size_t w_scratch_len; /* 4 rows of the widest matrix */
	char *aq32;  /* [max_rows] a matmul input quantized in 32-blocks (actquant.h) */
	char *aq256; /* [max_rows] the same input in 256-blocks, for the K-quants */
	int32_t *row_tok;   /* [max_rows] */
	int32_t *row_pos;   /* [max_rows] */
	int32_t *row_slot;  /* [max_rows] */
	int32_t *logit_row; /* [max_logit_rows] rows whose logits are wanted */
	int32_t *order;     /* [b_max] slots of the current phase */

	/* sampler scratch */
	float *sp;     /* [vocab] probabilities */
	int32_t *sidx; /* [vocab] token ids */
	float *pl;     /* [vocab] penalized logits */
	float *lp;     /* [b_max][PM_MAX_SPEC_K+1] log-probability of each token a slot emits in a step */
	int32_t *top_id; /* [b_max][PM_MAX_SPEC_K+1][PM_MAX_TOP_LOGPROBS] */
	float *top_lp;   /* [b_max][PM_MAX_SPEC_K+1][PM_MAX_TOP_LOGPROBS] */
	int32_t *pcnt; /* [vocab] output count per token while penalizing; all 0 between calls */

	/* outputs of the current call */
	pm_output *outs;  /* [b_max] */
	int32_t *out_req; /* [b_max] request index of each output */
	int32_t n_outs;

	/* metrics */
	pm_engine_metrics met;
	pm_step_record *ring; /* [step_ring] */
	int32_t ring_head, ring_n;

	/* thread pool (threads > 1; see run_job) */
	uint32_t mm_geo[MM_GEO_MAX + 1]; /* decode chunk bounds, fractions of 2^24 (mm_range) */
	pthread_t *workers; /* [threads-1] */
	int n_workers;      /* started */
	pthread_mutex_t mu;
	pthread_cond_t cv_go;   /* a sleeping worker waits here for a job */
	pthread_cond_t cv_done; /* the caller waits here for the last chunk */
	int sync_ok;            /* mu and cv_go exist */
	uint32_t job_seq;       /* the caller's count of jobs (the word's gen) */
	job_fn job;             /* the current job, published by job_word */
	const void *job_arg;
	/* The words every thread writes, each on its own cache line, away
	 * from the fields above (read by every chunk) and from each other. */
	char pad0[64];
	atomic_uint_fast64_t job_word; /* gen << 32 | chunks << 16 | next chunk to claim */
	char pad1[64];
	atomic_int job_done; /* chunks of the current job finished */
	char pad2[64];
	atomic_int sleepers;     /* workers waiting on cv_go */
	atomic_int caller_waits; /* the caller waits on cv_done */
	atomic_int started;      /* workers that reached worker_main */
	atomic_int quit;
};

static int seterr(pm_engine *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int seterr(pm_engine *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->err, sizeof e->err, fmt, ap);
	va_end(ap);
	return code;
}

int64_t pm_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ============================================================================
 * model: shape checks, RoPE tables, the forward pass over a ragged batch
 */

/* check_weight: w is a [rows][cols] matrix of a type the kernels compute. */
static int check_weight(pm_engine *e, const char *name, int layer, const pm_weight *w, int rows,
			int cols)
{
	size_t rb = pm_type_row_bytes(w->type, cols);
	if (w->data && w->rows == rows && w->cols == cols && rb != 0 && w->row_bytes == rb)
		return PM_OK;
	char what[48];
	if (layer >= 0)
		snprintf(what, sizeof what, "layer %d %s", layer, name);
	else
		snprintf(what, sizeof what, "%s", name);
	return seterr(e, PM_ERR_MODEL,
		      "model: %s: want a [%d][%d] matrix of a supported type, have [%d][%d] type %u",
		      what, rows, cols, (int)w->rows, (int)w->cols, (unsigned)w->type);
}

static int check_model(pm_engine *e, const pm_model *m)
{
	if (m->dim < 1 || m->n_layers < 1 || m->n_layers > PM_MAX_LAYERS || m->n_heads < 1 ||
	    m->n_kv_heads < 1 || m->head_dim < 2 || m->ffn_dim < 1 || m->vocab < 1 || m->ctx_len < 2)
		return seterr(e, PM_ERR_MODEL,
			      "model: bad shape (dim %d, layers %d, heads %d/%d, head_dim %d, ffn %d, "
			      "vocab %d, context %d)",
			      m->dim, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim, m->ffn_dim,
			      m->vocab, m->ctx_len);
	if (m->head_dim % 2 != 0)
		return seterr(e, PM_ERR_MODEL, "model: head_dim %d is odd (RoPE rotates pairs)",
			      m->head_dim);
	if (m->n_heads % m->n_kv_heads != 0)
		return seterr(e, PM_ERR_MODEL, "model: %d heads are not a multiple of %d KV heads",
			      m->n_heads, m->n_kv_heads);
	if ((int64_t)m->n_heads * m->head_dim > (1 << 24) || m->dim > (1 << 24) ||
	    m->ffn_dim > (1 << 26) || m->vocab > (1 << 24) || m->ctx_len > (1 << 22))
		return seterr(e, PM_ERR_MODEL, "model: dimensions too large for this engine");
	if (!(m->rms_eps >= 0) || !(m->rope_theta > 0) || !(m->rope_freq_scale >= 0) ||
	    isinf(m->rope_freq_scale))
		return seterr(e, PM_ERR_MODEL, "model: bad rms_eps %g, rope_theta %g or rope_freq_scale %g",
			      (double)m->rms_eps, (double)m->rope_theta, (double)m->rope_freq_scale);
	if (m->rope_type != PM_ROPE_NORM && m->rope_type != PM_ROPE_NEOX)
		return seterr(e, PM_ERR_MODEL, "model: unknown RoPE type %d", m->rope_type);
	int qd = m->n_heads * m->head_dim, kvd = m->n_kv_heads * m->head_dim, rc;
	if (!m->out_norm)
		return seterr(e, PM_ERR_MODEL, "model: missing output_norm");
	if ((rc = check_weight(e, "token_embd", -1, &m->tok_embd, m->vocab, m->dim)) ||
	    (rc = check_weight(e, "output", -1, &m->output, m->vocab, m->dim)))
		return rc;
	for (int l = 0; l < m->n_layers; l++) {
		const pm_layer *L = &m->layers[l];
		if (!L->attn_norm || !L->ffn_norm)
			return seterr(e, PM_ERR_MODEL, "model: layer %d is missing a norm", l);
		if ((rc = check_weight(e, "attn_q", l, &L->wq, qd, m->dim)) ||
		    (rc = check_weight(e, "attn_k", l, &L->wk, kvd, m->dim)) ||
		    (rc = check_weight(e, "attn_v", l, &L->wv, kvd, m->dim)) ||
		    (rc = check_weight(e, "attn_output", l, &L->wo, m->dim, qd)) ||
		    (rc = check_weight(e, "ffn_gate", l, &L->w_gate, m->ffn_dim, m->dim)) ||
		    (rc = check_weight(e, "ffn_up", l, &L->w_up, m->ffn_dim, m->dim)) ||
		    (rc = check_weight(e, "ffn_down", l, &L->w_down, m->dim, m->ffn_dim)))
			return rc;
	}
	if (m->eos_id >= m->vocab || m->bos_id >= m->vocab)
		return seterr(e, PM_ERR_MODEL, "model: eos %d or bos %d outside vocabulary %d",
			      (int)m->eos_id, (int)m->bos_id, m->vocab);
	return PM_OK;
}

/* RoPE tables for positions 0..ctx-1 (rope.h: base, linear scale, rope_freqs). */
static void build_rope(pm_engine *e)
{
	float scale = e->m->rope_freq_scale ? e->m->rope_freq_scale : 1.0f;
	pm_rope_table(e->rope_cos, e->rope_sin, e->ctx, e->hd, e->m->rope_theta, scale,
		      e->m->rope_freqs);
}

static void rope(const pm_engine *e, float *v, int heads, int pos)
{
	int half = e->hd / 2;
	pm_rope_apply(v, heads, e->hd, e->rope_cos + (size_t)pos * half,
		      e->rope_sin + (size_t)pos * half, e->m->rope_type);
}

/* add_bias adds b[m] to every row of out[n][m] (no-op when b is NULL). */
static void add_bias(float *out, const float *b, int n, int m)
{
	if (!b)
		return;
	for (int r = 0; r < n; r++)
		for (int i = 0; i < m; i++)
			out[(size_t)r * m + i] += b[i];
}

/* head_norm RMS-normalizes each of heads heads of hd floats in v with w[hd]
 * (qwen3's attn_q_norm / attn_k_norm; no-op when w is NULL). */
static void head_norm(const pm_engine *e, float *v, int heads, const float *w)
{
	if (!w)
		return;
	for (int h = 0; h < heads; h++)
		e->k->rmsnorm(v + (size_t)h * e->hd, v + (size_t)h * e->hd, w, e->hd, e->m->rms_eps);
}

static float *kv_at(const pm_engine *e, float *cache, int layer, int block, int off)
{
	return cache + (((size_t)layer * e->n_blocks + block) * e->bs + off) * e->kvdim;
}

/* ---- parallel jobs (serial when threads == 1) ---- */

static void run_job(pm_engine *e, job_fn fn, const void *arg, int nc);

/* What a matmul job does to its columns once they are computed. */
enum { MM_PLAIN, MM_RESIDUAL, MM_SWIGLU };

/*
 * A matmul job: out_p[n][w_p.rows] = x[n][w_p.cols] . w_p^T for its parts
 * p < np (q, k, v share x; so do gate and up). Chunk c computes rows
 * [tiles*c/nc*4, tiles*(c+1)/nc*4) of every part (tiles = a part's rows / 4,
 * rounded up), then the post step on those columns:
 *   MM_RESIDUAL: e->x[r][m] += out_0[r][m] (the residual add after wo, w_down);
 *   MM_SWIGLU:   out_0[r][m] = silu(out_0[r][m]) * out_1[r][m] (gate, up).
 * Both are elementwise, so the chunking never changes a result (nor does
 * the row split: kernels.h, actquant.h).
 */
typedef struct {
	float *out[3];
	const pm_weight *w[3];
	const float *x;
	int np, n, post;
} mm_job;

/* mm_int: w computes with int8 activations (actquant.h) */
static int mm_int(const pm_engine *e, const pm_weight *w)
{
	pm_qmm q = e->qmm[w->type];
	return q.fn && w->cols % q.block == 0;
}

/*
 * The quantized input of a matmul job. The parts of a job read the same x
 * (q, k, v; gate, up), so mm_run quantizes it once, before the job, into
 * e->aq32 and/or e->aq256 (the blocks its parts' kernels need: a file can
 * mix 32- and 256-block types), and every chunk reads that one copy. The
 * quantization is split by rows: a row's bytes do not depend on the split.
 */
typedef struct {
	const float *x;
	int k, n, blocks; /* blocks: 1 for 32, 2 for 256, 3 for both */
} aq_job;

static void aq_task(pm_engine *e, const void *arg, int c, int nc, int tid)
{
	const aq_job *j = arg;
	int r0 = (int)((int64_t)j->n * c / nc), r1 = (int)((int64_t)j->n * (c + 1) / nc);
	size_t rb32 = pm_act_row_bytes(32, j->k), rb256 = pm_act_row_bytes(256, j->k);
	for (int r = r0; r < r1; r++) {
		const float *x = j->x + (size_t)r * j->k;
		if (j->blocks & 1)
			pm_quant_act(32, e->aq32 + (size_t)r * rb32, x, j->k, 1);
		if (j->blocks & 2)
			pm_quant_act(256, e->aq256 + (size_t)r * rb256, x, j->k, 1);
	}
}

/*
 * mm_range: chunk c's rows [m0, m1) of w, in whole tiles of 4 rows. A
 * batch (n > 1) cuts the tiles evenly. A decode at batch 1 with its full
 * MM_CHUNKS_PER_THREAD chunks per thread cuts them in geometrically
 * shrinking chunks (e->mm_geo, build_mm_geo): the threads claim chunks in
 * order, so the last ones claimed, which decide how long a thread waits
 * for the other at the join, are the small ones. With even chunks a
 * thread waited up to an eighth of the job's work (two threads) for the
 * other's last chunk, at every one of the ~5 jobs of each layer.
 */
static void mm_range(const pm_engine *e, const pm_weight *w, int n, int c, int nc, int *m0, int *m1)
{
	int m = w->rows, tiles = (m + 3) / 4;
	if (n == 1 && nc == MM_CHUNKS_PER_THREAD * e->cfg.threads) {
		*m0 = (int)(((uint64_t)tiles * e->mm_geo[c]) >> 24) * 4;
		*m1 = (int)(((uint64_t)tiles * e->mm_geo[c + 1]) >> 24) * 4;
	} else {
		*m0 = (int)((int64_t)tiles * c / nc) * 4;
		*m1 = (int)((int64_t)tiles * (c + 1) / nc) * 4;
	}
	if (*m1 > m)
		*m1 = m;
}

/*
 * build_mm_geo fills e->mm_geo for nc = MM_CHUNKS_PER_THREAD * threads
 * chunks: chunk c's share of a job is proportional to rho^c with rho = 1 -
 * 1 / (2 * threads) (two threads: 28 % of the tiles in the first chunk,
 * 3.7 % in the last), as fractions of 2^24: geo[0] = 0, geo[nc] = 2^24,
 * nondecreasing, so the chunks cover every tile once whatever the tile
 * count. Which rows a chunk computes never changes a result (kernels.h).
 */
static void build_mm_geo(pm_engine *e)
{
	int nc = MM_CHUNKS_PER_THREAD * e->cfg.threads;
	double rho = 1.0 - 1.0 / (2.0 * e->cfg.threads), all = 1.0 - pow(rho, nc);
	e->mm_geo[0] = 0;
	for (int c = 1; c < nc; c++) {
		uint32_t g = (uint32_t)((1.0 - pow(rho, c)) / all * (double)(1u << 24));
		e->mm_geo[c] = g > e->mm_geo[c - 1] ? g : e->mm_geo[c - 1];
	}
	e->mm_geo[nc] = 1u << 24;
}

static void mm_task(pm_engine *e, const void *arg, int c, int nc, int tid)
{
	const mm_job *j = arg;
	int m0 = 0, m1 = 0;
	for (int p = 0; p < j->np; p++) {
		const pm_weight *w = j->w[p];
		mm_range(e, w, j->n, c, nc, &m0, &m1);
		if (m0 >= m1)
			continue;
		size_t ldo = (size_t)w->rows;
		pm_qmm q = e->qmm[w->type];
		if (mm_int(e, w))
			q.fn(j->out[p], ldo, q.block == 32 ? e->aq32 : e->aq256,
			     pm_act_row_bytes(q.block, w->cols), w, j->n, m0, m1);
		else
			pm_matmul_w(e->k, e->dq[w->type], j->out[p], ldo, j->x, w, j->n, m0, m1,
				    e->w_scratch + (size_t)tid * e->w_scratch_len);
	}
	/* the post steps' parts have the same rows: [m0, m1) is every part's */
	size_t ld = (size_t)j->w[0]->rows;
	if (j->post == MM_RESIDUAL) {
		for (int r = 0; r < j->n; r++) {
			float *x = e->x + (size_t)r * ld;
			const float *o = j->out[0] + (size_t)r * ld;
			for (int m = m0; m < m1; m++)
				x[m] += o[m];
		}
	} else if (j->post == MM_SWIGLU && m0 < m1) {
		for (int r = 0; r < j->n; r++)
			e->k->swiglu(j->out[0] + (size_t)r * ld + m0, j->out[1] + (size_t)r * ld + m0,
				     m1 - m0);
	}
}

/*
 * Chunks of a matmul job: MM_CHUNKS_PER_THREAD per thread, so a thread
 * that starts late (a worker waking up, or descheduled on a busy machine)
 * leaves its chunks to the others instead of making every thread wait for
 * it.
 */

static int mm_chunks(const pm_engine *e, const mm_job *j)
{
	int nt = e->cfg.threads, tiles = 0;
	if (nt == 1)
		return 1;
	for (int p = 0; p < j->np; p++) {
		int t = (j->w[p]->rows + 3) / 4;
		tiles = t > tiles ? t : tiles;
	}
	int nc = MM_CHUNKS_PER_THREAD * nt;
	return nc < tiles ? nc : tiles;
}

static void mm_run(pm_engine *e, mm_job *j)
{
	aq_job a = {j->x, j->w[0]->cols, j->n, 0}; /* the parts share x, so its k */
	for (int p = 0; p < j->np; p++)
		if (mm_int(e, j->w[p]))
			a.blocks |= e->qmm[j->w[p]->type].block == 32 ? 1 : 2;
	if (a.blocks) {
		/* a short batch quantizes on the caller: cheaper than a handoff */
		int nc = e->cfg.threads == 1 || j->n < 16 ? 1 : 2 * e->cfg.threads;
		run_job(e, aq_task, &a, nc < j->n ? nc : j->n);
	}
	run_job(e, mm_task, j, mm_chunks(e, j));
}

/* out[n][w.rows] = x[n][w.cols] . w^T */
static void matmul(pm_engine *e, float *out, const float *x, const pm_weight *w, int n)
{
	mm_job j = {{out}, {w}, x, 1, n, MM_PLAIN};
	mm_run(e, &j);
}

typedef struct {
	int layer, n;
} att_job;

/*
 * Attention items are (KV head, row), KV-head major: item i is row i % n
 * under KV head i / n. One attend call takes a run of up to ATT_ROWS items
 * (rows of one slot at consecutive positions: a prefill chunk or a verify
 * draft), so each key and value row it loads feeds every row's heads.
 */
#define ATT_ROWS 4
_Static_assert(ATT_ROWS <= PM_ATTEND_MAX_ROWS, "ATT_ROWS: more rows than attend takes");

/* att_item: the call for the items from i (before i1) as its attend call
 * sees the cache: *nr rows, the first seeing n positions (next.n is the
 * positions the call reads, n + *nr - 1). */
static pm_attend_next att_item(const pm_engine *e, const float *kb, const float *vb, int n, int i,
			       int i1, int *nr)
{
	int kh = i / n, r = i % n, k = 1;
	while (k < ATT_ROWS && i + k < i1 && r + k < n && e->row_slot[r + k] == e->row_slot[r] &&
	       e->row_pos[r + k] == e->row_pos[r] + k)
		k++;
	*nr = k;
	return (pm_attend_next){kb + (size_t)kh * e->hd, vb + (size_t)kh * e->hd,
				e->slots[e->row_slot[r]].table, e->row_pos[r] + k};
}

/* Items are cut into chunks in order: a row's cost grows with its
 * position, so in a prefill the last rows of each KV head cost the most,
 * and many small chunks keep the threads level. */
static void att_task(pm_engine *e, const void *arg, int c, int nc, int tid)
{
	const att_job *j = arg;
	int g = e->n_heads / e->n_kv_heads, n = j->n;
	int items = n * e->n_kv_heads;
	int i0 = (int)((int64_t)items * c / nc), i1 = (int)((int64_t)items * (c + 1) / nc);
	float *scratch = e->att_scratch + (size_t)tid * ATT_ROWS * g * e->ctx;
	const float *kb = kv_at(e, e->kcache, j->layer, 0, 0);
	const float *vb = kv_at(e, e->vcache, j->layer, 0, 0);
	if (i0 >= i1)
		return;
	/* each call is told the next one's rows, so its prefetches run on into them */
	int nr, nr_next = 0;
	pm_attend_next cur = att_item(e, kb, vb, n, i0, i1, &nr), next = cur;
	for (int i = i0; i < i1; i += nr, cur = next, nr = nr_next) {
		if (i + nr < i1)
			next = att_item(e, kb, vb, n, i + nr, i1, &nr_next);
		int r = i % n, kh = i / n;
		size_t qo = (size_t)r * e->qdim + (size_t)kh * g * e->hd;
		e->k->attend(e->att + qo, e->q + qo, (size_t)e->qdim, nr, g, e->hd, cur.kbase,
			     cur.vbase, cur.table, e->bs, (size_t)e->kvdim, cur.n - nr + 1,
			     e->attn_scale, scratch, i + nr < i1 ? &next : NULL);
	}
}

static void attend(pm_engine *e, int layer, int n)
{
	att_job aj = {layer, n};
	int items = n * e->n_kv_heads, nc = e->cfg.threads == 1 ? 1 : 32 * e->cfg.threads;
	run_job(e, att_task, &aj, nc < items ? nc : items);
}

/*
 * Row jobs: work done row by row between the matmuls (norms, and the
 * biases, head norms, RoPE and cache writes before attention). In a
 * prefill they are a few percent of a serial forward, so they are cut
 * into chunks of rows too; a short batch runs them on the caller (one
 * chunk: no handoff).
 */
enum { ROWS_NORM, ROWS_QK };

typedef struct {
	int what, layer;
	const float *norm; /* ROWS_NORM: xb[r] = rmsnorm(x[r]) * norm */
} rows_job;

/* pre_attention: q/k/v biases, q/k head norms and RoPE of row r, and its
 * K and V written to its slot's cache at its position. */
static void pre_attention(pm_engine *e, const pm_layer *L, int l, int r)
{
	int p = e->row_pos[r];
	const slot *s = &e->slots[e->row_slot[r]];
	float *q = e->q + (size_t)r * e->qdim, *kr = e->kr + (size_t)r * e->kvdim;
	float *vr = e->vr + (size_t)r * e->kvdim;
	add_bias(q, L->bq, 1, e->qdim);
	add_bias(kr, L->bk, 1, e->kvdim);
	add_bias(vr, L->bv, 1, e->kvdim);
	head_norm(e, q, e->n_heads, L->q_norm);
	head_norm(e, kr, e->n_kv_heads, L->k_norm);
	rope(e, q, e->n_heads, p);
	rope(e, kr, e->n_kv_heads, p);
	int blk = s->table[p / e->bs], off = p % e->bs;
	memcpy(kv_at(e, e->kcache, l, blk, off), kr, (size_t)e->kvdim * sizeof(float));
	memcpy(kv_at(e, e->vcache, l, blk, off), vr, (size_t)e->kvdim * sizeof(float));
}

static void rows_task(pm_engine *e, const void *arg, int c, int nc, int tid)
{
	const rows_job *j = arg;
	int n = e->rows_n, r0 = (int)((int64_t)n * c / nc), r1 = (int)((int64_t)n * (c + 1) / nc);
	size_t D = (size_t)e->dim;
	for (int r = r0; r < r1; r++) {
		if (j->what == ROWS_NORM)
			e->k->rmsnorm(e->xb + r * D, e->x + r * D, j->norm, e->dim, e->m->rms_eps);
		else
			pre_attention(e, &e->m->layers[j->layer], j->layer, r);
	}
}

static void rows(pm_engine *e, int what, int layer, const float *norm)
{
	rows_job j = {what, layer, norm};
	int n = e->rows_n, nc = e->cfg.threads == 1 || n < 16 ? 1 : 4 * e->cfg.threads;
	run_job(e, rows_task, &j, nc < n ? nc : n);
}

/*
 * forward runs rows 0..n-1 (row_tok/row_pos/row_slot) through the model.
 * Each row's K/V is written to its slot's cache at its position before any
 * row attends, so rows of one slot are causal among themselves (a prefill
 * chunk or a verify draft). Logits of rows logit_row[0..nl) go to logits.
 * The slots' block tables must already cover every row's position.
 */
static void forward(pm_engine *e, int n, int nl)
{
	const pm_model *m = e->m;
	const pm_kernels *k = e->k;
	int D = e->dim;
	for (int r = 0; r < n; r++)
		e->dq[m->tok_embd.type](e->x + (size_t)r * D, pm_weight_row(&m->tok_embd, e->row_tok[r]), D);
	e->rows_n = n;
	for (int l = 0; l < e->n_layers; l++) {
		const pm_layer *L = &m->layers[l];
		rows(e, ROWS_NORM, l, L->attn_norm); /* xb = rmsnorm(x) */
		mm_job qkv = {{e->q, e->kr, e->vr}, {&L->wq, &L->wk, &L->wv}, e->xb, 3, n, MM_PLAIN};
		mm_run(e, &qkv);
		rows(e, ROWS_QK, l, NULL); /* biases, head norms, RoPE, K/V to the cache */
		attend(e, l, n);
		mm_job o = {{e->xb}, {&L->wo}, e->att, 1, n, MM_RESIDUAL};
		mm_run(e, &o); /* x += att . wo^T */
		rows(e, ROWS_NORM, l, L->ffn_norm); /* xb = rmsnorm(x) */
		mm_job gu = {{e->hb, e->hb2}, {&L->w_gate, &L->w_up}, e->xb, 2, n, MM_SWIGLU};
		mm_run(e, &gu); /* hb = silu(xb . gate^T) * (xb . up^T) */
		mm_job down = {{e->xb}, {&L->w_down}, e->hb, 1, n, MM_RESIDUAL};
		mm_run(e, &down); /* x += hb . down^T */
	}
	for (int i = 0; i < nl; i++)
		k->rmsnorm(e->lx + (size_t)i * D, e->x + (size_t)e->logit_row[i] * D, m->out_norm, D,
			   m->rms_eps);
	if (nl > 0)
		matmul(e, e->logits, e->lx, &m->output, nl);
}

/* ============================================================================
 * kernels: selection (the kernels themselves are in kernels.c) and the
 * thread pool that runs a job's chunks on the compute threads
 */

static int pick_kernels(pm_engine *e);

static int select_kernels(pm_engine *e)
{
	int rc = pick_kernels(e);
	if (rc)
		return rc;
	for (uint32_t t = 0; t < PM_TYPE_COUNT; t++) {
		e->dq[t] = pm_dequant(t, e->k != &pm_kernels_portable);
		e->qmm[t] = pm_qmm_for(t, e->k != &pm_kernels_portable);
	}
	return PM_OK;
}

static int pick_kernels(pm_engine *e)
{
	const pm_kernels *avx2 = pm_kernels_avx2();
	switch (e->cfg.kernel) {
	case PM_KERNEL_AUTO:
		e->k = avx2 ? avx2 : &pm_kernels_portable;
		return PM_OK;
	case PM_KERNEL_AVX2:
		if (!avx2)
			return seterr(e, PM_ERR_ARG,
				      "kernel: \"avx2\" requested but this CPU lacks AVX2+FMA");
		e->k = avx2;
		return PM_OK;
	case PM_KERNEL_PORTABLE:
		e->k = &pm_kernels_portable;
		return PM_OK;
	}
	return seterr(e, PM_ERR_ARG, "kernel: %d is not auto, avx2 or portable", (int)e->cfg.kernel);
}

typedef struct {
	pm_engine *e;
	int t;
} worker_arg;

/*
 * The pool. The caller publishes a job in one word, gen << 32 | chunks << 16
 * | next: the job's number, its chunk count and the next chunk to claim.
 * Every thread, the caller included, claims chunks by compare-and-swap on
 * that word until none is left, so the caller never waits for a worker
 * that has not started (asleep, or descheduled on a busy machine): it only
 * waits for chunks a worker has claimed. A claim carries the job's number,
 * so a worker that wakes late cannot take a chunk of a newer job for the
 * old one; the caller publishes the next job only after every chunk of
 * this one is done, so e->job and e->job_arg are stable while a claimed
 * chunk runs. Sleeping (workers on cv_go, the caller on cv_done) follows
 * Dekker's pattern: the sleeper announces itself (sleepers, caller_waits)
 * and rechecks under mu; the waker publishes, then looks for an announced
 * sleeper and only then takes mu, so a job where nobody sleeps touches no
 * lock.
 *
 * How long (pause instructions, ~50 us here) a worker polls for the next
 * job, and the caller for the last chunks, before sleeping: a forward
 * issues about six jobs per layer, microseconds apart, so a sleep/wake pair
 * per job would cost more than the job; but on an oversubscribed machine a
 * spinner steals a core from others, so the spin stays short.
 */
#define SPIN 2000

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#define WORD_GEN(w) ((uint32_t)((w) >> 32))
#define WORD_CHUNKS(w) ((int)(((w) >> 16) & 0xffff))
#define WORD_NEXT(w) ((int)((w)&0xffff))
#define MAX_CHUNKS 0xffff

/* run_chunks claims and runs chunks of job gen (w: the word as last seen)
 * until none is left or a newer job is published, then adds the chunks it
 * ran to job_done in one step (one write of that shared line per thread
 * and job, not one per chunk: at batch 1 a job is a few microseconds). */
static void run_chunks(pm_engine *e, uint64_t w, uint32_t gen, int tid)
{
	int done = 0, nc = WORD_CHUNKS(w);
	for (;;) {
		if (WORD_GEN(w) != gen || WORD_NEXT(w) >= WORD_CHUNKS(w))
			break;
		if (!atomic_compare_exchange_weak_explicit(&e->job_word, &w, w + 1, memory_order_acq_rel,
							   memory_order_acquire))
			continue; /* w is reloaded */
		nc = WORD_CHUNKS(w);
		e->job(e, e->job_arg, WORD_NEXT(w), nc, tid);
		done++;
		w = atomic_load_explicit(&e->job_word, memory_order_acquire);
	}
	if (done > 0 && atomic_fetch_add(&e->job_done, done) + done == nc && atomic_load(&e->caller_waits)) {
		pthread_mutex_lock(&e->mu); /* the last chunks wake a sleeping caller */
		pthread_cond_signal(&e->cv_done);
		pthread_mutex_unlock(&e->mu);
	}
}

static void *worker_main(void *p)
{
	pm_engine *e = ((worker_arg *)p)->e;
	int tid = ((worker_arg *)p)->t;
	uint32_t seen = 0;
	uint64_t w;
	atomic_fetch_add(&e->started, 1);
	for (;;) {
		int spins = 0;
		while (WORD_GEN(w = atomic_load_explicit(&e->job_word, memory_order_acquire)) == seen &&
		       !atomic_load_explicit(&e->quit, memory_order_relaxed)) {
			if (++spins < SPIN) {
				cpu_relax();
				continue;
			}
			pthread_mutex_lock(&e->mu);
			atomic_fetch_add(&e->sleepers, 1);
			while (WORD_GEN(atomic_load(&e->job_word)) == seen && !atomic_load(&e->quit))
				pthread_cond_wait(&e->cv_go, &e->mu);
			atomic_fetch_sub(&e->sleepers, 1);
			pthread_mutex_unlock(&e->mu);
			spins = 0;
		}
		if (atomic_load(&e->quit))
			return NULL;
		seen = WORD_GEN(w);
		run_chunks(e, w, seen, tid);
	}
}

/* run_job runs fn on chunks 0..nc-1 (nc <= MAX_CHUNKS) on the compute
 * threads (the caller is thread 0) and returns when all are done. */
static void run_job(pm_engine *e, job_fn fn, const void *arg, int nc)
{
	if (nc > MAX_CHUNKS)
		nc = MAX_CHUNKS;
	if (e->n_workers == 0 || nc <= 1) {
		for (int c = 0; c < nc; c++)
			fn(e, arg, c, nc, 0);
		return;
	}
	e->job = fn;
	e->job_arg = arg;
	atomic_store_explicit(&e->job_done, 0, memory_order_relaxed);
	uint32_t gen = ++e->job_seq;
	if (gen == 0) /* 0 is no job yet, what a new worker has seen */
		gen = ++e->job_seq;
	uint64_t w = (uint64_t)gen << 32 | (uint64_t)nc << 16;
	atomic_store(&e->job_word, w); /* seq_cst: ordered before the sleepers load */
	if (atomic_load(&e->sleepers) > 0) {
		pthread_mutex_lock(&e->mu);
		pthread_cond_broadcast(&e->cv_go);
		pthread_mutex_unlock(&e->mu);
	}
	run_chunks(e, w, gen, 0);
	for (int spins = 0; atomic_load_explicit(&e->job_done, memory_order_acquire) < nc; spins++) {
		if (spins < SPIN) {
			cpu_relax();
			continue;
		}
		pthread_mutex_lock(&e->mu);
		atomic_store(&e->caller_waits, 1);
		while (atomic_load(&e->job_done) < nc)
			pthread_cond_wait(&e->cv_done, &e->mu);
		atomic_store(&e->caller_waits, 0);
		pthread_mutex_unlock(&e->mu);
	}
}

/* ============================================================================
 * batch / scheduler: KV blocks, admission, preemption, prefill, decode,
 * n-gram drafts and verification
 */

static int blocks_for(const pm_engine *e, int positions)
{
	return (positions + e->bs - 1) / e->bs;
}

/* Extra blocks slot s needs so positions < upto are covered. */
static int blocks_short(const pm_engine *e, const slot *s, int upto)
{
	int need = blocks_for(e, upto) - s->n_blocks;
	return need > 0 ? need : 0;
}

/* kv_reserve gives slot s blocks for positions < upto (the caller checked
 * enough are free). */
static void kv_reserve(pm_engine *e, slot *s, int upto)
{
	while (s->n_blocks < blocks_for(e, upto))
		s->table[s->n_blocks++] = e->free_blocks[--e->n_free];
}

/* kv_truncate frees the blocks of s beyond those covering positions < keep
 * (rollback of rejected drafts, or all of them when the slot is released). */
static void kv_truncate(pm_engine *e, slot *s, int keep)
{
	int want = blocks_for(e, keep);
	while (s->n_blocks > want)
		e->free_blocks[e->n_free++] = s->table[--s->n_blocks];
}

/* Blocks that prefilling slots still need to finish their prefill. */
static int reserved_blocks(const pm_engine *e)
{
	int n = 0;
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state == SLOT_PREFILL)
			n += blocks_short(e, &e->slots[i], e->slots[i].prefill_end);
	return n;
}

static int free_slot(const pm_engine *e)
{
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state == SLOT_FREE)
			return i;
	return -1;
}

static void retire(pm_engine *e, int ri)
{
	e->reqs[ri].state = REQ_RETIRED;
	e->retired[e->n_retired++] = ri;
}

static void reclaim(pm_engine *e)
{
	for (int i = 0; i < e->n_retired; i++) {
		e->reqs[e->retired[i]].state = REQ_FREE;
		e->free_reqs[e->n_free_reqs++] = e->retired[i];
	}
	e->n_retired = 0;
}

static void release_slot(pm_engine *e, int si)
{
	slot *s = &e->slots[si];
	kv_truncate(e, s, 0);
	if (s->req >= 0)
		e->reqs[s->req].slot = -1;
	s->req = -1;
	s->state = SLOT_FREE;
	s->n_kv = 0;
	s->n_draft = 0;
	s->busy = 0;
	e->n_running--;
}

/* Puts request ri into free slot si; its prefill covers all of seq. */
static void admit(pm_engine *e, int ri, int si, int64_t now)
{
	req *r = &e->reqs[ri];
	slot *s = &e->slots[si];
	s->req = ri;
	s->state = SLOT_PREFILL;
	s->n_kv = 0;
	s->prefill_end = r->n_seq;
	s->n_blocks = 0;
	s->n_draft = 0;
	s->busy = 0;
	s->admit_order = ++e->admit_counter;
	r->state = REQ_RUNNING;
	r->slot = si;
	if (r->st.admitted_ns == 0)
		r->st.admitted_ns = now;
	e->n_running++;
}

/* Whether request ri may enter a slot now: a slot is free and the cache has
 * room for its whole prefill beyond what prefilling slots still need. */
static int admissible(const pm_engine *e, const req *r)
{
	return e->n_running < e->cfg.b_max &&
	       blocks_for(e, r->n_seq) <= e->n_free - reserved_blocks(e);
}

static void admit_waiting(pm_engine *e, int64_t now)
{
	while (e->n_waiting > 0) {
		int ri = e->wait[e->wait_head];
		if (!admissible(e, &e->reqs[ri]))
			break;
		e->wait_head = (e->wait_head + 1) % e->n_reqs;
		e->n_waiting--;
		admit(e, ri, free_slot(e), now);
	}
}

/* Evicts the most recently admitted request: its blocks are freed and it goes
 * back to the head of the waiting queue, to be recomputed from prompt plus
 * output so far. Returns the slot it held. */
static int preempt_newest(pm_engine *e)
{
	int victim = -1;
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state != SLOT_FREE &&
		    (victim < 0 || e->slots[i].admit_order > e->slots[victim].admit_order))
			victim = i;
	if (victim < 0)
		return -1;
	int ri = e->slots[victim].req;
	release_slot(e, victim);
	req *r = &e->reqs[ri];
	r->state = REQ_WAITING;
	r->st.preemptions++;
	e->met.preemptions++;
	e->wait_head = (e->wait_head + e->n_reqs - 1) % e->n_reqs;
	e->wait[e->wait_head] = ri;
	e->n_waiting++;
	return victim;
}

/* ---- the step's phases ---- */

static void finish(pm_engine *e, int ri, int reason);
static void finished_at(pm_engine *e, req *r, int64_t t);
static int32_t sample_at(pm_engine *e, req *r, int sx, int j, const float *logits);
static void step_record(pm_engine *e, int phase, int batch, int tokens, int64_t ns);
static void time_cost(pm_time_cost *c, int64_t ns);

/* Appends tok to request r and returns the finish reason it causes. */
static int emit_token(const pm_engine *e, req *r, int32_t tok)
{
	r->seq[r->n_seq++] = tok;
	r->st.completion_tokens++;
	if (tok == e->m->eos_id)
		return PM_FINISH_STOP;
	for (int i = 0; i < r->p.n_stop; i++)
		if (tok == r->p.stop[i])
			return PM_FINISH_STOP;
	if (r->st.completion_tokens >= r->p.max_tokens || r->n_seq >= e->ctx)
		return PM_FINISH_LENGTH;
	return PM_FINISH_NONE;
}

/* Records the end time t of a step that emitted tokens for r. */
static void note_emit(const pm_engine *e, req *r, int64_t t)
{
	if (r->st.first_token_ns == 0)
		r->st.first_token_ns = t;
	r->st.last_token_ns = t;
	if (r->st.n_emit < e->ctx)
		r->emit[r->st.n_emit++] = t;
}

/* Publishes what slot s emitted this step, and finishes its request if done.
 * Times are stamped when the step ends (stamp_outputs). */
static void deliver(pm_engine *e, slot *s)
{
	int ri = s->req;
	req *r = &e->reqs[ri];
	e->out_req[e->n_outs] = ri;
	pm_output *o = &e->outs[e->n_outs++];
	o->id = r->id;
	o->tokens = r->seq + s->emit0;
	o->n_tokens = s->n_emitted;
	o->finish = s->fin;
	o->stats = s->fin ? &r->st : NULL;
	o->logprobs = NULL;
	o->top_ids = NULL;
	o->top_logprobs = NULL;
	o->top_n = 0;
	if (r->p.logprobs) {
		size_t at = (size_t)(s - e->slots) * (PM_MAX_SPEC_K + 1);
		o->logprobs = e->lp + at;
		o->top_ids = e->top_id + at * PM_MAX_TOP_LOGPROBS;
		o->top_logprobs = e->top_lp + at * PM_MAX_TOP_LOGPROBS;
		o->top_n = r->p.top_logprobs;
	}
	if (s->fin)
		finish(e, ri, s->fin);
}

/* A token leaves the engine when Step returns: every output of the step
 * gets the step's end time as its emit (and finish) time. */
static void stamp_outputs(pm_engine *e)
{
	if (e->cfg.no_metrics || e->n_outs == 0)
		return;
	int64_t t = pm_now();
	for (int i = 0; i < e->n_outs; i++) {
		req *r = &e->reqs[e->out_req[i]];
		note_emit(e, r, t);
		if (e->outs[i].finish)
			finished_at(e, r, t);
	}
}

/*
 * Gives every slot in e->order[0..n) blocks for positions < upto(slot). When
 * the cache runs short it preempts the newest request (possibly one of them)
 * until the rest fit. Returns how many slots remain in e->order.
 */
static int reserve(pm_engine *e, int n, int (*upto)(const pm_engine *, const slot *))
{
	for (;;) {
		int need = 0;
		for (int i = 0; i < n; i++) {
			const slot *s = &e->slots[e->order[i]];
			need += blocks_short(e, s, upto(e, s));
		}
		if (need <= e->n_free)
			break;
		int v = preempt_newest(e);
		if (v < 0) /* nothing runs: cannot happen while slots wait for blocks */
			return 0;
		int w = 0;
		for (int i = 0; i < n; i++)
			if (e->order[i] != v)
				e->order[w++] = e->order[i];
		n = w;
	}
	for (int i = 0; i < n; i++) {
		slot *s = &e->slots[e->order[i]];
		kv_reserve(e, s, upto(e, s));
	}
	return n;
}

static int prefill_upto(const pm_engine *e, const slot *s)
{
	int left = s->prefill_end - s->n_kv;
	return s->n_kv + (left < e->cfg.prefill_chunk ? left : e->cfg.prefill_chunk);
}

static int decode_upto(const pm_engine *e, const slot *s)
{
	return s->n_kv + 1 + s->n_draft;
}

/* Slots in state st that are not busy, oldest admission first, into e->order. */
static int collect(pm_engine *e, int st)
{
	int n = 0;
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state == st && !e->slots[i].busy)
			e->order[n++] = i;
	for (int i = 1; i < n; i++) /* insertion sort by admission order */
		for (int j = i; j > 0 && e->slots[e->order[j]].admit_order <
						 e->slots[e->order[j - 1]].admit_order;
		     j--) {
			int t = e->order[j];
			e->order[j] = e->order[j - 1];
			e->order[j - 1] = t;
		}
	return n;
}

/*
 * run_prefill advances every prefilling slot by one chunk. Rows are laid out
 * slot by slot and run in forwards of at most max_rows rows. A slot whose
 * prefill ends samples its next token from its last row's logits (its first
 * output token, or the next one when it is being recomputed) and decodes from
 * the next step on.
 */
static void run_prefill(pm_engine *e)
{
	int ns = collect(e, SLOT_PREFILL);
	if (ns == 0)
		return;
	int metrics = !e->cfg.no_metrics;
	int64_t t0 = metrics ? pm_now() : 0;
	ns = reserve(e, ns, prefill_upto);
	int total = 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		s->busy = 1;
		s->pf_start = s->n_kv;
		s->n_kv = prefill_upto(e, s); /* positions pf_start..n_kv-1 run now */
		s->n_emitted = 0;
		s->fin = PM_FINISH_NONE;
		total += s->n_kv - s->pf_start;
	}
	int si = 0, p = ns > 0 ? e->slots[e->order[0]].pf_start : 0;
	while (si < ns) {
		int n = 0, nl = 0;
		while (si < ns && n < e->max_rows) {
			const slot *s = &e->slots[e->order[si]];
			e->row_tok[n] = e->reqs[s->req].seq[p];
			e->row_pos[n] = p;
			e->row_slot[n] = e->order[si];
			n++;
			if (++p == s->n_kv) {
				if (p == s->prefill_end)
					e->logit_row[nl++] = n - 1;
				if (++si < ns)
					p = e->slots[e->order[si]].pf_start;
			}
		}
		forward(e, n, nl);
		for (int i = 0; i < nl; i++) {
			slot *s = &e->slots[e->row_slot[e->logit_row[i]]];
			req *r = &e->reqs[s->req];
			s->emit0 = r->n_seq;
			s->fin = emit_token(e, r, sample_at(e, r, (int)(s - e->slots), 0,
							       e->logits + (size_t)i * e->vocab));
			s->n_emitted = 1;
			s->state = SLOT_DECODE;
		}
	}
	int64_t t1 = metrics ? pm_now() : 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		e->reqs[s->req].st.prefill_tokens += s->n_kv - s->pf_start;
		if (s->n_emitted)
			deliver(e, s);
	}
	if (metrics) {
		e->met.prefill_ns += t1 - t0;
		e->met.prefill_tokens += total;
		step_record(e, PM_PHASE_PREFILL, ns, total, t1 - t0);
	}
}

/*
 * lookup proposes a draft for r: find the earlier occurrence of the longest
 * suffix of its tokens (NGRAM_MIN..NGRAM_MAX long; the most recent one among
 * equals) and copy up to kmax tokens that followed it. Drafts never reach
 * beyond max_tokens or the context.
 */
static int lookup(const pm_engine *e, const req *r, int32_t *draft, int32_t *match)
{
	const int32_t *s = r->seq;
	int n = r->n_seq;
	int d = e->cfg.spec_k;
	if (d > e->ctx - n - 1)
		d = e->ctx - n - 1;
	if (d > r->p.max_tokens - r->st.completion_tokens - 1)
		d = r->p.max_tokens - r->st.completion_tokens - 1;
	if (d <= 0)
		return 0;
	int best = 0, at = -1;
	for (int j = n - 2; j >= 0 && best < NGRAM_MAX; j--) {
		int len = 0;
		while (len < NGRAM_MAX && len <= j && s[j - len] == s[n - 1 - len])
			len++;
		if (len > best) {
			best = len;
			at = j;
		}
	}
	if (best < NGRAM_MIN)
		return 0;
	if (d > n - 1 - at)
		d = n - 1 - at;
	*match = best;
	memcpy(draft, s + at + 1, (size_t)d * sizeof(int32_t));
	return d;
}

/* Trims the drafts of e->order[0..ns) to budget tokens in all, longest
 * match first (ties: oldest admission). Returns the drafts kept. */
static int ration_drafts(pm_engine *e, int ns, int budget)
{
	int32_t *want = e->row_pos; /* scratch: proposed draft lengths */
	for (int i = 0; i < ns; i++) {
		want[i] = e->slots[e->order[i]].n_draft;
		e->slots[e->order[i]].n_draft = 0;
	}
	int kept = 0;
	while (budget > 0) {
		int best = -1;
		for (int i = 0; i < ns; i++)
			if (want[i] > 0 && (best < 0 || e->slots[e->order[i]].match >
								e->slots[e->order[best]].match))
				best = i;
		if (best < 0)
			break;
		int d = want[best] < budget ? want[best] : budget;
		e->slots[e->order[best]].n_draft = d;
		want[best] = 0;
		budget -= d;
		kept += d;
	}
	return kept;
}

/*
 * run_decode runs one forward over every decoding slot that did not just
 * finish its prefill: the slot's last token at its next position, plus its
 * draft tokens when speculating. Each draft position is accepted while the
 * token sampled there equals the draft; the first mismatch is emitted in the
 * draft's place and the K/V of the rejected positions is rolled back.
 */
static void run_decode(pm_engine *e)
{
	int ns = collect(e, SLOT_DECODE);
	if (ns == 0)
		return;
	int metrics = !e->cfg.no_metrics;
	int64_t t0 = metrics ? pm_now() : 0;
	int drafted = 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		req *r = &e->reqs[s->req];
		s->match = 0;
		s->n_draft = 0;
		if (e->cfg.spec_k > 0 && r->spec_skip > 0)
			r->spec_skip--;
		else if (e->cfg.spec_k > 0)
			s->n_draft = lookup(e, r, s->draft, &s->match);
		drafted += s->n_draft;
	}
	if (drafted > SPEC_ROWS - ns)
		drafted = ration_drafts(e, ns, SPEC_ROWS - ns);
	if (e->cfg.spec_k > 0 && metrics) {
		int64_t t1 = pm_now();
		e->met.draft_ns += t1 - t0;
		e->met.decode_ns += t1 - t0;
		time_cost(&e->met.draft_by_bs[ns], t1 - t0);
		step_record(e, PM_PHASE_DRAFT, ns, drafted, t1 - t0);
		t0 = t1;
	}
	if (drafted > 0) { /* drafts never cost a preemption: drop them first */
		int need = 0;
		for (int i = 0; i < ns; i++) {
			const slot *s = &e->slots[e->order[i]];
			need += blocks_short(e, s, decode_upto(e, s));
		}
		if (need > e->n_free)
			for (int i = 0; i < ns; i++)
				e->slots[e->order[i]].n_draft = 0;
	}
	ns = reserve(e, ns, decode_upto);
	if (ns == 0)
		return;
	int n = 0;
	drafted = 0;
	for (int i = 0; i < ns; i++) {
		int sx = e->order[i];
		slot *s = &e->slots[sx];
		const req *r = &e->reqs[s->req];
		s->row0 = n;
		for (int j = 0; j <= s->n_draft; j++) {
			e->row_tok[n] = j == 0 ? r->seq[r->n_seq - 1] : s->draft[j - 1];
			e->row_pos[n] = s->n_kv + j;
			e->row_slot[n] = sx;
			e->logit_row[n] = n;
			n++;
		}
		drafted += s->n_draft;
	}
	forward(e, n, n);
	int emitted_all = 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		req *r = &e->reqs[s->req];
		int accepted = 0, fin = PM_FINISH_NONE, j = 0;
		s->emit0 = r->n_seq;
		for (; j <= s->n_draft; j++) {
			int32_t tok = sample_at(e, r, (int)(s - e->slots), j,
						e->logits + (size_t)(s->row0 + j) * e->vocab);
			fin = emit_token(e, r, tok);
			int match = j < s->n_draft && tok == s->draft[j];
			accepted += match;
			if (fin || !match)
				break;
		}
		s->n_emitted = j + 1; /* the loop always ends by break at j <= n_draft */
		s->fin = fin;
		emitted_all += s->n_emitted;
		r->st.decode_tokens += s->n_emitted;
		r->st.draft_tokens += s->n_draft;
		r->st.accepted_tokens += accepted;
		if (s->n_draft > 0 && accepted == 0) {
			r->spec_fails++;
			r->spec_skip = r->spec_fails >= 6 ? SPEC_BACKOFF_MAX : (1 << r->spec_fails) - 1;
		} else if (accepted > 0) {
			r->spec_fails = 0;
		}
		if (metrics)
			for (int d = 0; d < s->n_draft; d++) {
				e->met.draft_count[d]++;
				e->met.accept_count[d] += d < accepted;
			}
		if (!fin) { /* keep the K/V of the last token and the accepted drafts */
			s->n_kv += 1 + accepted;
			kv_truncate(e, s, s->n_kv);
		}
	}
	int64_t t1 = metrics ? pm_now() : 0;
	for (int i = 0; i < ns; i++)
		deliver(e, &e->slots[e->order[i]]);
	if (metrics) {
		int64_t d = t1 - t0;
		e->met.decode_ns += d;
		e->met.decode_tokens += emitted_all;
		if (drafted > 0) {
			e->met.verify_ns += d;
			time_cost(&e->met.verify_by_bs[ns], d);
			step_record(e, PM_PHASE_VERIFY, ns, n, d);
		} else {
			time_cost(&e->met.decode_by_bs[ns], d);
			step_record(e, PM_PHASE_DECODE, ns, n, d);
		}
	}
}

/* ============================================================================
 * sampler: greedy, or temperature / top-k / top-p with the request's own
 * xoshiro256** stream (one draw per sampled position, in order)
 */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(uint64_t s[4], uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* First index of the largest logit (NaN never wins). */
static int32_t argmax(const float *l, int n)
{
	int32_t best = 0;
	for (int i = 1; i < n; i++)
		if (l[i] > l[best] || (l[best] != l[best] && l[i] == l[i]))
			best = i;
	return best;
}

/* better orders candidates: higher value first, then lower id. */
static int better(const float *v, const int32_t *id, int a, int b)
{
	return v[a] > v[b] || (v[a] == v[b] && id[a] < id[b]);
}

static void swap2(float *v, int32_t *id, int a, int b)
{
	float t = v[a];
	v[a] = v[b];
	v[b] = t;
	int32_t u = id[a];
	id[a] = id[b];
	id[b] = u;
}

static void sift(float *v, int32_t *id, int i, int n)
{
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && better(v, id, c + 1, c))
			c++;
		if (!better(v, id, c, i))
			return;
		swap2(v, id, i, c);
		i = c;
	}
}

/* Moves the k best of v[0..n) to the front, best first (partial heapsort). */
static void top_sort(float *v, int32_t *id, int n, int k)
{
	for (int i = n / 2 - 1; i >= 0; i--)
		sift(v, id, i, n);
	for (int i = 0; i < k; i++) { /* pop the best to the back */
		swap2(v, id, 0, n - 1 - i);
		sift(v, id, 0, n - 1 - i);
	}
	for (int i = 0; i < n / 2; i++) /* back (best last) to front (best first) */
		swap2(v, id, i, n - 1 - i);
}

/* penalize applies r's penalties to logits, in vLLM's order, and returns
 * the result (e->pl), or logits itself when r has none:
 *  - repetition_penalty (vLLM, the CTRL rule): the logit of every token in
 *    the prompt or the output so far is divided by it when positive and
 *    multiplied by it otherwise;
 *  - frequency and presence penalties (OpenAI): a token the output so far
 *    holds c times loses c * frequency_penalty + presence_penalty.
 * O(tokens so far); e->pcnt is all 0 again on return. */
static const float *penalize(pm_engine *e, const req *r, const float *logits)
{
	const pm_params *p = &r->p;
	float rep = p->repetition_penalty;
	int has_rep = rep != 0 && rep != 1;
	if (!has_rep && p->presence_penalty == 0 && p->frequency_penalty == 0)
		return logits;
	enum { DONE = 1 << 30 }; /* the token's logit is penalized; the count is below */
	float *l = e->pl;
	int32_t *cnt = e->pcnt;
	const int32_t *seq = r->seq;
	int32_t n = r->n_seq;
	memcpy(l, logits, sizeof *l * (size_t)e->vocab);
	for (int32_t i = r->st.prompt_tokens; i < n; i++)
		cnt[seq[i]]++;
	for (int32_t i = 0; i < n; i++) {
		int32_t t = seq[i], c = cnt[t];
		if (c & DONE)
			continue;
		cnt[t] = c | DONE;
		if (has_rep)
			l[t] = l[t] > 0 ? l[t] / rep : l[t] * rep;
		if (c > 0)
			l[t] -= (float)c * p->frequency_penalty + p->presence_penalty;
	}
	for (int32_t i = 0; i < n; i++)
		cnt[seq[i]] = 0;
	return l;
}

static int32_t sample(pm_engine *e, req *r, const float *logits)
{
	int V = e->vocab;
	if (r->p.temperature == 0)
		return argmax(logits, V);
	double u = (double)(rng_next(r->rng) >> 11) * 0x1.0p-53;
	float *v = e->sp;
	int32_t *id = e->sidx;
	for (int i = 0; i < V; i++) {
		v[i] = logits[i] / r->p.temperature;
		id[i] = i;
	}
	int n = r->p.top_k > 0 && r->p.top_k < V ? r->p.top_k : V;
	int nucleus = r->p.top_p > 0 && r->p.top_p < 1;
	if (n < V || nucleus)
		top_sort(v, id, V, n);
	float mx = v[argmax(v, n)];
	double sum = 0;
	for (int i = 0; i < n; i++) {
		v[i] = expf(v[i] - mx);
		sum += v[i];
	}
	if (nucleus) {
		double c = 0;
		for (int i = 0; i < n; i++) {
			c += v[i];
			if (c >= r->p.top_p * sum) {
				n = i + 1;
				sum = c;
				break;
			}
		}
	}
	double target = u * sum, c = 0;
	for (int i = 0; i < n; i++) {
		c += v[i];
		if (target < c)
			return id[i];
	}
	return id[n - 1];
}

/* logprobs writes, for the token tok sampled from logits at position j of
 * slot sx's step, its log-probability and the top_logprobs most likely
 * tokens' (most likely first, ties by lower id): the log-softmax of
 * logits / temperature (1 when greedy). O(vocab * top_logprobs). */
static void logprobs(pm_engine *e, const req *r, int sx, int j, const float *logits, int32_t tok)
{
	int V = e->vocab, n = r->p.top_logprobs;
	float t = r->p.temperature > 0 ? r->p.temperature : 1;
	size_t at = (size_t)sx * (PM_MAX_SPEC_K + 1) + (size_t)j;
	int32_t *ids = e->top_id + at * PM_MAX_TOP_LOGPROBS;
	float *lps = e->top_lp + at * PM_MAX_TOP_LOGPROBS;
	float mx = logits[argmax(logits, V)] / t;
	double sum = 0;
	int k = 0; /* entries of ids/lps in use, sorted */
	for (int i = 0; i < V; i++) {
		float v = logits[i] / t;
		sum += exp((double)v - mx);
		if (n == 0 || (k == n && !(v > lps[k - 1])))
			continue;
		int at2 = k < n ? k++ : n - 1; /* insert, dropping the last when full */
		while (at2 > 0 && v > lps[at2 - 1]) {
			lps[at2] = lps[at2 - 1];
			ids[at2] = ids[at2 - 1];
			at2--;
		}
		lps[at2] = v;
		ids[at2] = i;
	}
	float lse = (float)((double)mx + log(sum));
	for (int i = 0; i < k; i++)
		lps[i] -= lse;
	e->lp[at] = logits[tok] / t - lse;
}

/* sample_at samples the token at position j of slot sx's step from logits,
 * after r's penalties, and records its log-probabilities when r asks. */
static int32_t sample_at(pm_engine *e, req *r, int sx, int j, const float *logits)
{
	const float *l = penalize(e, r, logits);
	int32_t tok = sample(e, r, l);
	if (r->p.logprobs)
		logprobs(e, r, sx, j, l, tok);
	return tok;
}

/* ============================================================================
 * metrics: plain struct updates, called from the step loop
 */

/* MLC-LLM TimeCost: the first sample of each batch size is a warm-up and is
 * not counted (MLC discards it too); count and sum cover the rest. */
static void time_cost(pm_time_cost *c, int64_t ns)
{
	if (!c->warm) {
		c->warm = 1;
		return;
	}
	c->count++;
	c->sum_ns += ns;
}

/* Appends a step record; when the ring is full the oldest is dropped and counted. */
static void step_record(pm_engine *e, int phase, int batch, int tokens, int64_t ns)
{
	int cap = e->cfg.step_ring;
	pm_step_record *rec;
	if (e->ring_n == cap) {
		rec = &e->ring[e->ring_head];
		e->ring_head = (e->ring_head + 1) % cap;
		e->met.steps_dropped++;
	} else {
		rec = &e->ring[(e->ring_head + e->ring_n) % cap];
		e->ring_n++;
	}
	rec->phase = phase;
	rec->batch_size = batch;
	rec->tokens = tokens;
	rec->_pad = 0;
	rec->duration_ns = ns;
}

/* Ends request ri (frees its slot if it holds one); its stats stay readable
 * until the next call on the engine. The caller stamps its finish time. */
static void finish(pm_engine *e, int ri, int reason)
{
	req *r = &e->reqs[ri];
	if (r->slot >= 0)
		release_slot(e, r->slot);
	r->st.finish = reason;
	if (!e->cfg.no_metrics) {
		e->met.requests_finished++;
		e->met.prompt_tokens += r->st.prompt_tokens;
		e->met.completion_tokens += r->st.completion_tokens;
	}
	retire(e, ri);
}

/* Sets r's finish time; r is now the engine's last finished request. */
static void finished_at(pm_engine *e, req *r, int64_t t)
{
	r->st.finish_ns = t;
	e->met.last_finished = r->st;
	e->met.last_finished.emit_ns = NULL;
	e->met.has_last = 1;
}

/* ============================================================================
 * API
 */

void pm_engine_config_default(pm_engine_config *c)
{
	memset(c, 0, sizeof *c);
	c->b_max = 8;
	c->spec_k = 4;
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

#define ALLOC(ptr, n)                                                                   \
	do {                                                                            \
		if (!((ptr) = alloc((size_t)(n), sizeof *(ptr))))                      \
			return seterr(e, PM_ERR_NOMEM, "out of memory allocating %s (%zu x %zu bytes)", \
				      #ptr, (size_t)(n), sizeof *(ptr));                \
	} while (0)

static void stop_workers(pm_engine *e)
{
	if (!e->sync_ok)
		return;
	atomic_store(&e->quit, 1);
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->cv_go);
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < e->n_workers; i++)
		pthread_join(e->workers[i], NULL);
	e->n_workers = 0;
	pthread_cond_destroy(&e->cv_go);
	pthread_cond_destroy(&e->cv_done);
	pthread_mutex_destroy(&e->mu);
	e->sync_ok = 0;
}

static worker_arg *worker_args(pm_engine *e);

static int build_workers(pm_engine *e)
{
	if (e->cfg.threads == 1)
		return PM_OK;
	if (pthread_mutex_init(&e->mu, NULL) != 0)
		return seterr(e, PM_ERR_NOMEM, "threads: pthread_mutex_init failed");
	if (pthread_cond_init(&e->cv_go, NULL) != 0) {
		pthread_mutex_destroy(&e->mu);
		return seterr(e, PM_ERR_NOMEM, "threads: pthread_cond_init failed");
	}
	if (pthread_cond_init(&e->cv_done, NULL) != 0) {
		pthread_cond_destroy(&e->cv_go);
		pthread_mutex_destroy(&e->mu);
		return seterr(e, PM_ERR_NOMEM, "threads: pthread_cond_init failed");
	}
	e->sync_ok = 1;
	worker_arg *wa = worker_args(e);
	for (int i = 0; i < e->cfg.threads - 1; i++) {
		wa[i].e = e;
		wa[i].t = i + 1;
		int rc = pthread_create(&e->workers[i], NULL, worker_main, &wa[i]);
		if (rc != 0)
			return seterr(e, PM_ERR_NOMEM, "threads: pthread_create: %s", strerror(rc));
		e->n_workers++;
	}
	/* A thread's start-up allocates (the C library's, a sanitizer's): let
	 * it happen here, not in the first steps, where no worker has to run
	 * for a job to finish. */
	while (atomic_load(&e->started) < e->n_workers)
		sched_yield();
	return PM_OK;
}

/* The worker arguments live after the worker handles (one allocation). */
static worker_arg *worker_args(pm_engine *e)
{
	return (worker_arg *)(e->workers + (e->cfg.threads - 1));
}

static int engine_build(pm_engine *e, const pm_model *m, const pm_engine_config *cfg)
{
	int rc = check_config(e, cfg);
	if (rc)
		return rc;
	if ((rc = check_model(e, m)))
		return rc;
	e->m = m;
	e->cfg = *cfg;
	if ((rc = select_kernels(e)))
		return rc;
	build_mm_geo(e);
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
	e->blocks_per_slot = blocks_for(e, e->ctx);
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
	ALLOC(e->free_blocks, e->n_blocks);
	ALLOC(e->slots, b);
	ALLOC(e->tables, (size_t)b * e->blocks_per_slot);
	ALLOC(e->reqs, e->n_reqs);
	ALLOC(e->req_tokens, (size_t)e->n_reqs * e->ctx);
	ALLOC(e->req_emit, (size_t)e->n_reqs * e->ctx);
	ALLOC(e->free_reqs, e->n_reqs);
	ALLOC(e->wait, e->n_reqs);
	ALLOC(e->retired, e->n_reqs);
	ALLOC(e->x, (size_t)e->max_rows * e->dim);
	ALLOC(e->xb, (size_t)e->max_rows * e->dim);
	ALLOC(e->q, (size_t)e->max_rows * e->qdim);
	ALLOC(e->kr, (size_t)e->max_rows * e->kvdim);
	ALLOC(e->vr, (size_t)e->max_rows * e->kvdim);
	ALLOC(e->att, (size_t)e->max_rows * e->qdim);
	ALLOC(e->hb, (size_t)e->max_rows * e->ffn);
	ALLOC(e->hb2, (size_t)e->max_rows * e->ffn);
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

	build_rope(e);
	for (int i = 0; i < e->n_blocks; i++)
		e->free_blocks[i] = e->n_blocks - 1 - i;
	e->n_free = e->n_blocks;
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
	return build_workers(e);
}

void pm_engine_free(pm_engine *e)
{
	if (!e)
		return;
	stop_workers(e);
	free(e->workers);
	free(e->rope_cos);
	free(e->rope_sin);
	free(e->kcache);
	free(e->vcache);
	free(e->free_blocks);
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

int pm_engine_kernel_name(const pm_engine *e, const char **name)
{
	if (!e || !name)
		return PM_ERR_ARG;
	*name = e->k->name;
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

int pm_engine_submit(pm_engine *e, const int32_t *prompt, int32_t n, const pm_params *p,
		     uint64_t *id)
{
	if (!e)
		return PM_ERR_ARG;
	if (!p || !id || (n > 0 && !prompt))
		return seterr(e, PM_ERR_ARG, "submit: NULL argument");
	reclaim(e);
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

	int direct = e->n_waiting == 0 && e->n_running < e->cfg.b_max &&
		     blocks_for(e, n) <= e->n_free - reserved_blocks(e);
	if (!direct && e->n_waiting >= e->cfg.max_waiting)
		return seterr(e, PM_ERR_FULL, "waiting queue full (%d requests wait)",
			      (int)e->n_waiting);
	if (e->n_free_reqs == 0)
		return seterr(e, PM_ERR_INTERNAL, "BUG: no free request record");
	int ri = e->free_reqs[--e->n_free_reqs];
	req *r = &e->reqs[ri];
	int32_t *seq = r->seq;
	int64_t *emit = r->emit;
	memset(r, 0, sizeof *r);
	r->seq = seq;
	r->emit = emit;
	r->slot = -1;
	r->id = e->next_id++;
	r->p = *p;
	memcpy(r->seq, prompt, (size_t)n * sizeof(int32_t));
	r->n_seq = n;
	int64_t now = pm_now();
	r->st.arrival_ns = p->arrival_ns ? p->arrival_ns : now;
	r->st.prompt_tokens = n;
	r->st.emit_ns = r->emit;
	rng_seed(r->rng, p->seed);
	if (direct) {
		admit(e, ri, free_slot(e), now);
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
	reclaim(e);
	e->n_outs = 0;
	*outs = e->outs;
	*n_out = 0;
	if (e->n_running == 0 && e->n_waiting == 0)
		return PM_OK;
	for (int i = 0; i < e->cfg.b_max; i++)
		e->slots[i].busy = 0;
	admit_waiting(e, e->cfg.no_metrics ? 0 : pm_now());
	run_prefill(e);
	run_decode(e);
	stamp_outputs(e);
	*n_out = e->n_outs;
	return PM_OK;
}

int pm_engine_cancel(pm_engine *e, uint64_t id, const pm_request_stats **stats)
{
	if (!e)
		return PM_ERR_ARG;
	if (!stats)
		return seterr(e, PM_ERR_ARG, "cancel: NULL argument");
	reclaim(e);
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
	finish(e, ri, PM_FINISH_ABORT);
	if (!e->cfg.no_metrics)
		finished_at(e, &e->reqs[ri], pm_now());
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
	reclaim(e);
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
		forward(e, c, c);
		memcpy(logits + (size_t)at * e->vocab, e->logits, (size_t)c * e->vocab * sizeof(float));
	}
	kv_truncate(e, s, 0);
	return PM_OK;
}
