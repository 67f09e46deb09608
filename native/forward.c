/*
 * forward.c: the forward pass over a ragged batch of rows, and what it
 * needs of a model.
 *
 * Contract: forward_rows(e, n, nl) runs rows 0..n-1 (e->row_tok, row_pos,
 * row_slot) through the model: embedding, then per layer the norms, the
 * q/k/v, output and FFN matmuls (dispatched by type: matmul.h for float
 * activations, actquant.h's integer kernels for quantized ones), biases,
 * head norms, RoPE, the K/V writes into the paged cache and attention;
 * the logits of rows e->logit_row[0..nl) land in e->logits. Every row's
 * result is bitwise the same whatever else is in the batch and whatever
 * the thread count (kernels.h): work is cut into pool.c jobs whose chunks
 * never change a result. The slots' block tables must already cover every
 * row's position (kv.c). Also here: the model checks the pass relies on
 * (forward_check_model), the kernel set's selection, the RoPE tables and
 * the batch-1 chunk geometry (built once at create time).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "actquant.h"
#include "arch.h"
#include "engine_internal.h"
#include "kernels.h"
#include "matmul.h"
#include "rope.h"

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

int forward_check_model(pm_engine *e, const pm_model *m)
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
void forward_build_rope(pm_engine *e)
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

/* What a matmul job does to its columns once they are computed. */
enum { MM_PLAIN, MM_RESIDUAL, MM_SWIGLU };

/*
 * A matmul job: out_p[n][w_p.rows] = x[n][w_p.cols] . w_p^T for its parts
 * p < np (q, k, v share x; so do gate and up). Chunk c computes rows
 * [tiles*c/nc*u, tiles*(c+1)/nc*u) of every part (u: MM_UNIT, 16;
 * tiles = a part's rows / u, rounded up), then the post step on those
 * columns:
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
	int xq_ready; /* blocks (aq_job.blocks) the job before already quantized x into */
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
 * A job whose input the job before quantized skips those blocks
 * (mm_job.xq_ready: wo's input, quantized by the attention job).
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
 * mm_range: chunk c's rows [m0, m1) of w, in whole tiles of u rows (MM_UNIT). A
 * batch (n > 1) cuts the tiles evenly. A decode at batch 1 with its full
 * MM_CHUNKS_PER_THREAD chunks per thread cuts them in geometrically
 * shrinking chunks (e->mm_geo, forward_build_geo): the threads claim chunks in
 * order, so the last ones claimed, which decide how long a thread waits
 * for the other at the join, are the small ones. With even chunks a
 * thread waited up to an eighth of the job's work (two threads) for the
 * other's last chunk, at every one of the ~5 jobs of each layer.
 */
static void mm_range(const pm_engine *e, const pm_weight *w, int u, int n, int c, int nc, int *m0,
		     int *m1)
{
	int m = w->rows, tiles = (m + u - 1) / u;
	if (n == 1 && nc == MM_CHUNKS_PER_THREAD * e->cfg.threads) {
		*m0 = (int)(((uint64_t)tiles * e->mm_geo[c]) >> 24) * u;
		*m1 = (int)(((uint64_t)tiles * e->mm_geo[c + 1]) >> 24) * u;
	} else {
		*m0 = (int)((int64_t)tiles * c / nc) * u;
		*m1 = (int)((int64_t)tiles * (c + 1) / nc) * u;
	}
	if (*m1 > m)
		*m1 = m;
}

/*
 * forward_build_geo fills e->mm_geo for nc = MM_CHUNKS_PER_THREAD * threads
 * chunks: chunk c's share of a job is proportional to rho^c with rho = 1 -
 * 1 / (2 * threads) (two threads: 28 % of the tiles in the first chunk,
 * 3.7 % in the last), as fractions of 2^24: geo[0] = 0, geo[nc] = 2^24,
 * nondecreasing, so the chunks cover every tile once whatever the tile
 * count. Which rows a chunk computes never changes a result (kernels.h).
 */
void forward_build_geo(pm_engine *e)
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

/* MM_UNIT: the rows a job's chunks are cut in: whole tiles of every
 * kernel (F16 panels and their 2-panel tiles, the tiles of 8 rows of
 * panels.h, the 8-row AVX2 and 16-row AVX-512 VNNI tiles of the 32-block
 * types in rows), and whole 64-byte lines of the output rows
 * (engine_api.c: alloc_lines), so the threads never write one line (F16
 * prefill at two threads, alternating pmbench on AMD EPYC Zen 3:
 * 1.02-1.05x against 8 and calloc's buffers). Rows left in the file's
 * layout were cut in 4s, the old 4-row tiles: a cut inside an 8-row tile
 * made each side compute a whole one (default Q8_0 pp256 at two threads,
 * AVX2 path, Zen 4: 1.03x in 16s). One unit for every part, so the post
 * step's parts (gate, up) have the same rows [m0, m1) in every chunk. */
enum { MM_UNIT = 16 };

static void mm_task(pm_engine *e, const void *arg, int c, int nc, int tid)
{
	const mm_job *j = arg;
	int m0 = 0, m1 = 0, u = MM_UNIT;
	for (int p = 0; p < j->np; p++) {
		const pm_weight *w = j->w[p];
		mm_range(e, w, u, j->n, c, nc, &m0, &m1);
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
			if (m0 < m1)
				e->k->add(x + m0, o + m0, m1 - m0);
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

/* mm_blocks: the quantized inputs a job's parts need (aq_job.blocks). */
static int mm_blocks(const pm_engine *e, const mm_job *j)
{
	int blocks = 0;
	for (int p = 0; p < j->np; p++)
		if (mm_int(e, j->w[p]))
			blocks |= e->qmm[j->w[p]->type].block == 32 ? 1 : 2;
	return blocks;
}

static void mm_run(pm_engine *e, mm_job *j)
{
	aq_job a = {j->x, j->w[0]->cols, j->n, 0}; /* the parts share x, so its k */
	a.blocks = mm_blocks(e, j) & ~j->xq_ready;
	if (a.blocks) {
		/* a short batch quantizes on the caller: cheaper than a handoff */
		int nc = e->cfg.threads == 1 || j->n < 16 ? 1 : 2 * e->cfg.threads;
		pool_run(e, aq_task, &a, nc < j->n ? nc : j->n);
	}
	pool_run(e, mm_task, j, mm_chunks(e, j));
}

/* out[n][w.rows] = x[n][w.cols] . w^T */
static void matmul(pm_engine *e, float *out, const float *x, const pm_weight *w, int n)
{
	mm_job j = {{out}, {w}, x, 1, n, MM_PLAIN, 0};
	mm_run(e, &j);
}

/*
 * An attention job. Its items are (KV head kh, row r) pairs, i = kh * n + r.
 * Two steps around the attention ride along in its chunks, as an item's
 * share of them reads and writes only that item's head group of that row
 * (elementwise per head, so the result is the serial one bitwise):
 *   pre (decode at batch 1 only): the row's pre-attention step for the
 *     item's heads (pre_attention_heads). With more rows a row attends to
 *     the K/V other items write, so there rows_task runs it before the job.
 *   quant: the item's slice of the output, quantized into e->aq32 / aq256
 *     (bit 1 / 2, as aq_job.blocks) for the wo job, when that slice is whole
 *     blocks: activation blocks are independent (actquant.h), so the bytes
 *     are those of quantizing the row at once.
 */
typedef struct {
	int layer, n, pre, quant;
} att_job;

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

static void pre_attention_heads(pm_engine *e, const pm_layer *L, int l, int r, int kh0, int kh1);

/* att_quant quantizes rows [r, r + nr) of KV head kh's slice of e->att
 * (the att_job's quant blocks). */
static void att_quant(pm_engine *e, int quant, int kh, int r, int nr)
{
	int w = e->n_heads / e->n_kv_heads * e->hd, k = e->qdim;
	size_t rb32 = pm_act_row_bytes(32, k), rb256 = pm_act_row_bytes(256, k);
	for (int i = r; i < r + nr; i++) {
		const float *x = e->att + (size_t)i * k + (size_t)kh * w;
		if (quant & 1)
			pm_quant_act(32, e->aq32 + i * rb32 + (size_t)kh * (w / 32) * sizeof(pm_act32), x,
				     w, 1);
		if (quant & 2)
			pm_quant_act(256, e->aq256 + i * rb256 + (size_t)kh * (w / 256) * sizeof(pm_act256),
				     x, w, 1);
	}
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
	if (j->pre) /* n == 1: item i is KV head i */
		pre_attention_heads(e, &e->m->layers[j->layer], j->layer, 0, i0, i1);
	for (int i = i0; i < i1; i += nr, cur = next, nr = nr_next) {
		if (i + nr < i1)
			next = att_item(e, kb, vb, n, i + nr, i1, &nr_next);
		int r = i % n, kh = i / n;
		size_t qo = (size_t)r * e->qdim + (size_t)kh * g * e->hd;
		e->k->attend(e->att + qo, e->q + qo, (size_t)e->qdim, nr, g, e->hd, cur.kbase,
			     cur.vbase, cur.table, e->bs, (size_t)e->kvdim, cur.n - nr + 1,
			     e->attn_scale, scratch, i + nr < i1 ? &next : NULL);
		if (j->quant)
			att_quant(e, j->quant, kh, r, nr);
	}
}

/* attend runs layer's attention over rows 0..n-1 and returns the blocks
 * of the wo job's input it quantized (mm_job.xq_ready); pre: the rows'
 * pre-attention step is the job's (n == 1). */
static int attend(pm_engine *e, int layer, int n, int pre, int wo_blocks)
{
	int w = e->n_heads / e->n_kv_heads * e->hd;
	int quant = (wo_blocks & 1 && w % 32 == 0 ? 1 : 0) | (wo_blocks & 2 && w % 256 == 0 ? 2 : 0);
	att_job aj = {layer, n, pre, quant};
	int items = n * e->n_kv_heads, nc = e->cfg.threads == 1 ? 1 : 32 * e->cfg.threads;
	pool_run(e, att_task, &aj, nc < items ? nc : items);
	return quant;
}

/*
 * Row jobs: work done row by row between the matmuls (norms, and, with
 * more than one row, the biases, head norms, RoPE and cache writes before
 * attention; at batch 1 the attention job does those: att_job.pre). In a
 * prefill they are a few percent of a serial forward, so they are cut
 * into chunks of rows too; a short batch runs them on the caller (one
 * chunk: no handoff).
 */
enum { ROWS_NORM, ROWS_QK };

typedef struct {
	int what, layer;
	const float *norm; /* ROWS_NORM: xb[r] = rmsnorm(x[r]) * norm */
} rows_job;

/* pre_attention_heads: for KV heads [kh0, kh1) and their query heads,
 * row r's q/k/v biases, q/k head norms and RoPE, and its K and V written
 * to its slot's cache at its position. Every step is per head, so any cut
 * of the heads gives the result of all at once. */
static void pre_attention_heads(pm_engine *e, const pm_layer *L, int l, int r, int kh0, int kh1)
{
	int p = e->row_pos[r], g = e->n_heads / e->n_kv_heads, hd = e->hd;
	int qh = (kh1 - kh0) * g, kvh = kh1 - kh0;
	size_t qo = (size_t)kh0 * g * hd, ko = (size_t)kh0 * hd;
	const slot *s = &e->slots[e->row_slot[r]];
	float *q = e->q + (size_t)r * e->qdim + qo, *kr = e->kr + (size_t)r * e->kvdim + ko;
	float *vr = e->vr + (size_t)r * e->kvdim + ko;
	add_bias(q, L->bq ? L->bq + qo : NULL, 1, qh * hd);
	add_bias(kr, L->bk ? L->bk + ko : NULL, 1, kvh * hd);
	add_bias(vr, L->bv ? L->bv + ko : NULL, 1, kvh * hd);
	head_norm(e, q, qh, L->q_norm);
	head_norm(e, kr, kvh, L->k_norm);
	rope(e, q, qh, p);
	rope(e, kr, kvh, p);
	int blk = s->table[p / e->bs], off = p % e->bs;
	memcpy(kv_at(e, e->kcache, l, blk, off) + ko, kr, (size_t)kvh * hd * sizeof(float));
	memcpy(kv_at(e, e->vcache, l, blk, off) + ko, vr, (size_t)kvh * hd * sizeof(float));
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
			pre_attention_heads(e, &e->m->layers[j->layer], j->layer, r, 0, e->n_kv_heads);
	}
}

static void rows(pm_engine *e, int what, int layer, const float *norm)
{
	rows_job j = {what, layer, norm};
	int n = e->rows_n, nc = e->cfg.threads == 1 || n < 16 ? 1 : 4 * e->cfg.threads;
	pool_run(e, rows_task, &j, nc < n ? nc : n);
}

/*
 * forward runs rows 0..n-1 (row_tok/row_pos/row_slot) through the model.
 * Each row's K/V is written to its slot's cache at its position before any
 * row attends, so rows of one slot are causal among themselves (a prefill
 * chunk or a verify draft). Logits of rows logit_row[0..nl) go to logits.
 * The slots' block tables must already cover every row's position.
 */
void forward_rows(pm_engine *e, int n, int nl)
{
	const pm_model *m = e->m;
	const pm_kernels *k = e->k;
	int D = e->dim;
	for (int r = 0; r < n; r++)
		e->dq[m->tok_embd.type](e->x + (size_t)r * D, pm_weight_row(&m->tok_embd, e->row_tok[r]), D);
	e->rows_n = n;
	for (int l = 0; l < e->n_layers; l++) {
		const pm_layer *L = &e->layers[l]; /* the engine's views (panels.h) */
		rows(e, ROWS_NORM, l, L->attn_norm); /* xb = rmsnorm(x) */
		mm_job qkv = {{e->q, e->kr, e->vr}, {&L->wq, &L->wk, &L->wv}, e->xb, 3, n, MM_PLAIN, 0};
		mm_run(e, &qkv);
		/* biases, head norms, RoPE, K/V to the cache: at batch 1 in the
		 * attention job's chunks (att_job.pre) */
		if (n > 1)
			rows(e, ROWS_QK, l, NULL);
		mm_job o = {{e->xb}, {&L->wo}, e->att, 1, n, MM_RESIDUAL, 0};
		o.xq_ready = attend(e, l, n, n == 1, mm_blocks(e, &o));
		mm_run(e, &o); /* x += att . wo^T */
		rows(e, ROWS_NORM, l, L->ffn_norm); /* xb = rmsnorm(x) */
		mm_job gu = {{e->hb, e->hb2}, {&L->w_gate, &L->w_up}, e->xb, 2, n, MM_SWIGLU, 0};
		mm_run(e, &gu); /* hb = silu(xb . gate^T) * (xb . up^T) */
		mm_job down = {{e->xb}, {&L->w_down}, e->hb, 1, n, MM_RESIDUAL, 0};
		mm_run(e, &down); /* x += hb . down^T */
	}
	for (int i = 0; i < nl; i++)
		k->rmsnorm(e->lx + (size_t)i * D, e->x + (size_t)e->logit_row[i] * D, m->out_norm, D,
			   m->rms_eps);
	if (nl > 0)
		matmul(e, e->logits, e->lx, &e->output, nl); /* the engine's view (panels.h) */
}

static int pick_kernels(pm_engine *e);

int forward_select_kernels(pm_engine *e)
{
	int rc = pick_kernels(e);
	if (rc)
		return rc;
	for (uint32_t t = 0; t < PM_TYPE_COUNT; t++) {
		e->dq[t] = pm_dequant(t, e->isa != PM_ISA_PORTABLE);
		e->qmm[t] = pm_qmm_isa(t, e->isa);
	}
	return PM_OK;
}

/* pick_kernels: auto takes the fastest path measured end to end
 * (AVX-512 VNNI where the CPU has it, else AVX2, else portable); AVX-VNNI
 * runs only when named, as no machine here has had it to measure. On
 * AArch64 auto takes NEON, never measured either (no ARM machine here)
 * but bitwise the portable set's results, so choosing it risks no output. */
static int pick_kernels(pm_engine *e)
{
	static const struct {
		int kernel, isa;
	} named[] = {
		{PM_KERNEL_PORTABLE, PM_ISA_PORTABLE},
		{PM_KERNEL_AVX2, PM_ISA_AVX2},
		{PM_KERNEL_AVXVNNI, PM_ISA_AVXVNNI},
		{PM_KERNEL_AVX512VNNI, PM_ISA_AVX512VNNI},
		{PM_KERNEL_NEON, PM_ISA_NEON},
	};
	int isa = -1;
	if (e->cfg.kernel == PM_KERNEL_AUTO) {
		isa = pm_cpu_has_isa(PM_ISA_AVX512VNNI) ? PM_ISA_AVX512VNNI
		      : pm_cpu_has_isa(PM_ISA_AVX2)     ? PM_ISA_AVX2
		      : pm_cpu_has_isa(PM_ISA_NEON)     ? PM_ISA_NEON
							: PM_ISA_PORTABLE;
	} else {
		for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
			if (named[i].kernel == e->cfg.kernel)
				isa = named[i].isa;
		if (isa < 0)
			return seterr(e, PM_ERR_ARG,
				      "kernel: %d is not auto, avx512vnni, avxvnni, avx2, neon or portable",
				      (int)e->cfg.kernel);
	}
	const pm_kernels *k = pm_kernels_isa(isa);
	if (!k)
		return seterr(e, PM_ERR_ARG, "kernel: \"%s\" requested but this CPU cannot run it",
			      pm_isa_name(isa));
	e->k = k;
	e->isa = isa;
	return PM_OK;
}
