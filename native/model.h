/*
 * model.h: the contract between the model loader (model_load.c, on the
 * GGUF parser gguf.c) and the engine (engine.c and friends). Status codes
 * are shared by every native entry point.
 *
 * Tensor layout: GGUF lists dimensions innermost first (ne[0] is contiguous).
 * A Llama linear weight with ne = [in, out] is therefore a row-major matrix
 * [out][in]: row r holds the weights of output r, contiguous over the input.
 * RoPE rotates adjacent pairs (x[2i], x[2i+1]) of each head (ggml rope mode 0)
 * for llama, and (x[i], x[i+head_dim/2]) (NEOX) for qwen2/qwen3: rope_type.
 */
#ifndef PM_MODEL_H
#define PM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "weights.h"

/* Status codes. 0 is success; every API function returns one of these. */
enum {
	PM_OK = 0,
	PM_ERR_IO = 1,       /* open/read/mmap failed */
	PM_ERR_FORMAT = 2,   /* not a valid GGUF v3 file (magic, version, truncation, types) */
	PM_ERR_MODEL = 3,    /* valid GGUF, but not a model we can run (missing tensor, bad shape, bad hparam) */
	PM_ERR_NOMEM = 4,    /* allocation failed */
	PM_ERR_ARG = 5,      /* invalid argument from the caller */
	PM_ERR_FULL = 6,     /* waiting queue or KV cache full */
	PM_ERR_NOTFOUND = 7, /* unknown request id */
	PM_ERR_STATE = 8,    /* call not valid in the current state */
	PM_ERR_INTERNAL = 9  /* broken invariant (a bug) */
};

#define PM_MAX_LAYERS 64
#define PM_NAME_MAX 128

/* GGUF metadata value types (the 13 of GGUF v3). */
enum {
	PM_GGUF_UINT8 = 0,
	PM_GGUF_INT8 = 1,
	PM_GGUF_UINT16 = 2,
	PM_GGUF_INT16 = 3,
	PM_GGUF_UINT32 = 4,
	PM_GGUF_INT32 = 5,
	PM_GGUF_FLOAT32 = 6,
	PM_GGUF_BOOL = 7,
	PM_GGUF_STRING = 8,
	PM_GGUF_ARRAY = 9,
	PM_GGUF_UINT64 = 10,
	PM_GGUF_INT64 = 11,
	PM_GGUF_FLOAT64 = 12
};

/*
 * One metadata entry as the parser (gguf.c) delimited it. key and value point into
 * the file (or the caller's buffer); value holds the encoded value: for a
 * scalar its bytes, for a string the uint64 length and the bytes, for an
 * array the element type, the uint64 count and the elements.
 */
typedef struct {
	const char *key; /* not NUL-terminated */
	uint64_t key_len;
	uint32_t type; /* PM_GGUF_* */
	const uint8_t *value;
	uint64_t value_len;
} pm_kv;

/* Matrices are typed views into the mapping (weights.h), used as stored;
 * 1-D tensors (norms) are F32. */
typedef struct {
	const float *attn_norm; /* [dim] */
	pm_weight wq;           /* [n_heads*head_dim][dim] */
	pm_weight wk;           /* [n_kv_heads*head_dim][dim] */
	pm_weight wv;           /* [n_kv_heads*head_dim][dim] */
	pm_weight wo;           /* [dim][n_heads*head_dim] */
	const float *ffn_norm;  /* [dim] */
	pm_weight w_gate;       /* [ffn_dim][dim] */
	pm_weight w_up;         /* [ffn_dim][dim] */
	pm_weight w_down;       /* [dim][ffn_dim] */
	/* optional 1-D tensors, F32 (NULL when the architecture or file has none) */
	const float *bq;     /* [n_heads*head_dim] attn_q.bias */
	const float *bk;     /* [n_kv_heads*head_dim] attn_k.bias */
	const float *bv;     /* [n_kv_heads*head_dim] attn_v.bias */
	const float *q_norm; /* [head_dim] attn_q_norm: RMSNorm of each query head (qwen3) */
	const float *k_norm; /* [head_dim] attn_k_norm: RMSNorm of each key head (qwen3) */
} pm_layer;

typedef struct {
	/* identity */
	char name[PM_NAME_MAX]; /* general.name ("" if absent; cut to PM_NAME_MAX-1 bytes) */
	char arch[32];          /* general.architecture: "llama", "qwen2" or "qwen3" (arch.h) */

	/* hyperparameters (<arch>.* keys; ARCH below is the architecture's name) */
	int dim;        /* ARCH.embedding_length */
	int n_layers;   /* ARCH.block_count (<= PM_MAX_LAYERS) */
	int n_heads;    /* ARCH.attention.head_count */
	int n_kv_heads; /* ARCH.attention.head_count_kv (defaults to n_heads) */
	int head_dim;   /* ARCH.attention.key_length (= value_length; defaults to dim / n_heads) */
	int ffn_dim;    /* ARCH.feed_forward_length */
	int vocab;      /* rows of token_embd */
	int ctx_len;    /* ARCH.context_length: the training context (the engine's is configured) */
	float rms_eps;  /* ARCH.attention.layer_norm_rms_epsilon (default 1e-5) */
	float rope_theta; /* ARCH.rope.freq_base (default 10000) */

	/* tokenizer.ggml.* (ids are -1 when absent) */
	int32_t bos_id, eos_id, pad_id;
	int n_tokens;              /* length of tokenizer.ggml.tokens (0 if absent) */
	const char **tok_text;     /* [n_tokens] pointers into the file (NOT NUL-terminated) */
	const uint32_t *tok_len;   /* [n_tokens] byte lengths */
	const char *chat_template; /* tokenizer.chat_template, not NUL-terminated, or NULL */
	uint32_t chat_template_len;

	/* weights: point into the mapping (matrices in their stored type), or
	 * into buffers the loader owns (a misaligned F32 matrix, a 1-D tensor
	 * stored as F16 or BF16) */
	pm_weight tok_embd; /* [vocab][dim] */
	pm_layer layers[PM_MAX_LAYERS];
	const float *out_norm; /* [dim] */
	pm_weight output;      /* [vocab][dim]; == tok_embd when the file has no output tensor */
	int tied_output;       /* 1 when output == tok_embd */

	/* ownership (loader private) */
	void *map;
	size_t map_len;
	void *owned; /* loader-owned allocations (copies of misaligned or 1-D F16 tensors, token tables) */

	/* the file as parsed (added after the fields above; all loader-owned) */
	int n_kv;             /* metadata entries */
	const pm_kv *kv;      /* [n_kv] in file order */
	int n_file_tensors;   /* tensors in the file (the model uses 9*n_layers+2, +1 untied) */
	uint32_t alignment;   /* general.alignment (default 32) */
	int f16;              /* 1 when any weight is stored as F16 */
	uint64_t type_mask;   /* bit t set when some matrix has type t (PM_TYPE_*) */
	uint64_t matrix_bytes; /* bytes of the matrices a decoded token reads (every layer matrix and the output) */

	/* architecture features (added after the fields above) */
	int rope_type;          /* PM_ROPE_NORM or PM_ROPE_NEOX (arch.h), by architecture */
	float rope_freq_scale;  /* 1 / ARCH.rope.scaling.factor (linear scaling), else 1 (0 means 1) */
	const float *rope_freqs; /* [head_dim/2] rope_freqs.weight (Llama 3 scaling), or NULL */
} pm_model;

/*
 * pm_model_load maps a GGUF v3 file and fills m. On failure it returns a
 * status, writes a message naming the problem into err (NUL-terminated,
 * at most errlen bytes; "<path>: <problem>"), and leaves nothing allocated
 * and m zeroed. Every count, length and offset in the file is checked
 * against its size before use. The file must not be truncated while the
 * model is loaded (the mapping would fault).
 */
int pm_model_load(const char *path, pm_model *m, char *err, size_t errlen);

/*
 * pm_model_load_mem is pm_model_load on a caller's buffer (no mmap, no
 * file): weights and token texts point into buf, which must outlive the
 * model. Messages have no path prefix. Any len bytes are safe input.
 */
int pm_model_load_mem(const void *buf, size_t len, pm_model *m, char *err, size_t errlen);

/* pm_model_free releases what pm_model_load acquired; safe on a zeroed model. */
void pm_model_free(pm_model *m);

#endif
