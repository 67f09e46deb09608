/*
 * engine.h: the cgo boundary of picometer's continuous-batching Llama engine.
 *
 * An engine owns B_max slots that share one paged KV cache, a waiting queue,
 * scratch buffers and metrics, all allocated by pm_engine_open/create; the
 * step loop allocates nothing. Every function returns a status from model.h
 * (PM_OK = 0; PM_ERR_ARG for a NULL engine or out-parameter); on failure
 * pm_engine_errmsg(e) says why. The exceptions cannot fail:
 * pm_engine_config_default, pm_engine_free, pm_engine_errmsg and pm_now.
 * Nothing here exits or aborts.
 *
 * Concurrency: one thread owns an engine; no two calls on the same engine
 * may run at once. Pointers the engine hands out (outputs, tokens, stats)
 * stay valid until the next call on the engine.
 *
 * Times are CLOCK_MONOTONIC nanoseconds (the clock of native.Now in Go).
 */
#ifndef PM_ENGINE_H
#define PM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define PM_MAX_BATCH 64 /* largest b_max (schema.MaxBatch) */
#define PM_MAX_SPEC_K 8 /* largest spec_k (schema.MaxSpecK) */
#define PM_SPEC_NGRAM_MAX 8 /* longest n-gram the draft lookup matches */
#define PM_SPEC_NGRAM_MIN_DEFAULT 3 /* docs/SPECULATIVE.md */
#define PM_MAX_STOP 16  /* most stop tokens per request */
#define PM_MAX_TOP_LOGPROBS 20 /* most alternatives reported per output token */
#define PM_ERRMSG_MAX 256
#define PM_DEFAULT_CTX 4096 /* context when pm_engine_config.ctx is 0 and the model's is longer */

/* Kernel choice (pm_engine_config.kernel): auto (the fastest measured
 * path this CPU runs: AVX-512 VNNI, else AVX2, else portable; NEON on
 * AArch64, where it is never measured but bitwise the portable set), or
 * one path by name, refused when the CPU cannot run it (kernels.h,
 * PM_ISA_*). */
enum {
	PM_KERNEL_AUTO = 0,
	PM_KERNEL_AVX2 = 1,
	PM_KERNEL_PORTABLE = 2,
	PM_KERNEL_AVXVNNI = 3,
	PM_KERNEL_AVX512VNNI = 4,
	PM_KERNEL_NEON = 5
};

/* Finish reasons (pm_request_stats.finish, pm_output.finish). */
enum { PM_FINISH_NONE = 0, PM_FINISH_STOP = 1, PM_FINISH_LENGTH = 2, PM_FINISH_ABORT = 3 };

/* Step phases (pm_step_record.phase). */
enum { PM_PHASE_PREFILL = 0, PM_PHASE_DECODE = 1, PM_PHASE_DRAFT = 2, PM_PHASE_VERIFY = 3 };

/* Engine configuration; field meanings and defaults as in native.Config. */
typedef struct {
	int32_t b_max;         /* slots, 1..PM_MAX_BATCH (default 8) */
	int32_t spec_k;        /* n-gram draft length, 0 = off, 0..PM_MAX_SPEC_K (default 4) */
	int32_t prefill_chunk; /* prompt tokens per slot per step, >= 1 (default 64) */
	int32_t block_size;    /* KV-cache block size in tokens, >= 1 (default 16) */
	int32_t kv_blocks;     /* KV blocks in total; 0 = b_max*ceil(ctx/block_size) */
	int32_t max_waiting;   /* waiting-queue bound, >= 0 (default 256) */
	int32_t threads;       /* compute threads, 1..64 (default: the online CPUs) */
	int32_t step_ring;     /* step records kept between snapshots, >= 1 (default 4096) */
	int32_t no_metrics;    /* 1 turns metric recording off (overhead benchmark only) */
	int32_t kernel;        /* PM_KERNEL_* */
	int32_t ctx;           /* context: most tokens (prompt + output) of one request; sizes the KV
				* cache and per-request buffers. 0 = the model's context_length, at
				* most PM_DEFAULT_CTX; else 2..the model's context_length */
	int32_t spec_ngram_min; /* shortest n-gram match that drafts, 0 = default (3),
				 * else 1..PM_SPEC_NGRAM_MAX */
	int32_t no_prefix_cache; /* 1 turns prefix caching off (default 0: full KV blocks are
				  * shared by requests with the same prefix, and kept after
				  * use until their space is needed) */
} pm_engine_config;

/* One request's generation parameters (see native.Params). */
typedef struct {
	int32_t max_tokens;   /* >= 1 */
	float temperature;    /* 0 = greedy, else > 0 */
	int32_t top_k;        /* 0 = all */
	float top_p;          /* 0 or 1 = all, else in (0,1) */
	uint64_t seed;        /* the request's own random stream */
	int32_t stop[PM_MAX_STOP]; /* extra stop token ids, the first n_stop */
	int32_t n_stop;       /* 0..PM_MAX_STOP */
	int64_t arrival_ns;   /* HTTP arrival; 0 = now */
	float presence_penalty;   /* -2..2, 0 = off (OpenAI): minus this for every token the output holds */
	float frequency_penalty;  /* -2..2, 0 = off (OpenAI): minus this times the token's count in the output */
	float repetition_penalty; /* 0 or 1 = off, else > 0 (vLLM): a prompt or output token's logit
				   * is divided by it when positive, multiplied when negative */
	int32_t logprobs;     /* 1: report each output token's log-probability */
	int32_t top_logprobs; /* 0..PM_MAX_TOP_LOGPROBS: and this many most likely tokens' */
	float min_p;          /* 0..1, 0 = off (vLLM, llama.cpp): after temperature, tokens with
			       * probability below min_p times the most likely one's are dropped */
	struct pm_grammar *grammar; /* NULL = unconstrained; else every output token is one the
				     * grammar accepts next (grammar.h). The engine holds a
				     * reference until the request's record is reused or freed.
				     * Needs pm_engine_set_token_bytes first. */
} pm_params;

/* How a constrained request's output stood against its grammar when it
 * finished (pm_request_stats.grammar). */
enum {
	PM_GRAMMAR_NONE = 0,       /* unconstrained */
	PM_GRAMMAR_COMPLETE = 1,   /* the output is a whole sentence of the grammar */
	PM_GRAMMAR_INCOMPLETE = 2, /* ended (length, abort) before the grammar could end */
	PM_GRAMMAR_DEAD = 3        /* no token of the vocabulary could continue: EOS was forced */
};

/* Raw facts of one request (see native.RequestStats). 0 = never happened. */
typedef struct {
	int64_t arrival_ns, admitted_ns, first_token_ns, last_token_ns, finish_ns;
	int32_t prompt_tokens;
	int32_t cached_tokens;     /* prompt tokens whose K/V came from the prefix cache at
				    * admission (the first one; 0 with the cache off) */
	int32_t prefill_tokens;    /* prompt + recomputation after preemption, less what the
				    * prefix cache supplied */
	int32_t decode_tokens;     /* output tokens of decode/verify steps */
	int32_t completion_tokens; /* all output tokens */
	int32_t draft_tokens, accepted_tokens, preemptions;
	int32_t n_emit;          /* entries in emit_ns */
	const int64_t *emit_ns;  /* [n_emit] end time of every emitting step */
	int32_t finish;          /* PM_FINISH_* */
	int32_t grammar;         /* PM_GRAMMAR_* */
	int64_t mask_ns;         /* time spent computing the grammar's token masks */
	int32_t masked_tokens;   /* tokens sampled under a mask */
} pm_request_stats;

/* What one step produced for one request. */
typedef struct {
	uint64_t id;
	const int32_t *tokens; /* [n_tokens] emitted in this step */
	int32_t n_tokens;
	int32_t finish;                 /* PM_FINISH_NONE while running */
	const pm_request_stats *stats;  /* set when finish != NONE */
	/* With pm_params.logprobs (else NULL and 0): the log-probability of
	 * each token, and the top_n most likely tokens at its position (ids and
	 * log-probabilities, most likely first, ties by lower id). They are
	 * the log-softmax of the logits the token was sampled from: after the
	 * penalties and temperature (1 when greedy), before top-k/top-p. */
	const float *logprobs;     /* [n_tokens] */
	const int32_t *top_ids;    /* [n_tokens][top_n] */
	const float *top_logprobs; /* [n_tokens][top_n] */
	int32_t top_n;
} pm_output;

/* MLC-LLM TimeCost for one batch size; the first sample is discarded. */
typedef struct {
	int64_t count;  /* samples after the warm-up one */
	int64_t sum_ns; /* their total */
	int32_t warm;   /* 1 once the warm-up sample was seen */
} pm_time_cost;

/* One step record of the ring (phase, requests, forward rows, wall time). */
typedef struct {
	int32_t phase;
	int32_t batch_size;
	int32_t tokens;
	int32_t _pad;
	int64_t duration_ns;
} pm_step_record;

/*
 * Cumulative engine metrics (MLC-LLM EngineMetrics) plus live gauges.
 * Time sums are nanoseconds. decode_ns is all time spent producing decode
 * tokens (decode, draft and verify steps, as in MLC-LLM); draft_ns and
 * verify_ns are its speculative parts.
 */
typedef struct {
	int64_t prefill_ns, decode_ns, draft_ns, verify_ns;
	int64_t prompt_tokens, completion_tokens; /* of finished requests */
	int64_t prefill_tokens, decode_tokens;    /* per step */
	int64_t preemptions, requests_finished, steps_dropped;
	/* prefix cache: tokens looked up and found at every admission (a
	 * recomputation after preemption too), blocks evicted to make room */
	int64_t prefix_queries, prefix_hits, prefix_evictions;
	pm_time_cost decode_by_bs[PM_MAX_BATCH + 1]; /* index = batch size */
	pm_time_cost draft_by_bs[PM_MAX_BATCH + 1];
	pm_time_cost verify_by_bs[PM_MAX_BATCH + 1];
	int64_t draft_count[PM_MAX_SPEC_K]; /* per draft position */
	int64_t accept_count[PM_MAX_SPEC_K];
	int64_t mask_ns, mask_count;    /* grammar masks: time computing them, how many */
	int64_t mask_cache_hits, mask_cache_misses; /* per-position mask cache (grammar_mask.h) */
	int32_t has_last;               /* 1 once a request finished */
	pm_request_stats last_finished; /* its emit_ns is NULL */
	/* live gauges, filled by pm_engine_metrics */
	int32_t running, waiting, slots, kv_blocks_used, kv_blocks_total;
	int32_t kv_blocks_cached; /* blocks the prefix cache publishes, held or not */
} pm_engine_metrics;

typedef struct pm_engine pm_engine;

/* pm_engine_config_default fills c with the defaults. */
void pm_engine_config_default(pm_engine_config *c);

/*
 * pm_engine_open loads the GGUF model at path (owned by the engine) and
 * creates an engine for cfg. On failure *out is NULL and err holds a message
 * (the loader's verbatim when loading failed).
 */
int pm_engine_open(const char *path, const pm_engine_config *cfg, pm_engine **out, char *err,
		   size_t errlen);

/* pm_engine_create is pm_engine_open over a model the caller owns and keeps alive. */
int pm_engine_create(const pm_model *m, const pm_engine_config *cfg, pm_engine **out, char *err,
		     size_t errlen);

/* pm_engine_free releases everything; NULL is fine. */
void pm_engine_free(pm_engine *e);

/* pm_engine_errmsg is the message of the last failed call (NUL-terminated). */
const char *pm_engine_errmsg(const pm_engine *e);

/* pm_engine_model points *m at the engine's model. */
int pm_engine_model(const pm_engine *e, const pm_model **m);

/* pm_engine_get_config writes the effective configuration: defaults
 * resolved, block_size capped at the context, kv_blocks computed. */
int pm_engine_get_config(const pm_engine *e, pm_engine_config *c);

/* pm_kernel_runs reports whether this build and CPU run kernel
 * (PM_KERNEL_*; auto always runs). */
int pm_kernel_runs(int32_t kernel);

/* pm_engine_kernel_name points *name at the path the engine computes
 * with: "avx512vnni", "avxvnni", "avx2", "neon" or "portable". */
int pm_engine_kernel_name(const pm_engine *e, const char **name);

/* pm_engine_f16_panel_bytes sets *bytes to the bytes of F16 weights the
 * engine repacked into panels of 8 rows and computes with in that layout
 * (mm_f16_panel.h): 0 when it computes every matrix in the file's rows. */
int pm_engine_f16_panel_bytes(const pm_engine *e, uint64_t *bytes);

/* pm_engine_kx8_bytes sets *bytes to the bytes of K-quant weights (Q4_K,
 * Q6_K) the engine repacked into tiles of 8 rows (kx8.h; the x86 paths):
 * 0 when it computes every such matrix in the file's rows. */
int pm_engine_kx8_bytes(const pm_engine *e, uint64_t *bytes);

/* pm_engine_q32x8_bytes sets *bytes to the bytes of Q4_0 weights the
 * engine repacked into tiles of 8 rows (q32x8.h; the AVX2 path): 0 when
 * it computes every such matrix in the file's rows. */
int pm_engine_q32x8_bytes(const pm_engine *e, uint64_t *bytes);

/* pm_engine_row_copy_bytes sets *bytes to the bytes of the other
 * matrices the engine copied in rows, as they are, beside the repacked
 * ones in 2 MiB pages (panels.h; the x86 paths): 0 when it reads them
 * from the file's mapping. */
int pm_engine_row_copy_bytes(const pm_engine *e, uint64_t *bytes);

/* pm_engine_cache_fit sets *llc to the last-level cache the engine found
 * (CPU 0's, from Linux's sysfs; 0: unknown, or a path whose kernels do not
 * prefetch: portable, NEON) and *step to the bytes of the matrices one
 * decode step reads (0 there too). When *step > *llc > 0 every token
 * streams the weights from memory, and the decode kernels prefetch them
 * into L2 (pm_weight.far). */
int pm_engine_cache_fit(const pm_engine *e, uint64_t *llc, uint64_t *step);

/*
 * pm_engine_submit copies prompt[0..n) and p, and admits the request into a
 * free slot at once when nobody waits and the KV cache has room; otherwise
 * it queues it (PM_ERR_FULL when max_waiting requests already wait).
 */
int pm_engine_submit(pm_engine *e, const int32_t *prompt, int32_t n, const pm_params *p,
		     uint64_t *id);

/*
 * pm_engine_step runs one scheduler iteration (admit, one prefill chunk per
 * prefilling slot, one decode or draft+verify over the decoding slots) and
 * points *outs at n_out outputs. With nothing to do n_out is 0.
 */
int pm_engine_step(pm_engine *e, const pm_output **outs, int32_t *n_out);

/*
 * pm_engine_set_token_bytes gives the engine the bytes of every token, which
 * constrained decoding matches against grammars: token i is
 * bytes[offs[i]..offs[i+1]) for i < n, n the model's vocabulary size; a
 * token with no bytes (a control token) is never allowed by a grammar
 * (EOS and a request's stop tokens are allowed where the grammar may end).
 * Called once, before the first constrained request; it builds the token
 * index and the mask cache (allocation happens here, not in the step loop).
 */
int pm_engine_set_token_bytes(pm_engine *e, const uint8_t *bytes, const uint32_t *offs, int32_t n);

/* pm_engine_cancel aborts a waiting or running request (PM_ERR_NOTFOUND otherwise). */
int pm_engine_cancel(pm_engine *e, uint64_t id, const pm_request_stats **stats);

/* pm_engine_load reports the requests in slots and waiting. */
int pm_engine_load(const pm_engine *e, int32_t *running, int32_t *waiting);

/* pm_engine_get_metrics fills the live gauges and points *m at the cumulative
 * metrics (engine memory, updated by every later call). */
int pm_engine_get_metrics(pm_engine *e, const pm_engine_metrics **m);

/*
 * pm_engine_take_steps copies the step records since the previous call, oldest
 * first, into dst (at most cap; the ring holds at most step_ring) and empties
 * the ring. *n is the number copied.
 */
int pm_engine_take_steps(pm_engine *e, pm_step_record *dst, int32_t cap, int32_t *n);

/*
 * pm_engine_score runs tokens[0..n) through the model in one slot of an idle
 * engine (no request running or waiting) and writes the logits of every
 * position to logits[n][vocab]. It uses the same forward as serving; tests
 * compare it with a reference implementation.
 */
int pm_engine_score(pm_engine *e, const int32_t *tokens, int32_t n, float *logits);

/*
 * pm_engine_set_no_metrics switches metric recording off (1) or on (0)
 * between steps. It exists for the overhead benchmark, which alternates it
 * on one engine so both sides share memory, caches and workload; times and
 * counts that fall in an "off" step are simply not recorded.
 */
int pm_engine_set_no_metrics(pm_engine *e, int32_t off);

/* pm_now is CLOCK_MONOTONIC in nanoseconds. */
int64_t pm_now(void);

#endif
