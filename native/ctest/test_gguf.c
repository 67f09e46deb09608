/*
 * test_gguf.c: tests of the GGUF parser (gguf.c) and the model loader on it
 * (model_load.c) under AddressSanitizer + UBSan (native/ctest/run.sh). It builds small GGUF files itself, loads
 * every prefix and many single-byte mutations of them (each from a buffer
 * of exactly its size, so any over-read is a sanitizer finding), checks the
 * error paths free everything (the leak checker runs at exit), and loads
 * the tiny model from PICOMETER_TINY_MODEL.
 */
#include "gguf.h"
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* MAT is the floats of an F32 matrix view. */
#define MAT(w) ((const float *)(w).data)

#include "ctest.h"

/* ----------------------------------------------------------- GGUF builder */

typedef struct {
	uint8_t *b;
	size_t n, cap;
} buf;

static void put(buf *w, const void *p, size_t n)
{
	if (w->n + n > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		while (cap < w->n + n)
			cap *= 2;
		uint8_t *nb = realloc(w->b, cap);
		if (!nb) {
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
		w->b = nb;
		w->cap = cap;
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}
static void put_u32(buf *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(buf *w, uint64_t v) { put(w, &v, 8); }
static void put_str(buf *w, const char *s)
{
	put_u64(w, strlen(s));
	put(w, s, strlen(s));
}
static void kv_u32(buf *w, const char *k, uint32_t v)
{
	put_str(w, k);
	put_u32(w, PM_GGUF_UINT32);
	put_u32(w, v);
}
static void kv_str(buf *w, const char *k, const char *v)
{
	put_str(w, k);
	put_u32(w, PM_GGUF_STRING);
	put_str(w, v);
}

/* The micro model: dim 8, 1 layer, 2 heads / 1 KV head, FFN 12, vocab 6. */
enum { DIM = 8, FFN = 12, VOCAB = 6, KVD = 4, NT = 12 };
static const struct {
	const char *name;
	uint64_t ne0, ne1;
} micro_tensors[NT] = {
	{"token_embd.weight", DIM, VOCAB}, {"blk.0.attn_norm.weight", DIM, 0},
	{"blk.0.attn_q.weight", DIM, DIM}, {"blk.0.attn_k.weight", DIM, KVD},
	{"blk.0.attn_v.weight", DIM, KVD}, {"blk.0.attn_output.weight", DIM, DIM},
	{"blk.0.ffn_norm.weight", DIM, 0}, {"blk.0.ffn_gate.weight", DIM, FFN},
	{"blk.0.ffn_up.weight", DIM, FFN}, {"blk.0.ffn_down.weight", FFN, DIM},
	{"output_norm.weight", DIM, 0}, {"output.weight", DIM, VOCAB},
};

/* value is element i of tensor t: every element of the file is distinct. */
static float value(int t, uint64_t i) { return (float)(t * 1000 + (int)i) * 0.125f; }

/* Variations of the micro model, one malformation (or feature) each. */
typedef struct {
	uint32_t magic, version;
	uint32_t align;    /* general.alignment, 0 = absent */
	int drop;          /* tensor index left out, -1 none */
	int f16;           /* tensor index stored as F16, -1 none */
	int bad_shape;     /* tensor index whose ne1 is one too small, -1 none */
	int q8;            /* tensor index stored with type i8 (not computable), -1 none */
	const char *arch;  /* general.architecture, NULL = absent */
	int no_layers;     /* leave out llama.block_count */
	uint32_t bos;      /* tokenizer.ggml.bos_token_id */
	int extra;         /* add metadata of every value type first */
	int pad;           /* 1..7: add a string key of that many bytes */
} spec;

static spec micro_spec(void)
{
	return (spec){.magic = 0x46554747u, .version = 3, .align = 32, .drop = -1, .f16 = -1,
		      .bad_shape = -1, .q8 = -1, .arch = "llama", .bos = 0, .extra = 1};
}

static void put_extra(buf *w, uint64_t *n_kv)
{
	static const uint32_t scalars[] = {PM_GGUF_UINT8, PM_GGUF_INT8, PM_GGUF_UINT16, PM_GGUF_INT16,
		PM_GGUF_UINT32, PM_GGUF_INT32, PM_GGUF_FLOAT32, PM_GGUF_BOOL, PM_GGUF_UINT64,
		PM_GGUF_INT64, PM_GGUF_FLOAT64};
	static const int sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 8, 8};
	char key[32];
	for (int i = 0; i < 11; i++) {
		uint8_t v[8] = {1, 0, 0, 0, 0, 0, 0, 0};
		snprintf(key, sizeof key, "x.scalar%d", i);
		put_str(w, key);
		put_u32(w, scalars[i]);
		put(w, v, (size_t)sizes[i]);
		snprintf(key, sizeof key, "x.array%d", i);
		put_str(w, key);
		put_u32(w, PM_GGUF_ARRAY);
		put_u32(w, scalars[i]);
		put_u64(w, 3);
		for (int j = 0; j < 3; j++)
			put(w, v, (size_t)sizes[i]);
		*n_kv += 2;
	}
	kv_str(w, "x.string", "hello");
	put_str(w, "x.strings");
	put_u32(w, PM_GGUF_ARRAY);
	put_u32(w, PM_GGUF_STRING);
	put_u64(w, 2);
	put_str(w, "");
	put_str(w, "ab");
	/* [[["q"]], []] : arrays of arrays */
	put_str(w, "x.nested");
	put_u32(w, PM_GGUF_ARRAY);
	put_u32(w, PM_GGUF_ARRAY);
	put_u64(w, 2);
	put_u32(w, PM_GGUF_ARRAY);
	put_u64(w, 1);
	put_u32(w, PM_GGUF_STRING);
	put_u64(w, 1);
	put_str(w, "q");
	put_u32(w, PM_GGUF_UINT8);
	put_u64(w, 0);
	*n_kv += 3;
}

static const char *const tokens[VOCAB] = {"<|bos|>", "<|eos|>", "a", "b", "\xc3\xa9", ""};

static buf build(const spec *s)
{
	buf w = {0}, kv = {0};
	uint64_t n_kv = 0;
	if (s->extra)
		put_extra(&kv, &n_kv);
	if (s->arch) {
		kv_str(&kv, "general.architecture", s->arch);
		n_kv++;
	}
	kv_str(&kv, "general.name", "micro");
	if (s->align) {
		kv_u32(&kv, "general.alignment", s->align);
		n_kv++;
	}
	kv_u32(&kv, "llama.embedding_length", DIM);
	if (!s->no_layers) {
		kv_u32(&kv, "llama.block_count", 1);
		n_kv++;
	}
	kv_u32(&kv, "llama.attention.head_count", 2);
	kv_u32(&kv, "llama.attention.head_count_kv", 1);
	kv_u32(&kv, "llama.feed_forward_length", FFN);
	kv_u32(&kv, "llama.context_length", 16);
	put_str(&kv, "llama.rope.freq_base");
	put_u32(&kv, PM_GGUF_FLOAT32);
	float theta = 500000.0f;
	put(&kv, &theta, 4);
	put_str(&kv, "tokenizer.ggml.tokens");
	put_u32(&kv, PM_GGUF_ARRAY);
	put_u32(&kv, PM_GGUF_STRING);
	put_u64(&kv, VOCAB);
	for (int i = 0; i < VOCAB; i++)
		put_str(&kv, tokens[i]);
	kv_u32(&kv, "tokenizer.ggml.bos_token_id", s->bos);
	kv_u32(&kv, "tokenizer.ggml.eos_token_id", 1);
	kv_str(&kv, "tokenizer.chat_template", "{{ messages }}");
	n_kv += 11;
	if (s->pad) { /* shifts everything after the metadata by pad bytes */
		char pad[8] = "xxxxxxx";
		pad[s->pad] = 0;
		kv_str(&kv, "x.pad", pad);
		n_kv++;
	}

	uint64_t align = s->align ? s->align : 32;
	put_u32(&w, s->magic);
	put_u32(&w, s->version);
	put_u64(&w, NT - (s->drop >= 0));
	put_u64(&w, n_kv);
	put(&w, kv.b, kv.n);
	free(kv.b);

	/* tensor infos, then data packed at aligned offsets */
	uint64_t off = 0, offs[NT], sizes[NT];
	for (int t = 0; t < NT; t++) {
		if (t == s->drop)
			continue;
		uint64_t ne0 = micro_tensors[t].ne0, ne1 = micro_tensors[t].ne1;
		uint32_t type = t == s->f16 ? 1 : 0;
		if (t == s->bad_shape)
			ne1--;
		if (t == s->q8) /* a type the engine does not compute: i8 */
			type = 24;
		uint64_t n = ne0 * (ne1 ? ne1 : 1);
		sizes[t] = type == 24 ? n : type == 1 ? 2 * n : 4 * n;
		offs[t] = off;
		off = (off + sizes[t] + align - 1) / align * align;
		put_str(&w, micro_tensors[t].name);
		put_u32(&w, ne1 ? 2 : 1);
		put_u64(&w, ne0);
		if (ne1)
			put_u64(&w, ne1);
		put_u32(&w, type);
		put_u64(&w, offs[t]);
	}
	static const uint8_t zeros[64];
	put(&w, zeros, (size_t)((w.n + align - 1) / align * align - w.n));
	size_t data = w.n;
	for (int t = 0; t < NT; t++) {
		if (t == s->drop)
			continue;
		put(&w, zeros, (size_t)(data + offs[t] - w.n));
		for (uint64_t i = 0; i < sizes[t] / (t == s->f16 ? 2 : 4); i++) {
			if (t == s->f16) {
				/* 1, -2, 2^-24 (subnormal), +inf, then 0.5 */
				static const uint16_t h[] = {0x3c00, 0xc000, 0x0001, 0x7c00, 0x3800};
				put(&w, &h[i < 5 ? i : 4], 2);
			} else {
				float v = value(t, i);
				put(&w, &v, 4);
			}
		}
	}
	return w;
}

/* load_exact loads a heap copy of exactly n bytes of p (so over-reads are findings). */
static int load_exact(const uint8_t *p, size_t n, pm_model *m, uint8_t **copy, char *err, size_t errlen)
{
	*copy = malloc(n ? n : 1);
	if (!*copy) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	if (n)
		memcpy(*copy, p, n);
	return pm_model_load_mem(*copy, n, m, err, errlen);
}

static int is_zero(const pm_model *m)
{
	static const pm_model z;
	return memcmp(m, &z, sizeof z) == 0;
}

/* expect loads s's file and checks the status and exact message. */
static void expect(const char *name, const spec *s, int status, const char *msg)
{
	buf w = build(s);
	pm_model m;
	uint8_t *copy;
	char err[256];
	int rc = load_exact(w.b, w.n, &m, &copy, err, sizeof err);
	CHECK(rc == status, "%s: status %d want %d (%s)", name, rc, status, err);
	CHECK(strcmp(err, msg) == 0, "%s: message \"%s\"\n\twant \"%s\"", name, err, msg);
	if (rc == PM_OK)
		pm_model_free(&m);
	CHECK(is_zero(&m), "%s: model not zeroed after free/failure", name);
	free(copy);
	free(w.b);
}

/* ------------------------------------------------------------------ tests */

static void test_valid(void)
{
	spec s = micro_spec();
	buf w = build(&s);
	pm_model m;
	uint8_t *copy;
	char err[256];
	int rc = load_exact(w.b, w.n, &m, &copy, err, sizeof err);
	CHECK(rc == PM_OK, "valid micro: %d %s", rc, err);
	if (rc == PM_OK) {
		CHECK(strcmp(m.name, "micro") == 0 && strcmp(m.arch, "llama") == 0, "name %s arch %s", m.name, m.arch);
		CHECK(m.dim == DIM && m.n_layers == 1 && m.n_heads == 2 && m.n_kv_heads == 1 && m.head_dim == 4 &&
			      m.ffn_dim == FFN && m.vocab == VOCAB && m.ctx_len == 16,
		      "hparams %d %d %d %d %d %d %d %d", m.dim, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim,
		      m.ffn_dim, m.vocab, m.ctx_len);
		CHECK(m.rms_eps == 1e-5f && m.rope_theta == 500000.0f, "eps %g theta %g", m.rms_eps, m.rope_theta);
		CHECK(m.bos_id == 0 && m.eos_id == 1 && m.pad_id == -1, "ids %d %d %d", m.bos_id, m.eos_id, m.pad_id);
		CHECK(m.n_tokens == VOCAB, "n_tokens %d", m.n_tokens);
		for (int i = 0; i < m.n_tokens && i < VOCAB; i++)
			CHECK(m.tok_len[i] == strlen(tokens[i]) && memcmp(m.tok_text[i], tokens[i], m.tok_len[i]) == 0,
			      "token %d", i);
		CHECK(m.chat_template_len == 14 && memcmp(m.chat_template, "{{ messages }}", 14) == 0, "template");
		CHECK(m.n_kv == 39 && m.n_file_tensors == NT && m.alignment == 32 && !m.tied_output && !m.f16,
		      "n_kv %d tensors %d alignment %u tied %d f16 %d", m.n_kv, m.n_file_tensors, m.alignment,
		      m.tied_output, m.f16);
		const float *ptrs[NT] = {MAT(m.tok_embd), m.layers[0].attn_norm, MAT(m.layers[0].wq), MAT(m.layers[0].wk),
			MAT(m.layers[0].wv), MAT(m.layers[0].wo), m.layers[0].ffn_norm, MAT(m.layers[0].w_gate), MAT(m.layers[0].w_up),
			MAT(m.layers[0].w_down), m.out_norm, MAT(m.output)};
		for (int t = 0; t < NT; t++) {
			uint64_t n = micro_tensors[t].ne0 * (micro_tensors[t].ne1 ? micro_tensors[t].ne1 : 1);
			CHECK((const uint8_t *)ptrs[t] >= copy && (const uint8_t *)(ptrs[t] + n) <= copy + w.n,
			      "%s does not point into the buffer", micro_tensors[t].name);
			int ok = 1;
			for (uint64_t i = 0; i < n; i++)
				ok &= ptrs[t][i] == value(t, i);
			CHECK(ok, "%s: wrong data", micro_tensors[t].name);
		}
		pm_model_free(&m);
	}
	free(copy);
	free(w.b);
}

static void test_features(void)
{
	pm_model m;
	uint8_t *copy;
	char err[256];
	int rc;

	/* tied output: output == tok_embd */
	spec s = micro_spec();
	s.drop = NT - 1;
	buf w = build(&s);
	rc = load_exact(w.b, w.n, &m, &copy, err, sizeof err);
	CHECK(rc == PM_OK && m.tied_output && m.output.data == m.tok_embd.data, "tied: %d %s", rc, err);
	if (rc == PM_OK)
		pm_model_free(&m);
	free(copy);
	free(w.b);

	/* F16 matrix used in place, as stored */
	s = micro_spec();
	s.f16 = 3; /* blk.0.attn_k.weight */
	w = build(&s);
	rc = load_exact(w.b, w.n, &m, &copy, err, sizeof err);
	CHECK(rc == PM_OK, "f16: %d %s", rc, err);
	if (rc == PM_OK) {
		const pm_weight *wk = &m.layers[0].wk;
		CHECK(m.f16 && wk->type == PM_TYPE_F16 && (const uint8_t *)wk->data >= copy &&
			      (const uint8_t *)wk->data < copy + w.n && wk->row_bytes == DIM * 2,
		      "f16 not used in place");
		float k[DIM * KVD];
		for (int r = 0; r < KVD; r++)
			pm_dequant(PM_TYPE_F16, 0)(k + r * DIM, pm_weight_row(wk, r), DIM);
		CHECK(k[0] == 1.0f && k[1] == -2.0f && k[2] == ldexpf(1, -24) && isinf(k[3]) && k[3] > 0 &&
			      k[4] == 0.5f && k[DIM * KVD - 1] == 0.5f,
		      "f16 values %g %g %g %g %g", k[0], k[1], k[2], k[3], k[4]);
		CHECK(MAT(m.layers[0].wq)[3] == value(2, 3), "neighbour of the f16 tensor");
		pm_model_free(&m);
	}
	free(copy);
	free(w.b);

	/*
	 * alignment 1: with 1..4 extra metadata bytes the data section starts
	 * at every offset mod 4; misaligned F32 tensors are copied to aligned
	 * loader-owned memory, aligned ones are used in place.
	 */
	int copied = 0;
	for (int pad = 1; pad <= 4; pad++) {
		s = micro_spec();
		s.align = 1;
		s.pad = pad;
		w = build(&s);
		rc = load_exact(w.b, w.n, &m, &copy, err, sizeof err);
		CHECK(rc == PM_OK, "alignment 1 pad %d: %d %s", pad, rc, err);
		if (rc == PM_OK) {
			CHECK(m.alignment == 1, "alignment %u", m.alignment);
			const float *ptrs[NT] = {MAT(m.tok_embd), m.layers[0].attn_norm, MAT(m.layers[0].wq), MAT(m.layers[0].wk),
				MAT(m.layers[0].wv), MAT(m.layers[0].wo), m.layers[0].ffn_norm, MAT(m.layers[0].w_gate),
				MAT(m.layers[0].w_up), MAT(m.layers[0].w_down), m.out_norm, MAT(m.output)};
			for (int t = 0; t < NT; t++) {
				uint64_t n = micro_tensors[t].ne0 * (micro_tensors[t].ne1 ? micro_tensors[t].ne1 : 1);
				CHECK(((uintptr_t)ptrs[t] % sizeof(float)) == 0, "%s misaligned", micro_tensors[t].name);
				int ok = 1;
				for (uint64_t i = 0; i < n; i++)
					ok &= ptrs[t][i] == value(t, i);
				CHECK(ok, "pad %d: %s: wrong data", pad, micro_tensors[t].name);
			}
			copied += !((const uint8_t *)m.tok_embd.data >= copy && (const uint8_t *)m.tok_embd.data < copy + w.n);
			pm_model_free(&m);
		}
		free(copy);
		free(w.b);
	}
	CHECK(copied == 3, "%d of 4 layouts were copied, want the 3 misaligned ones", copied);
}

static void test_errors(void)
{
	spec s;
	s = micro_spec(); s.magic = 0x464c457fu;
	expect("bad magic", &s, PM_ERR_FORMAT, "bad magic 0x464c457f, not a GGUF file");
	s = micro_spec(); s.version = 2;
	expect("version", &s, PM_ERR_FORMAT, "unsupported GGUF version 2");
	s = micro_spec(); s.align = 24;
	expect("alignment", &s, PM_ERR_FORMAT, "general.alignment: 24 is not a power of two");
	s = micro_spec(); s.drop = 8;
	expect("missing tensor", &s, PM_ERR_MODEL, "tensor blk.0.ffn_up.weight: missing");
	s = micro_spec(); s.bad_shape = 0;
	expect("bad shape", &s, PM_ERR_MODEL, "tensor token_embd.weight: shape [8 5] want [8 6]");
	s = micro_spec(); s.bad_shape = 11;
	expect("bad output shape", &s, PM_ERR_MODEL, "tensor output.weight: shape [8 5] want [8 6]");
	s = micro_spec(); s.q8 = 7;
	expect("i8 tensor", &s, PM_ERR_MODEL,
	       "tensor blk.0.ffn_gate.weight: type i8 is not supported (want f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, "
	       "q8_0, q4_K, q5_K or q6_K)");
	s = micro_spec(); s.arch = "gpt2";
	expect("arch", &s, PM_ERR_MODEL, "general.architecture: \"gpt2\" is not supported (want one of llama, qwen2, qwen3)");
	s = micro_spec(); s.arch = NULL;
	expect("no arch", &s, PM_ERR_MODEL, "missing key general.architecture");
	s = micro_spec(); s.no_layers = 1;
	expect("no block count", &s, PM_ERR_MODEL, "missing key llama.block_count");
	s = micro_spec(); s.bos = 6;
	expect("bos", &s, PM_ERR_MODEL, "tokenizer.ggml.bos_token_id: 6 not in 0..5");
}

/* Every strict prefix of a valid file fails cleanly with a format error. */
static void test_prefixes(void)
{
	spec s = micro_spec();
	buf w = build(&s);
	int bad = 0;
	for (size_t n = 0; n < w.n; n++) {
		pm_model m;
		uint8_t *copy;
		char err[256];
		int rc = load_exact(w.b, n, &m, &copy, err, sizeof err);
		int known = strncmp(err, "truncated: ", 11) == 0 || strstr(err, "can hold") != NULL ||
			    strstr(err, "is beyond the end of the file") != NULL;
		if (rc != PM_ERR_FORMAT || !known || !is_zero(&m)) {
			if (bad++ < 5)
				CHECK(0, "prefix %zu: status %d \"%s\"", n, rc, err);
			if (rc == PM_OK)
				pm_model_free(&m);
		}
		free(copy);
	}
	CHECK(bad == 0, "%d of %zu prefixes misbehaved", bad, w.n);
	free(w.b);
}

/*
 * Every byte of the file set to a few values: the loader must return
 * (success or a status with a message), never read out of bounds or leak.
 */
static void test_mutations(void)
{
	static const uint8_t values[] = {0x00, 0x01, 0x07, 0x0d, 0x20, 0x7f, 0x80, 0xff};
	spec s = micro_spec();
	buf w = build(&s);
	int ok = 0, failed = 0;
	for (size_t i = 0; i < w.n; i++) {
		for (size_t v = 0; v < sizeof values; v++) {
			if (w.b[i] == values[v])
				continue;
			uint8_t old = w.b[i];
			w.b[i] = values[v];
			pm_model m;
			uint8_t *copy;
			char err[256];
			int rc = load_exact(w.b, w.n, &m, &copy, err, sizeof err);
			if (rc == PM_OK) {
				ok++;
				pm_model_free(&m);
			} else {
				failed++;
				if (err[0] == 0 || !is_zero(&m))
					CHECK(0, "byte %zu = 0x%02x: status %d, empty message or model left set", i,
					      values[v], rc);
			}
			free(copy);
			w.b[i] = old;
		}
	}
	CHECK(ok > 0 && failed > 0, "mutations: %d loaded, %d failed", ok, failed);
	printf("mutations: %d loaded, %d rejected\n", ok, failed);
	free(w.b);
}

static void test_api_edges(void)
{
	spec s = micro_spec();
	buf w = build(&s);
	pm_model m;
	char small[8];
	/* err NULL / errlen 0 / a short buffer: no overflow, still a status */
	CHECK(pm_model_load_mem(w.b, 3, &m, NULL, 0) == PM_ERR_FORMAT, "NULL err");
	CHECK(pm_model_load_mem(w.b, 3, &m, small, 0) == PM_ERR_FORMAT, "errlen 0");
	CHECK(pm_model_load_mem(w.b, 3, &m, small, sizeof small) == PM_ERR_FORMAT &&
		      strcmp(small, "truncat") == 0, "short err buffer: %s", small);
	CHECK(pm_model_load_mem(w.b, w.n, NULL, small, sizeof small) == PM_ERR_ARG, "NULL model");
	CHECK(pm_model_load_mem(NULL, 100, &m, small, sizeof small) == PM_ERR_FORMAT, "NULL buffer");
	CHECK(pm_model_load(NULL, &m, small, sizeof small) == PM_ERR_ARG, "NULL path");
	pm_model z;
	memset(&z, 0, sizeof z);
	pm_model_free(&z); /* safe on a zeroed model */
	pm_model_free(NULL);
	free(w.b);
}

/*
 * test_parser checks the parser alone: a GGUF file that is no model (two
 * metadata entries, one I8 tensor) parses, with its tables, offsets and
 * data located, while the model loader refuses it as a model.
 */
static void test_parser(void)
{
	buf w = {0};
	put_u32(&w, 0x46554747u);
	put_u32(&w, 3);
	put_u64(&w, 1); /* tensors */
	put_u64(&w, 2); /* metadata */
	kv_str(&w, "general.name", "not a model");
	kv_u32(&w, "general.alignment", 16);
	size_t info = w.n;
	put_str(&w, "t");
	put_u32(&w, 2);
	put_u64(&w, 3);
	put_u64(&w, 2);
	put_u32(&w, 24); /* I8 */
	put_u64(&w, 0);
	while (w.n % 16)
		put(&w, "", 1);
	size_t data = w.n;
	put(&w, "abcdef", 6);
	pm_gguf g;
	char err[256];
	int rc = pm_gguf_parse(w.b, w.n, &g, err, sizeof err);
	CHECK(rc == PM_OK, "parse: %d %s", rc, err);
	if (rc == PM_OK) {
		CHECK(g.n_kv == 2 && g.n_tensors == 1 && g.alignment == 16 && g.info_offset == info &&
			      g.data_offset == data && !g.map,
		      "n_kv %d n_tensors %d alignment %u info %llu data %llu", g.n_kv, g.n_tensors, g.alignment,
		      (unsigned long long)g.info_offset, (unsigned long long)g.data_offset);
		const pm_kv *kv = pm_gguf_find_kv(&g, "general.name");
		CHECK(kv && kv->type == PM_GGUF_STRING && kv->value_len == 8 + 11 &&
			      memcmp(kv->value + 8, "not a model", 11) == 0, "general.name");
		CHECK(!pm_gguf_find_kv(&g, "general.nam"), "a prefix of a key is not the key");
		const pm_tensor *t = &g.tensors[0];
		CHECK(t->name_len == 1 && t->name[0] == 't' && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2 &&
			      t->type == 24 && t->nbytes == 6 && t->data == w.b + data,
		      "tensor t: dims %u type %u nbytes %llu", t->n_dims, t->type, (unsigned long long)t->nbytes);
		pm_gguf_free(&g);
		CHECK(g.kv == NULL && g.tensors == NULL && g.n_kv == 0, "pm_gguf_free zeroes g");
	}
	pm_model m;
	rc = pm_model_load_mem(w.b, w.n, &m, err, sizeof err);
	CHECK(rc == PM_ERR_MODEL && strcmp(err, "missing key general.architecture") == 0, "model: %d %s", rc, err);
	/* failures leave g zeroed and nothing allocated (the leak checker runs at exit) */
	rc = pm_gguf_parse(w.b, w.n - 1, &g, err, sizeof err);
	CHECK(rc == PM_ERR_FORMAT && g.kv == NULL && g.tensors == NULL &&
		      strcmp(err, "truncated: tensor data of t ends at 150, file has 149 bytes") == 0,
	      "truncated: %d %s", rc, err);
	CHECK(pm_gguf_parse(w.b, w.n, NULL, err, sizeof err) == PM_ERR_ARG, "NULL g");
	CHECK(pm_gguf_open("/nonexistent/x.gguf", &g, err, sizeof err) == PM_ERR_IO &&
		      strcmp(err, "/nonexistent/x.gguf: No such file or directory") == 0, "open: %s", err);
	pm_gguf_free(NULL);
	free(w.b);
}

static char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(len > 0 ? (size_t)len : 1);
	if (b && len > 0 && fread(b, 1, (size_t)len, f) != (size_t)len) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*n = len > 0 ? (size_t)len : 0;
	return b;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || (n && fwrite(p, 1, n, f) != n)) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(2);
	}
	fclose(f);
}

static void test_files(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[512], path[600], err[1024], want[1024];
	snprintf(dir, sizeof dir, "%s/test_gguf.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp %s", dir);
		return;
	}
	pm_model m;

	snprintf(path, sizeof path, "%s/missing.gguf", dir);
	CHECK(pm_model_load(path, &m, err, sizeof err) == PM_ERR_IO, "missing");
	snprintf(want, sizeof want, "%s: No such file or directory", path);
	CHECK(strcmp(err, want) == 0, "missing: %s", err);

	CHECK(pm_model_load(dir, &m, err, sizeof err) == PM_ERR_IO, "directory");
	snprintf(want, sizeof want, "%s: not a regular file", dir);
	CHECK(strcmp(err, want) == 0, "directory: %s", err);

	snprintf(path, sizeof path, "%s/empty.gguf", dir);
	write_file(path, "", 0);
	CHECK(pm_model_load(path, &m, err, sizeof err) == PM_ERR_FORMAT, "empty");
	snprintf(want, sizeof want, "%s: truncated: header needs 4 bytes at offset 0, file has 0 bytes", path);
	CHECK(strcmp(err, want) == 0, "empty: %s", err);
	unlink(path);

	/* a mapped file that fails late (missing tensor) unmaps and frees */
	spec s = micro_spec();
	s.drop = 4;
	buf w = build(&s);
	snprintf(path, sizeof path, "%s/missing_tensor.gguf", dir);
	write_file(path, w.b, w.n);
	CHECK(pm_model_load(path, &m, err, sizeof err) == PM_ERR_MODEL && is_zero(&m), "missing tensor");
	snprintf(want, sizeof want, "%s: tensor blk.0.attn_v.weight: missing", path);
	CHECK(strcmp(err, want) == 0, "missing tensor: %s", err);
	free(w.b);

	/* a valid file through mmap */
	s = micro_spec();
	w = build(&s);
	write_file(path, w.b, w.n);
	int rc = pm_model_load(path, &m, err, sizeof err);
	CHECK(rc == PM_OK && m.map && m.map_len == w.n && MAT(m.layers[0].w_down)[5] == value(9, 5), "mmap: %s", err);
	if (rc == PM_OK)
		pm_model_free(&m);
	unlink(path);
	free(w.b);
	rmdir(dir);
}

/* The tiny model written by mkmodel: it loads, and its prefixes fail cleanly. */
static void test_tiny(void)
{
	const char *path = getenv("PICOMETER_TINY_MODEL");
	if (!path || !*path) {
		CHECK(0, "PICOMETER_TINY_MODEL is not set (run.sh sets it)");
		return;
	}
	pm_model m, mm;
	char err[1024];
	int rc = pm_model_load(path, &m, err, sizeof err);
	CHECK(rc == PM_OK, "%s", err);
	if (rc)
		return;
	CHECK(strcmp(m.name, "picometer-tiny") == 0 && m.dim == 64 && m.n_layers == 2 && m.n_heads == 4 &&
		      m.n_kv_heads == 2 && m.ffn_dim == 172 && m.vocab == 264 && m.ctx_len == 256 &&
		      m.bos_id == 256 && m.eos_id == 257 && m.pad_id == 258 && m.n_tokens == 264 && !m.tied_output,
	      "tiny hparams");
	CHECK(m.tok_len[65] == 6 && memcmp(m.tok_text[65], "<0x41>", 6) == 0, "byte token spelling");
	CHECK(m.tok_len[261] == 13 && memcmp(m.tok_text[261], "<|assistant|>", 13) == 0, "control token");

	size_t n;
	char *b = read_file(path, &n);
	CHECK(b != NULL && n == m.map_len, "read %s", path);
	if (b) {
		uint8_t *copy;
		rc = load_exact((const uint8_t *)b, n, &mm, &copy, err, sizeof err);
		CHECK(rc == PM_OK, "tiny from memory: %s", err);
		if (rc == PM_OK) {
			size_t embd = (size_t)m.vocab * (size_t)m.dim, down = (size_t)m.dim * (size_t)m.ffn_dim;
			CHECK(memcmp(m.tok_embd.data, mm.tok_embd.data, embd * 4) == 0 &&
				      memcmp(m.layers[1].w_down.data, mm.layers[1].w_down.data, down * 4) == 0 &&
				      memcmp(m.output.data, mm.output.data, embd * 4) == 0,
			      "mmap and memory loads differ");
			pm_model_free(&mm);
		}
		free(copy);
		/* every prefix through the metadata and tensor infos, then a stride */
		size_t meta_end = (size_t)((const uint8_t *)m.tok_embd.data - (const uint8_t *)m.map);
		int bad = 0;
		for (size_t k = 0; k < n; k += k < meta_end + 64 ? 1 : 4099) {
			rc = load_exact((const uint8_t *)b, k, &mm, &copy, err, sizeof err);
			if (rc != PM_ERR_FORMAT && bad++ < 5)
				CHECK(0, "tiny prefix %zu: %d %s", k, rc, err);
			if (rc == PM_OK)
				pm_model_free(&mm);
			free(copy);
		}
		free(b);
	}
	pm_model_free(&m);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	test_valid();
	test_features();
	test_errors();
	test_prefixes();
	test_mutations();
	test_api_edges();
	test_parser();
	test_files();
	test_tiny();
	if (fails) {
		fprintf(stderr, "test_gguf: %d failures\n", fails);
		return 1;
	}
	printf("test_gguf: ok\n");
	return 0;
}
