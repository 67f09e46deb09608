/*
 * model_load.c: the model loader behind model.h. gguf.c parses the file
 * (the format, and nothing else); this file checks that the parsed file
 * is a model the engine runs and fills pm_model from it.
 *
 * What the loader accepts beyond the format: general.architecture "llama",
 * "qwen2" or "qwen3" (arch.h), the hyperparameters model.h lists under that
 * architecture's key prefix (checked for range and consistency), RoPE
 * scaling "none" or "linear" and an optional rope_freqs tensor, weights of
 * exactly the expected shapes, with the biases and q/k norms the
 * architecture has, matrices in any type weights.h lists (used in place)
 * and 1-D tensors in F32, F16 or BF16 (tensors it does not use are
 * validated as GGUF, then ignored), and optionally tokenizer.ggml.tokens /
 * *_token_id / tokenizer.chat_template. Metadata values were bounds-checked
 * by the parser; here they are checked for type and range.
 *
 * Sections: owned memory · metadata · Llama model · API.
 */
#include "model.h"

#include "arch.h"
#include "gguf.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PM_MAX_VOCAB (1 << 24)

/* Messages go to an error buffer ("<path>: <message>"), as the parser's. */
typedef pm_errbuf rd;
#define fail pm_fail
#define printable pm_printable
#define PRINTABLE_MAX PM_PRINTABLE_MAX
#define value_type_name pm_value_type_name
#define ggml_type_name pm_ggml_type_name
#define name_eq pm_name_eq
typedef pm_tensor tensor_info;

/* ----------------------------------------------------------- owned memory */

/*
 * Everything the loader allocates for a model (token tables, F16
 * conversions, misaligned copies) is a block on one list hanging from
 * m->owned; pm_model_free walks it and frees the metadata table (m->kv),
 * which it took over from the parser.
 */
typedef struct owned {
	struct owned *next;
	max_align_t data[]; /* the allocation, maximally aligned */
} owned;

static void *own_alloc(pm_model *m, rd *r, uint64_t size, uint64_t count, const char *what)
{
	if (count != 0 && size > (SIZE_MAX - sizeof(owned)) / count) {
		fail(r, PM_ERR_NOMEM, "%s: %llu x %llu bytes is too large", what,
		     (unsigned long long)count, (unsigned long long)size);
		return NULL;
	}
	owned *o = malloc(sizeof(owned) + size * count);
	if (!o) {
		fail(r, PM_ERR_NOMEM, "%s: out of memory (%llu bytes)", what,
		     (unsigned long long)(size * count));
		return NULL;
	}
	o->next = m->owned;
	m->owned = o;
	return o->data;
}

/* ---------------------------------------------------------------- metadata */

static const pm_kv *find_kv(const pm_model *m, const char *key)
{
	for (int i = 0; i < m->n_kv; i++)
		if (name_eq((const uint8_t *)m->kv[i].key, m->kv[i].key_len, key))
			return &m->kv[i];
	return NULL;
}

/*
 * kv_int reads an integer of any GGUF width into *v and returns 1, or
 * returns 0 if kv is not an integer. A uint64 above INT64_MAX is also
 * stored in *big (nonzero), for the caller's range message.
 */
static int kv_int(const pm_kv *kv, int64_t *v, uint64_t *big)
{
	const uint8_t *p = kv->value;
	*big = 0;
	switch (kv->type) {
	case PM_GGUF_UINT8: *v = p[0]; return 1;
	case PM_GGUF_INT8: { int8_t x; memcpy(&x, p, 1); *v = x; return 1; }
	case PM_GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); *v = x; return 1; }
	case PM_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); *v = x; return 1; }
	case PM_GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); *v = x; return 1; }
	case PM_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); *v = x; return 1; }
	case PM_GGUF_INT64: { int64_t x; memcpy(&x, p, 8); *v = x; return 1; }
	case PM_GGUF_UINT64: {
		uint64_t x;
		memcpy(&x, p, 8);
		if (x > (uint64_t)INT64_MAX)
			*big = x;
		*v = (int64_t)(x & (uint64_t)INT64_MAX);
		return 1;
	}
	}
	return 0;
}

/*
 * get_int reads integer key into *out, which must lie in lo..hi. An absent
 * key is an error when required, else leaves *out alone.
 */
static int get_int(rd *r, const pm_model *m, const char *key, int required, int64_t lo, int64_t hi, int64_t *out)
{
	const pm_kv *kv = find_kv(m, key);
	if (!kv)
		return required ? fail(r, PM_ERR_MODEL, "missing key %s", key) : PM_OK;
	int64_t v;
	uint64_t big;
	char tb[24];
	if (!kv_int(kv, &v, &big))
		return fail(r, PM_ERR_MODEL, "%s: type %s, want an integer", key, value_type_name(kv->type, tb));
	if (big)
		return fail(r, PM_ERR_MODEL, "%s: %llu not in %lld..%lld", key, (unsigned long long)big,
			    (long long)lo, (long long)hi);
	if (v < lo || v > hi)
		return fail(r, PM_ERR_MODEL, "%s: %lld not in %lld..%lld", key, (long long)v, (long long)lo, (long long)hi);
	*out = v;
	return PM_OK;
}

/* get_float reads an optional positive, finite float32/float64 key. */
static int get_float(rd *r, const pm_model *m, const char *key, float *out)
{
	const pm_kv *kv = find_kv(m, key);
	if (!kv)
		return PM_OK;
	double v;
	char tb[24];
	if (kv->type == PM_GGUF_FLOAT32) {
		float f;
		memcpy(&f, kv->value, 4);
		v = f;
	} else if (kv->type == PM_GGUF_FLOAT64) {
		memcpy(&v, kv->value, 8);
	} else {
		return fail(r, PM_ERR_MODEL, "%s: type %s, want a float", key, value_type_name(kv->type, tb));
	}
	if (!(v > 0) || v > FLT_MAX) /* also NaN; and a float64 beyond float range */
		return fail(r, PM_ERR_MODEL, "%s: %g is not positive and finite", key, v);
	*out = (float)v;
	return PM_OK;
}

/* get_str reads an optional string key as a pointer into the file. */
static int get_str(rd *r, const pm_model *m, const char *key, const uint8_t **s, uint64_t *n)
{
	const pm_kv *kv = find_kv(m, key);
	char tb[24];
	*s = NULL;
	*n = 0;
	if (!kv)
		return PM_OK;
	if (kv->type != PM_GGUF_STRING)
		return fail(r, PM_ERR_MODEL, "%s: type %s, want string", key, value_type_name(kv->type, tb));
	memcpy(n, kv->value, 8);
	*s = kv->value + 8;
	return PM_OK;
}

/* ------------------------------------------------------------- Llama model */

typedef struct {
	rd *r;
	pm_model *m;
	tensor_info *ti;
	uint64_t n;
} tensors;

static const tensor_info *find_tensor(const tensors *ts, const char *name)
{
	for (uint64_t i = 0; i < ts->n; i++)
		if (name_eq(ts->ti[i].name, ts->ti[i].name_len, name))
			return &ts->ti[i];
	return NULL;
}

static void shape_str(char *buf, size_t cap, const uint64_t *ne, uint32_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (uint32_t j = 0; j < n && k < cap; j++) {
		int w = snprintf(buf + k, cap - k, "%s%llu", j ? " " : "[", (unsigned long long)ne[j]);
		if (w < 0)
			return;
		k += (size_t)w;
	}
	if (k < cap)
		snprintf(buf + k, cap - k, "]");
}

/*
 * find_shaped finds tensor name and checks its shape is [ne0] (ne1 == 0)
 * or [ne0 ne1].
 */
static int find_shaped(tensors *ts, const char *name, uint64_t ne0, uint64_t ne1,
		       const tensor_info **out)
{
	char have[128], want[128];
	const tensor_info *t = find_tensor(ts, name);
	if (!t)
		return fail(ts->r, PM_ERR_MODEL, "tensor %s: missing", name);
	uint64_t wne[2] = {ne0, ne1};
	uint32_t wn = ne1 ? 2 : 1;
	if (t->n_dims != wn || t->ne[0] != ne0 || (wn == 2 && t->ne[1] != ne1)) {
		shape_str(have, sizeof have, t->ne, t->n_dims);
		shape_str(want, sizeof want, wne, wn);
		return fail(ts->r, PM_ERR_MODEL, "tensor %s: shape %s want %s", name, have, want);
	}
	*out = t;
	return PM_OK;
}

/*
 * vector points *out at the floats of the 1-D tensor name of ne0
 * elements: into the file when F32 and 4-byte aligned, else at a
 * loader-owned copy (misaligned F32, or F16/BF16 widened: a few KiB).
 */
static int vector(tensors *ts, const char *name, uint64_t ne0, const float **out)
{
	rd *r = ts->r;
	char tb[24];
	const tensor_info *t;
	int rc = find_shaped(ts, name, ne0, 0, &t);
	if (rc)
		return rc;
	if (t->type != PM_TYPE_F32 && t->type != PM_TYPE_F16 && t->type != PM_TYPE_BF16)
		return fail(r, PM_ERR_MODEL, "tensor %s: type %s is not supported for a 1-D tensor (want f32, f16 or bf16)",
			    name, ggml_type_name(t->type, tb));
	if (t->type == PM_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
		*out = (const float *)(const void *)t->data;
		return PM_OK;
	}
	float *f = own_alloc(ts->m, r, sizeof(float), ne0, name);
	if (!f)
		return PM_ERR_NOMEM;
	pm_dequant(t->type, 0)(f, t->data, (int)ne0);
	*out = f;
	return PM_OK;
}

/*
 * matrix fills *out with a view of the 2-D tensor name, [ne1 rows][ne0],
 * in its stored type: the data stays in the file. Only an F32 matrix the
 * file left misaligned is copied (the kernels load floats directly).
 */
static int matrix(tensors *ts, const char *name, uint64_t ne0, uint64_t ne1, pm_weight *out)
{
	rd *r = ts->r;
	char tb[24];
	const tensor_info *t;
	int rc = find_shaped(ts, name, ne0, ne1, &t);
	if (rc)
		return rc;
	size_t row = pm_type_row_bytes(t->type, (int64_t)ne0);
	if (row == 0 || ne0 > INT32_MAX || ne1 > INT32_MAX)
		return fail(r, PM_ERR_MODEL,
			    "tensor %s: type %s is not supported (want f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K or q6_K)",
			    name, ggml_type_name(t->type, tb));
	*out = (pm_weight){.data = t->data, .type = t->type, .rows = (int32_t)ne1, .cols = (int32_t)ne0,
			   .row_bytes = row};
	if (t->type == PM_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) != 0) {
		float *f = own_alloc(ts->m, r, sizeof(float), ne0 * ne1, name);
		if (!f)
			return PM_ERR_NOMEM;
		memcpy(f, t->data, (size_t)(ne0 * ne1) * sizeof(float));
		out->data = f;
	}
	ts->m->type_mask |= (uint64_t)1 << t->type;
	if (t->type == PM_TYPE_F16)
		ts->m->f16 = 1;
	return PM_OK;
}

/* build_tokens points the token table at tokenizer.ggml.tokens, if present. */
static int build_tokens(rd *r, pm_model *m)
{
	char tb[24];
	const pm_kv *kv = find_kv(m, "tokenizer.ggml.tokens");
	if (!kv)
		return PM_OK;
	uint32_t et;
	uint64_t n;
	if (kv->type != PM_GGUF_ARRAY)
		return fail(r, PM_ERR_MODEL, "tokenizer.ggml.tokens: type %s, want an array of string",
			    value_type_name(kv->type, tb));
	memcpy(&et, kv->value, 4);
	memcpy(&n, kv->value + 4, 8);
	if (et != PM_GGUF_STRING)
		return fail(r, PM_ERR_MODEL, "tokenizer.ggml.tokens: array of %s, want an array of string",
			    value_type_name(et, tb));
	if (n < 1 || n > PM_MAX_VOCAB)
		return fail(r, PM_ERR_MODEL, "tokenizer.ggml.tokens: %llu tokens, not in 1..%d",
			    (unsigned long long)n, PM_MAX_VOCAB);
	const char **text = own_alloc(m, r, sizeof *text, n, "token table");
	uint32_t *len = text ? own_alloc(m, r, sizeof *len, n, "token table") : NULL;
	if (!len)
		return PM_ERR_NOMEM;
	/* The strings were bounds-checked when the metadata was parsed. */
	const uint8_t *p = kv->value + 12;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t k;
		memcpy(&k, p, 8);
		if (k > UINT32_MAX)
			return fail(r, PM_ERR_MODEL, "tokenizer.ggml.tokens: token %llu is longer than 4 GiB",
				    (unsigned long long)i);
		text[i] = (const char *)p + 8;
		len[i] = (uint32_t)k;
		p += 8 + k;
	}
	m->n_tokens = (int)n;
	m->tok_text = text;
	m->tok_len = len;
	return PM_OK;
}

/* build_special reads the special token ids (checked against the vocabulary) and the chat template. */
static int build_special(rd *r, pm_model *m)
{
	int rc;
	const uint8_t *s;
	uint64_t n;
	if ((rc = get_str(r, m, "tokenizer.chat_template", &s, &n)))
		return rc;
	if (s) {
		if (n > UINT32_MAX)
			return fail(r, PM_ERR_MODEL, "tokenizer.chat_template: longer than 4 GiB");
		m->chat_template = (const char *)s;
		m->chat_template_len = (uint32_t)n;
	}
	static const char *const keys[3] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
					    "tokenizer.ggml.padding_token_id"};
	int32_t *ids[3] = {&m->bos_id, &m->eos_id, &m->pad_id};
	for (int i = 0; i < 3; i++) {
		int64_t v = -1;
		if ((rc = get_int(r, m, keys[i], 0, 0, m->vocab - 1, &v)))
			return rc;
		*ids[i] = (int32_t)v;
	}
	return PM_OK;
}

/* akey writes "<arch>.<suffix>" into buf (the architecture's key prefix, as llama.cpp reads it). */
static const char *akey(char *buf, size_t cap, const pm_model *m, const char *suffix)
{
	snprintf(buf, cap, "%s.%s", m->arch, suffix);
	return buf;
}

/*
 * build_rope_scaling reads ARCH.rope.scaling.type / .factor as llama.cpp
 * does (the type defaults to "linear"; a factor applies as freq_scale =
 * 1/factor; "none" keeps 1) and the optional rope_freqs.weight tensor of
 * head_dim/2 per-pair divisors that Llama 3.1+ conversions carry. YaRN and
 * LongRoPE are refused, naming the key.
 */
static int build_rope_scaling(rd *r, pm_model *m, tensors *ts)
{
	char k1[96], k2[96], pb[PRINTABLE_MAX];
	const uint8_t *s;
	uint64_t n;
	int rc;
	m->rope_freq_scale = 1.0f;
	if ((rc = get_str(r, m, akey(k1, sizeof k1, m, "rope.scaling.type"), &s, &n)))
		return rc;
	int none = s && name_eq(s, n, "none");
	if (s && !none && !name_eq(s, n, "linear"))
		return fail(r, PM_ERR_MODEL, "%s: \"%s\" is not supported (want \"none\" or \"linear\")", k1,
			    printable(pb, s, n));
	float factor = 0;
	if ((rc = get_float(r, m, akey(k2, sizeof k2, m, "rope.scaling.factor"), &factor)))
		return rc;
	if (!factor && (rc = get_float(r, m, akey(k2, sizeof k2, m, "rope.scale_linear"), &factor)))
		return rc;
	if (factor && !none)
		m->rope_freq_scale = 1.0f / factor;
	if (find_tensor(ts, "rope_freqs.weight")) {
		if ((rc = vector(ts, "rope_freqs.weight", (uint64_t)m->head_dim / 2, &m->rope_freqs)))
			return rc;
		for (int i = 0; i < m->head_dim / 2; i++)
			if (!(m->rope_freqs[i] > 0) || m->rope_freqs[i] > FLT_MAX)
				return fail(r, PM_ERR_MODEL, "tensor rope_freqs.weight: element %d is %g, want a positive finite factor",
					    i, (double)m->rope_freqs[i]);
	}
	return PM_OK;
}

static int build_llama(rd *r, pm_model *m, tensor_info *ti, uint64_t n_tensors)
{
	int rc;
	char pb[PRINTABLE_MAX];
	const uint8_t *s;
	uint64_t n;

	/* identity */
	if (!find_kv(m, "general.architecture"))
		return fail(r, PM_ERR_MODEL, "missing key general.architecture");
	if ((rc = get_str(r, m, "general.architecture", &s, &n)))
		return rc;
	const pm_arch *arch = pm_arch_find(s, (size_t)n);
	if (!arch)
		return fail(r, PM_ERR_MODEL, "general.architecture: \"%s\" is not supported (want one of %s)",
			    printable(pb, s, n), pm_arch_names);
	snprintf(m->arch, sizeof m->arch, "%s", arch->name);
	m->rope_type = arch->rope_type;
	if ((rc = get_str(r, m, "general.name", &s, &n)))
		return rc;
	if (s) { /* cut to PM_NAME_MAX-1 bytes */
		size_t k = n < PM_NAME_MAX - 1 ? (size_t)n : PM_NAME_MAX - 1;
		memcpy(m->name, s, k);
		m->name[k] = 0;
	}

	/* hyperparameters, under the architecture's prefix */
	char kdim[96], klay[96], khead[96], kkv[96], kffn[96], kctx[96], kkey[96], kval[96], krot[96],
		keps[96], kbase[96], kvoc[96];
	akey(kdim, 96, m, "embedding_length");
	akey(klay, 96, m, "block_count");
	akey(khead, 96, m, "attention.head_count");
	akey(kkv, 96, m, "attention.head_count_kv");
	akey(kffn, 96, m, "feed_forward_length");
	akey(kctx, 96, m, "context_length");
	akey(kkey, 96, m, "attention.key_length");
	akey(kval, 96, m, "attention.value_length");
	akey(krot, 96, m, "rope.dimension_count");
	akey(keps, 96, m, "attention.layer_norm_rms_epsilon");
	akey(kbase, 96, m, "rope.freq_base");
	akey(kvoc, 96, m, "vocab_size");
	int64_t dim, layers, heads, kv_heads, ffn, ctx, rope_dims, vocab, head_dim, v_dim;
	if ((rc = get_int(r, m, kdim, 1, 1, 65536, &dim)) ||
	    (rc = get_int(r, m, klay, 1, 1, PM_MAX_LAYERS, &layers)) ||
	    (rc = get_int(r, m, khead, 1, 1, 4096, &heads)))
		return rc;
	kv_heads = heads;
	if ((rc = get_int(r, m, kkv, 0, 1, heads, &kv_heads)) ||
	    (rc = get_int(r, m, kffn, 1, 1, 1 << 20, &ffn)) ||
	    (rc = get_int(r, m, kctx, 1, 1, 1 << 20, &ctx)))
		return rc;
	if (find_kv(m, kkey)) {
		if ((rc = get_int(r, m, kkey, 1, 1, 4096, &head_dim)))
			return rc;
		if (head_dim % 2)
			return fail(r, PM_ERR_MODEL, "%s: %lld is odd; RoPE rotates pairs", kkey, (long long)head_dim);
	} else {
		if (dim % heads)
			return fail(r, PM_ERR_MODEL, "%s: %lld does not divide %s %lld", khead, (long long)heads, kdim,
				    (long long)dim);
		head_dim = dim / heads;
		if (head_dim % 2)
			return fail(r, PM_ERR_MODEL, "head dim %lld (%s / %s) is odd; RoPE rotates pairs",
				    (long long)head_dim, kdim, khead);
	}
	if (heads % kv_heads)
		return fail(r, PM_ERR_MODEL, "%s: %lld does not divide %s %lld", kkv, (long long)kv_heads, khead,
			    (long long)heads);
	v_dim = head_dim;
	if ((rc = get_int(r, m, kval, 0, 1, 4096, &v_dim)))
		return rc;
	if (v_dim != head_dim)
		return fail(r, PM_ERR_MODEL, "%s: %lld, want the key length %lld (different value and key head sizes are not supported)",
			    kval, (long long)v_dim, (long long)head_dim);
	rope_dims = head_dim;
	if ((rc = get_int(r, m, krot, 0, 1, 65536, &rope_dims)))
		return rc;
	if (rope_dims != head_dim)
		return fail(r, PM_ERR_MODEL, "%s: %lld, want the head dim %lld (partial RoPE is not supported)", krot,
			    (long long)rope_dims, (long long)head_dim);
	m->rms_eps = 1e-5f;
	m->rope_theta = 10000.0f;
	if ((rc = get_float(r, m, keps, &m->rms_eps)) || (rc = get_float(r, m, kbase, &m->rope_theta)))
		return rc;
	m->dim = (int)dim;
	m->n_layers = (int)layers;
	m->n_heads = (int)heads;
	m->n_kv_heads = (int)kv_heads;
	m->head_dim = (int)head_dim;
	m->ffn_dim = (int)ffn;
	m->ctx_len = (int)ctx;

	/* vocabulary: the token list, else ARCH.vocab_size, else the rows of token_embd */
	if ((rc = build_tokens(r, m)))
		return rc;
	vocab = 0;
	if ((rc = get_int(r, m, kvoc, 0, 1, PM_MAX_VOCAB, &vocab)))
		return rc;
	if (m->n_tokens) {
		if (vocab && vocab != m->n_tokens)
			return fail(r, PM_ERR_MODEL, "%s: %lld, but tokenizer.ggml.tokens has %d tokens", kvoc,
				    (long long)vocab, m->n_tokens);
		vocab = m->n_tokens;
	}
	tensors ts = {r, m, ti, n_tensors};
	if (!vocab) {
		const tensor_info *t = find_tensor(&ts, "token_embd.weight");
		if (t && t->n_dims == 2 && t->ne[1] >= 1 && t->ne[1] <= PM_MAX_VOCAB)
			vocab = (int64_t)t->ne[1];
		else
			vocab = 1; /* let weight() report the tensor as missing or misshapen */
	}
	m->vocab = (int)vocab;
	if ((rc = build_special(r, m)) || (rc = build_rope_scaling(r, m, &ts)))
		return rc;

	/* weights */
	uint64_t d = (uint64_t)dim, q = (uint64_t)(heads * head_dim), kvd = (uint64_t)(kv_heads * head_dim);
	uint64_t f = (uint64_t)ffn, v = (uint64_t)vocab, hd = (uint64_t)head_dim;
	if ((rc = matrix(&ts, "token_embd.weight", d, v, &m->tok_embd)))
		return rc;
	for (int l = 0; l < m->n_layers; l++) {
		pm_layer *L = &m->layers[l];
		/* need: 1 required, 0 skipped, -1 optional (loaded when present) */
		int bias = arch->qkv_bias == PM_BIAS_REQUIRED ? 1 : arch->qkv_bias == PM_BIAS_OPTIONAL ? -1 : 0;
		const struct {
			const char *suffix;
			uint64_t ne0, ne1;
			const float **vec; /* 1-D */
			pm_weight *mat;    /* 2-D */
			int need;          /* 1 required, 0 skipped, -1 optional (loaded when present) */
		} w[] = {
			{"attn_norm.weight", d, 0, &L->attn_norm, NULL, 1}, {"attn_q.weight", d, q, NULL, &L->wq, 1},
			{"attn_k.weight", d, kvd, NULL, &L->wk, 1}, {"attn_v.weight", d, kvd, NULL, &L->wv, 1},
			{"attn_q.bias", q, 0, &L->bq, NULL, bias}, {"attn_k.bias", kvd, 0, &L->bk, NULL, bias},
			{"attn_v.bias", kvd, 0, &L->bv, NULL, bias},
			{"attn_q_norm.weight", hd, 0, &L->q_norm, NULL, arch->qk_norm},
			{"attn_k_norm.weight", hd, 0, &L->k_norm, NULL, arch->qk_norm},
			{"attn_output.weight", q, d, NULL, &L->wo, 1}, {"ffn_norm.weight", d, 0, &L->ffn_norm, NULL, 1},
			{"ffn_gate.weight", d, f, NULL, &L->w_gate, 1}, {"ffn_up.weight", d, f, NULL, &L->w_up, 1},
			{"ffn_down.weight", f, d, NULL, &L->w_down, 1},
		};
		for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
			char name[64];
			snprintf(name, sizeof name, "blk.%d.%s", l, w[i].suffix);
			if (w[i].need == 0 || (w[i].need < 0 && !find_tensor(&ts, name)))
				continue;
			rc = w[i].vec ? vector(&ts, name, w[i].ne0, w[i].vec)
				      : matrix(&ts, name, w[i].ne0, w[i].ne1, w[i].mat);
			if (rc)
				return rc;
			if (w[i].mat)
				m->matrix_bytes += (uint64_t)w[i].mat->row_bytes * (uint64_t)w[i].mat->rows;
		}
		if (!L->bq != !L->bk || !L->bq != !L->bv)
			return fail(r, PM_ERR_MODEL, "blk.%d: attn_q/k/v.bias must all be present or all absent", l);
	}
	if ((rc = vector(&ts, "output_norm.weight", d, &m->out_norm)))
		return rc;
	if (find_tensor(&ts, "output.weight")) {
		if ((rc = matrix(&ts, "output.weight", d, v, &m->output)))
			return rc;
	} else {
		m->output = m->tok_embd;
		m->tied_output = 1;
	}
	m->matrix_bytes += (uint64_t)m->output.row_bytes * (uint64_t)m->output.rows;
	return PM_OK;
}
/* --------------------------------------------------------------------- API */

/* build takes the parsed file's metadata table and mapping into m (zeroed)
 * and builds the model from it; g is freed either way, and on failure the
 * caller frees m. */
static int build(rd *r, pm_gguf *g, pm_model *m)
{
	m->kv = g->kv;
	m->n_kv = g->n_kv;
	m->alignment = g->alignment;
	m->n_file_tensors = g->n_tensors;
	m->map = g->map;
	m->map_len = g->map_len;
	g->kv = NULL;
	g->map = NULL;
	int rc = build_llama(r, m, g->tensors, (uint64_t)g->n_tensors);
	pm_gguf_free(g);
	return rc;
}

int pm_model_load_mem(const void *buf, size_t len, pm_model *m, char *err, size_t errlen)
{
	rd r = {.err = err, .errlen = errlen};
	if (err && errlen)
		err[0] = 0;
	if (!m)
		return fail(&r, PM_ERR_ARG, "pm_model_load_mem: model is NULL");
	memset(m, 0, sizeof *m);
	pm_gguf g;
	int rc = pm_gguf_parse(buf, len, &g, err, errlen);
	if (!rc && (rc = build(&r, &g, m)))
		pm_model_free(m);
	return rc;
}

int pm_model_load(const char *path, pm_model *m, char *err, size_t errlen)
{
	rd r = {.path = path, .err = err, .errlen = errlen};
	if (err && errlen)
		err[0] = 0;
	if (!path || !m) {
		r.path = NULL;
		return fail(&r, PM_ERR_ARG, "pm_model_load: %s is NULL", path ? "model" : "path");
	}
	memset(m, 0, sizeof *m);
	pm_gguf g;
	int rc = pm_gguf_open(path, &g, err, errlen);
	if (!rc && (rc = build(&r, &g, m)))
		pm_model_free(m);
	return rc;
}

void pm_model_free(pm_model *m)
{
	if (!m)
		return;
	owned *o = m->owned;
	while (o) {
		owned *next = o->next;
		free(o);
		o = next;
	}
	free((void *)m->kv);
	if (m->map)
		munmap(m->map, m->map_len);
	memset(m, 0, sizeof *m);
}
