/*
 * engine_internal.h: the types the engine's stages share, and each stage's
 * entry points. Private to the engine's C files: nothing here crosses cgo
 * (engine.h is the boundary).
 *
 * One engine (struct pm_engine) holds every buffer, allocated at create
 * time by engine_api.c; the stages work on it in place:
 *   pool.c         the compute threads and their jobs
 *   forward.c      the forward pass over a ragged batch (dispatch, attention,
 *                  RoPE, norms), kernel selection, model checks
 *   prefix.c       the prefix cache: block hashes, references, LRU eviction
 *   kv.c           KV block bookkeeping (reserve, truncate, prefix reuse)
 *   sample.c       sampling (RNG, penalties, top-k/p, logprobs)
 *   grammar_mask.c constrained decoding: token masks, matcher states
 *   stepmetrics.c  metrics recorded in the step loop, the clock
 *   spec.c         n-gram speculative drafts
 *   sched.c        admission, preemption, the prefill and decode phases
 *   engine_api.c   config, build, free, the public API
 * A stage calls only the stages listed above it (docs/ARCHITECTURE.md, C
 * floors; docs/architecture_test.go checks it).
 */
#ifndef PM_ENGINE_INTERNAL_H
#define PM_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "actquant.h"
#include "engine.h"
#include "kernels.h"

typedef struct pm_gmask pm_gmask;

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
	int32_t n_hashed;    /* table[0..n_hashed) are hashed (prefix.c) */
	uint64_t hash_last;  /* chained hash of block n_hashed-1 (a seed when 0) */
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

/*
 * Attention items are (KV head, row), KV-head major: item i is row i % n
 * under KV head i / n. One attend call takes a run of up to ATT_ROWS items
 * (rows of one slot at consecutive positions: a prefill chunk or a verify
 * draft), so each key and value row it loads feeds every row's heads.
 * 8 rows measured 1.01x (one thread) against 4 on the default F16 model's
 * 256-token prefill (AMD EPYC Zen 4), the key and value rows coming into
 * L1 once for twice the query vectors; the rows per call never change a
 * result (kernels.c, attention).
 */
#define ATT_ROWS 8
_Static_assert(ATT_ROWS <= PM_ATTEND_MAX_ROWS, "ATT_ROWS: more rows than attend takes");

struct pm_engine {
	char err[PM_ERRMSG_MAX];
	pm_engine_config cfg;
	const pm_model *m;
	pm_model owned_model; /* pm_engine_open's model */
	int owns_model;
	const pm_kernels *k;
	int isa;                         /* PM_ISA_* of k, dq and qmm (kernels.h) */
	pm_dequant_fn dq[PM_TYPE_COUNT]; /* row dequantizers of the chosen kernel set */
	pm_qmm qmm[PM_TYPE_COUNT];       /* integer kernels (actquant.h); fn NULL: float path */

	/* the layers' weights and the output matrix as forward.c computes
	 * with them (panels.h) */
	const pm_layer *layers; /* m->layers, or panel_layers */
	pm_weight output;       /* m->output, or its repacked copy */
	pm_layer *panel_layers; /* [n_layers] copies with repacked matrices, or NULL */
	void *panel_mem;        /* the repacked matrices' bytes (a mapping of panel_map bytes) */
	size_t panel_map;
	size_t panel_bytes;     /* the F16 matrices' bytes in panels (without alignment) */
	size_t kx8_bytes;       /* the K-quant matrices' bytes in tiles of 8 (kx8.h) */
	size_t q32x8_bytes;     /* the Q4_0 matrices' bytes in tiles of 8 (q32x8.h) */
	size_t copy_bytes;      /* the matrices' bytes copied in rows (panels.c: in_map) */
	size_t step_bytes;      /* the matrices' bytes one decode step reads (panels.c) */
	size_t llc_bytes;       /* the last-level cache of CPU 0, 0: unknown (panels.c) */

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
	int32_t *free_blocks; /* [n_blocks] stack of free (unhashed, unheld) block ids */
	int32_t n_stack;      /* entries of free_blocks */
	int32_t n_free;       /* blocks a reservation may take: free + cached (prefix.c) */

	/* prefix cache (prefix.c), all [n_blocks] but the buckets */
	int32_t *pc_ref;      /* slot tables holding the block */
	uint8_t *pc_hashed;   /* 1: published under pc_hash */
	uint64_t *pc_hash;    /* chained hash of the block's tokens */
	uint64_t *pc_parent;  /* the previous block's chained hash */
	int32_t *pc_tokens;   /* [n_blocks][bs] the tokens it was published with */
	int32_t *pc_chain;    /* next block of the same bucket, -1 */
	int32_t *pc_bucket;   /* [pc_mask+1] first block of each bucket, -1 */
	uint32_t pc_mask;     /* buckets - 1 (a power of two >= 2*n_blocks) */
	int32_t *lru_prev, *lru_next; /* cached blocks, least recently released first */
	int32_t lru_head, lru_tail;
	int32_t n_cached;     /* published blocks, held or not */

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

	/* constrained decoding (grammar_mask.c): NULL until pm_engine_set_token_bytes */
	struct pm_gmask *gm;

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

	/* thread pool (threads > 1; pool.c) */
	uint32_t mm_geo[MM_GEO_MAX + 1]; /* decode chunk bounds, fractions of 2^24 (forward.c: mm_range) */
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

/* seterr formats the engine's error message and returns code. */
static inline int seterr(pm_engine *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline int seterr(pm_engine *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->err, sizeof e->err, fmt, ap);
	va_end(ap);
	return code;
}

/* ---- pool.c ---- */

/* The argument of a worker thread: its engine and its thread id (>= 1).
 * engine_api.c allocates them after the worker handles. */
typedef struct {
	pm_engine *e;
	int t;
} worker_arg;

void pool_run(pm_engine *e, job_fn fn, const void *arg, int nc);
int pool_start(pm_engine *e);
void pool_stop(pm_engine *e);

/* ---- forward.c ---- */

int forward_check_model(pm_engine *e, const pm_model *m);
int forward_select_kernels(pm_engine *e);
void forward_build_geo(pm_engine *e);
void forward_build_rope(pm_engine *e);
void forward_rows(pm_engine *e, int n, int nl);

/* ---- prefix.c ---- */

/* prefix_alloc allocates the per-block bookkeeping (free stack, references,
 * hashes, tokens, hash table, LRU links) for e->n_blocks blocks of e->bs
 * tokens; 0, or -1 when out of memory (prefix_free then frees what was
 * allocated). prefix_free frees it all and may be called on a partial or
 * empty allocation. The tests build engines with these too. */
int prefix_alloc(pm_engine *e);
void prefix_free(pm_engine *e);
void prefix_init(pm_engine *e);
int prefix_take(pm_engine *e);
void prefix_release(pm_engine *e, int b);
/* prefix_match gives slot s (no blocks yet) the cached blocks matching the
 * longest prefix of seq[0..n) short of its last token, and returns how many
 * positions they cover. */
int prefix_match(pm_engine *e, slot *s, const int32_t *seq, int n);
/* prefix_commit publishes the blocks of s that its n_kv positions filled. */
void prefix_commit(pm_engine *e, slot *s, const int32_t *seq);

/* ---- kv.c ---- */

/* kv_at: the K or V row (cache: e->kcache or e->vcache) of a position at
 * offset off of block block, in layer layer. */
static inline float *kv_at(const pm_engine *e, float *cache, int layer, int block, int off)
{
	return cache + (((size_t)layer * e->n_blocks + block) * e->bs + off) * e->kvdim;
}

void kv_init(pm_engine *e);
int kv_blocks_for(const pm_engine *e, int positions);
int kv_blocks_short(const pm_engine *e, const slot *s, int upto);
void kv_reserve(pm_engine *e, slot *s, int upto);
void kv_truncate(pm_engine *e, slot *s, int keep);
int kv_reserved_blocks(const pm_engine *e);

/* ---- sample.c ---- */

void sample_seed(uint64_t s[4], uint64_t seed);
int32_t sample_at(pm_engine *e, req *r, int sx, int j, const float *logits);

/* ---- stepmetrics.c ---- */

void metrics_time_cost(pm_time_cost *c, int64_t ns);
void metrics_step_record(pm_engine *e, int phase, int batch, int tokens, int64_t ns);
void metrics_finished_at(pm_engine *e, req *r, int64_t t);

/* ---- spec.c ---- */

void spec_draft(const pm_engine *e, req *r, slot *s);
int spec_ration(pm_engine *e, int ns, int drafted);
void spec_verified(req *r, int n_draft, int accepted);

/* ---- sched.c ---- */

void sched_step(pm_engine *e);
void sched_reclaim(pm_engine *e);
int sched_free_slot(const pm_engine *e);
void sched_admit(pm_engine *e, int ri, int si, int64_t now);
void sched_finish(pm_engine *e, int ri, int reason);

#endif
