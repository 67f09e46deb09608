/*
 * gguf.c: the GGUF v3 model loader behind model.h.
 *
 * A GGUF file is a header (magic "GGUF", version 3, tensor count, metadata
 * count), typed metadata, tensor infos, padding to the alignment, and the
 * tensor data. This file is a parser of untrusted bytes: every count,
 * length and offset is checked against the file size before it is used,
 * with arithmetic that cannot overflow, and every failure is a status and a
 * message naming the problem. Nothing here exits, aborts or leaks.
 *
 * What the loader accepts beyond the format: general.architecture "llama",
 * "qwen2" or "qwen3" (arch.h), the hyperparameters model.h lists under that
 * architecture's key prefix (checked for range and consistency), RoPE
 * scaling "none" or "linear" and an optional rope_freqs tensor, weights of
 * exactly the expected shapes, with the biases and q/k norms the
 * architecture has, matrices in any type weights.h lists (used in place)
 * and 1-D tensors in F32, F16 or BF16 (tensors it does not use are
 * validated as GGUF, then ignored), and optionally tokenizer.ggml.tokens /
 * *_token_id / tokenizer.chat_template.
 *
 * Sections: errors · reader · owned memory · metadata · tensor infos ·
 * Llama model · API.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "model.h"

#include "arch.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian GGUF files on little-endian hosts only"
#endif

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian uint32 */
#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_DEPTH 8            /* arrays of arrays nest at most this deep */
#define GGUF_MAX_FILE (1ull << 62)  /* bigger sizes are refused: offsets below stay far from overflow */
#define GGUF_MIN_KV 13              /* empty key (8) + type (4) + one-byte value */
#define GGUF_MIN_TENSOR_INFO 32     /* empty name (8) + n_dims (4) + one dim (8) + type (4) + offset (8) */
#define PM_MAX_VOCAB (1 << 24)

/* ------------------------------------------------------------------ errors */

typedef struct {
	const uint8_t *p; /* the file */
	uint64_t len;
	uint64_t pos;      /* read cursor */
	const char *path;  /* message prefix, or NULL */
	char *err;
	size_t errlen;
} rd;

/* fail writes "<path>: <message>" into r->err and returns status. */
static int fail(rd *r, int status, const char *fmt, ...)
{
	if (!r->err || r->errlen == 0)
		return status;
	size_t n = 0;
	if (r->path) {
		int k = snprintf(r->err, r->errlen, "%s: ", r->path);
		n = k < 0 ? 0 : (size_t)k;
		if (n >= r->errlen)
			return status;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err + n, r->errlen - n, fmt, ap);
	va_end(ap);
	return status;
}

/*
 * printable copies at most 64 bytes of a name from the file into dst,
 * replacing bytes outside printable ASCII with '?' and marking a cut with
 * "..."; dst must hold PRINTABLE_MAX bytes. (The Go reader does the same.)
 */
#define PRINTABLE_MAX (64 + 4)
static const char *printable(char *dst, const uint8_t *s, uint64_t n)
{
	uint64_t k = n > 64 ? 64 : n, i;
	for (i = 0; i < k; i++)
		dst[i] = (s[i] < 0x20 || s[i] > 0x7e) ? '?' : (char)s[i];
	if (n > 64)
		memcpy(dst + i, "...", 4);
	else
		dst[i] = 0;
	return dst;
}

/* ------------------------------------------------------------------ reader */

/* need fails unless n more bytes follow the cursor. */
static int need(rd *r, uint64_t n, const char *what)
{
	if (n > r->len - r->pos)
		return fail(r, PM_ERR_FORMAT, "truncated: %s needs %llu bytes at offset %llu, file has %llu bytes",
			    what, (unsigned long long)n, (unsigned long long)r->pos, (unsigned long long)r->len);
	return PM_OK;
}

static int rd_u32(rd *r, uint32_t *v, const char *what)
{
	int rc = need(r, 4, what);
	if (rc)
		return rc;
	memcpy(v, r->p + r->pos, 4);
	r->pos += 4;
	return PM_OK;
}

static int rd_u64(rd *r, uint64_t *v, const char *what)
{
	int rc = need(r, 8, what);
	if (rc)
		return rc;
	memcpy(v, r->p + r->pos, 8);
	r->pos += 8;
	return PM_OK;
}

/* rd_str reads a GGUF string (uint64 length + bytes) as a pointer into the file. */
static int rd_str(rd *r, const uint8_t **s, uint64_t *n, const char *what)
{
	int rc = rd_u64(r, n, what);
	if (rc || (rc = need(r, *n, what)))
		return rc;
	*s = r->p + r->pos;
	r->pos += *n;
	return PM_OK;
}

/* ----------------------------------------------------------- owned memory */

/*
 * Everything the loader allocates for a model (metadata table, token
 * tables, F16 conversions, misaligned copies) is a block on one list
 * hanging from m->owned; pm_model_free walks it.
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

static const char *const value_type_names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32",
	"float32", "bool", "string", "array", "uint64", "int64", "float64"};

static const char *value_type_name(uint32_t t, char buf[24])
{
	if (t < sizeof value_type_names / sizeof value_type_names[0])
		return value_type_names[t];
	snprintf(buf, 24, "type(%u)", t);
	return buf;
}

/* scalar_size is the encoded size of a fixed-size type, 0 for string and array, -1 if unknown. */
static int scalar_size(uint32_t t)
{
	switch (t) {
	case PM_GGUF_UINT8: case PM_GGUF_INT8: case PM_GGUF_BOOL: return 1;
	case PM_GGUF_UINT16: case PM_GGUF_INT16: return 2;
	case PM_GGUF_UINT32: case PM_GGUF_INT32: case PM_GGUF_FLOAT32: return 4;
	case PM_GGUF_UINT64: case PM_GGUF_INT64: case PM_GGUF_FLOAT64: return 8;
	case PM_GGUF_STRING: case PM_GGUF_ARRAY: return 0;
	}
	return -1;
}

/* min_size is the fewest bytes one value of type t occupies. */
static int min_size(uint32_t t)
{
	return t == PM_GGUF_STRING ? 8 : t == PM_GGUF_ARRAY ? 12 : scalar_size(t);
}

static int skip_array(rd *r, int depth, const char *what);

/* skip_value moves the cursor past one value of type t. */
static int skip_value(rd *r, uint32_t t, int depth, const char *what)
{
	const uint8_t *s;
	uint64_t n;
	if (t == PM_GGUF_STRING)
		return rd_str(r, &s, &n, what);
	if (t == PM_GGUF_ARRAY)
		return skip_array(r, depth + 1, what);
	int size = scalar_size(t);
	if (size <= 0)
		return fail(r, PM_ERR_FORMAT, "%s: unknown value type %u", what, t);
	int rc = need(r, (uint64_t)size, what);
	if (rc)
		return rc;
	if (t == PM_GGUF_BOOL && r->p[r->pos] > 1)
		return fail(r, PM_ERR_FORMAT, "%s: bool value %u (want 0 or 1)", what, r->p[r->pos]);
	r->pos += (uint64_t)size;
	return PM_OK;
}

/* skip_array moves past an array (element type, count, elements); depth counts arrays. */
static int skip_array(rd *r, int depth, const char *what)
{
	uint32_t et;
	uint64_t n;
	int rc;
	char tb[24];
	if (depth > GGUF_MAX_DEPTH)
		return fail(r, PM_ERR_FORMAT, "%s: arrays nested deeper than %d", what, GGUF_MAX_DEPTH);
	if ((rc = rd_u32(r, &et, what)) || (rc = rd_u64(r, &n, what)))
		return rc;
	int m = min_size(et);
	if (m < 0)
		return fail(r, PM_ERR_FORMAT, "%s: unknown array element type %u", what, et);
	if (n > (r->len - r->pos) / (uint64_t)m)
		return fail(r, PM_ERR_FORMAT, "truncated: %s: array of %llu %s at offset %llu does not fit in a %llu-byte file",
			    what, (unsigned long long)n, value_type_name(et, tb), (unsigned long long)r->pos,
			    (unsigned long long)r->len);
	if (et != PM_GGUF_STRING && et != PM_GGUF_ARRAY) {
		if (et == PM_GGUF_BOOL)
			for (uint64_t i = 0; i < n; i++)
				if (r->p[r->pos + i] > 1)
					return fail(r, PM_ERR_FORMAT, "%s: bool value %u (want 0 or 1)", what,
						    r->p[r->pos + i]);
		r->pos += n * (uint64_t)m; /* fits: checked just above */
		return PM_OK;
	}
	for (uint64_t i = 0; i < n; i++)
		if ((rc = skip_value(r, et, depth, what)))
			return rc;
	return PM_OK;
}

/* A (pointer, length) name, for sorting keys and tensor names. */
typedef struct {
	const uint8_t *s;
	uint64_t n;
} name_ref;

static int name_cmp(const void *a, const void *b)
{
	const name_ref *x = a, *y = b;
	uint64_t n = x->n < y->n ? x->n : y->n;
	int c = n ? memcmp(x->s, y->s, (size_t)n) : 0;
	if (c)
		return c;
	return x->n < y->n ? -1 : x->n > y->n;
}

static int name_eq(const uint8_t *s, uint64_t n, const char *z)
{
	size_t k = strlen(z);
	return n == k && memcmp(s, z, k) == 0;
}

/*
 * find_dup sorts a copy of names; if a name occurs twice it stores it in
 * *dup and sets *found. Returns a status (only allocation can fail).
 */
static int find_dup(rd *r, const name_ref *names, uint64_t n, name_ref *dup, int *found)
{
	*found = 0;
	if (n < 2)
		return PM_OK;
	name_ref *s = malloc((size_t)n * sizeof *s); /* n <= file size / 13: no overflow */
	if (!s)
		return fail(r, PM_ERR_NOMEM, "out of memory sorting %llu names", (unsigned long long)n);
	memcpy(s, names, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, name_cmp);
	for (uint64_t i = 1; i < n; i++)
		if (name_cmp(&s[i - 1], &s[i]) == 0) {
			*dup = s[i];
			*found = 1;
			break;
		}
	free(s);
	return PM_OK;
}

static int parse_metadata(rd *r, pm_model *m, uint64_t n_kv)
{
	int rc;
	pm_kv *kv = NULL;
	if (n_kv) {
		kv = own_alloc(m, r, sizeof *kv, n_kv, "metadata table");
		if (!kv)
			return PM_ERR_NOMEM;
	}
	for (uint64_t i = 0; i < n_kv; i++) {
		char what[96], pb[PRINTABLE_MAX];
		const uint8_t *key;
		uint64_t key_len;
		snprintf(what, sizeof what, "metadata key #%llu", (unsigned long long)i);
		if ((rc = rd_str(r, &key, &key_len, what)))
			return rc;
		snprintf(what, sizeof what, "metadata %s", printable(pb, key, key_len));
		uint32_t t;
		if ((rc = rd_u32(r, &t, what)))
			return rc;
		uint64_t start = r->pos;
		if ((rc = skip_value(r, t, 0, what)))
			return rc;
		kv[i] = (pm_kv){.key = (const char *)key, .key_len = key_len, .type = t,
				.value = r->p + start, .value_len = r->pos - start};
	}
	m->kv = kv;
	m->n_kv = (int)n_kv; /* the caller bounds n_kv by INT32_MAX */

	name_ref *names = n_kv ? malloc((size_t)n_kv * sizeof *names) : NULL;
	if (n_kv && !names)
		return fail(r, PM_ERR_NOMEM, "out of memory checking %llu metadata keys", (unsigned long long)n_kv);
	for (uint64_t i = 0; i < n_kv; i++)
		names[i] = (name_ref){(const uint8_t *)kv[i].key, kv[i].key_len};
	name_ref dup;
	int found;
	rc = find_dup(r, names, n_kv, &dup, &found);
	free(names);
	if (rc)
		return rc;
	if (found) {
		char pb[PRINTABLE_MAX];
		return fail(r, PM_ERR_FORMAT, "duplicate metadata %s", printable(pb, dup.s, dup.n));
	}
	return PM_OK;
}

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

/* ------------------------------------------------------------ tensor infos */


/* ggml's tensor types: name, block size (elements), block bytes (as gguf-py's GGML_QUANT_SIZES). */
static const struct {
	const char *name;
	uint32_t block, bytes;
} ggml_types[] = {
	[0] = {"f32", 1, 4}, [1] = {"f16", 1, 2}, [2] = {"q4_0", 32, 18}, [3] = {"q4_1", 32, 20},
	[6] = {"q5_0", 32, 22}, [7] = {"q5_1", 32, 24}, [8] = {"q8_0", 32, 34}, [9] = {"q8_1", 32, 40},
	[10] = {"q2_K", 256, 84}, [11] = {"q3_K", 256, 110}, [12] = {"q4_K", 256, 144},
	[13] = {"q5_K", 256, 176}, [14] = {"q6_K", 256, 210}, [15] = {"q8_K", 256, 292},
	[16] = {"iq2_xxs", 256, 66}, [17] = {"iq2_xs", 256, 74}, [18] = {"iq3_xxs", 256, 98},
	[19] = {"iq1_s", 256, 50}, [20] = {"iq4_nl", 32, 18}, [21] = {"iq3_s", 256, 110},
	[22] = {"iq2_s", 256, 82}, [23] = {"iq4_xs", 256, 136}, [24] = {"i8", 1, 1}, [25] = {"i16", 1, 2},
	[26] = {"i32", 1, 4}, [27] = {"i64", 1, 8}, [28] = {"f64", 1, 8}, [29] = {"iq1_m", 256, 56},
	[30] = {"bf16", 1, 2}, [34] = {"tq1_0", 256, 54}, [35] = {"tq2_0", 256, 66}, [39] = {"mxfp4", 32, 17},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

static const char *ggml_type_name(uint32_t t, char buf[24])
{
	if (t < N_GGML_TYPES && ggml_types[t].name)
		return ggml_types[t].name;
	snprintf(buf, 24, "type(%u)", t);
	return buf;
}

typedef struct {
	const uint8_t *name;
	uint64_t name_len;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS];
	uint32_t type;
	uint64_t offset; /* from the start of the data section */
	uint64_t nbytes;
	const uint8_t *data;
} tensor_info;

static int parse_tensor_info(rd *r, uint64_t i, uint64_t align, tensor_info *t)
{
	char what[96], pb[PRINTABLE_MAX], tb[24];
	int rc;
	snprintf(what, sizeof what, "tensor info #%llu", (unsigned long long)i);
	if ((rc = rd_str(r, &t->name, &t->name_len, what)))
		return rc;
	snprintf(what, sizeof what, "tensor %s", printable(pb, t->name, t->name_len));
	if ((rc = rd_u32(r, &t->n_dims, what)))
		return rc;
	if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
		return fail(r, PM_ERR_FORMAT, "%s: %u dimensions (want 1..%d)", what, t->n_dims, GGUF_MAX_DIMS);
	for (uint32_t j = 0; j < t->n_dims; j++)
		if ((rc = rd_u64(r, &t->ne[j], what)))
			return rc;
	if ((rc = rd_u32(r, &t->type, what)) || (rc = rd_u64(r, &t->offset, what)))
		return rc;

	if (t->type >= N_GGML_TYPES || !ggml_types[t->type].name)
		return fail(r, PM_ERR_FORMAT, "%s: unknown type %u", what, t->type);
	uint64_t n = 1;
	for (uint32_t j = 0; j < t->n_dims; j++) {
		uint64_t d = t->ne[j];
		if (d > (uint64_t)INT64_MAX || (d != 0 && n > (uint64_t)INT64_MAX / d))
			return fail(r, PM_ERR_FORMAT, "%s: element count overflows", what);
		n *= d;
	}
	uint64_t block = ggml_types[t->type].block, bytes = ggml_types[t->type].bytes;
	if (t->ne[0] % block != 0)
		return fail(r, PM_ERR_FORMAT, "%s: dims[0] %llu is not a multiple of the %s block size %llu", what,
			    (unsigned long long)t->ne[0], ggml_type_name(t->type, tb), (unsigned long long)block);
	if (n / block > (uint64_t)INT64_MAX / bytes)
		return fail(r, PM_ERR_FORMAT, "%s: byte size overflows", what);
	t->nbytes = n / block * bytes;
	if (t->offset % align != 0)
		return fail(r, PM_ERR_FORMAT, "%s: offset %llu is not a multiple of the alignment %llu", what,
			    (unsigned long long)t->offset, (unsigned long long)align);
	return PM_OK;
}

/* parse_tensors reads the infos, locates every tensor's data and checks it lies in the file. */
static int parse_tensors(rd *r, uint64_t n, uint64_t align, tensor_info *ti)
{
	int rc;
	char pb[PRINTABLE_MAX];
	for (uint64_t i = 0; i < n; i++)
		if ((rc = parse_tensor_info(r, i, align, &ti[i])))
			return rc;

	name_ref *names = n ? malloc((size_t)n * sizeof *names) : NULL;
	if (n && !names)
		return fail(r, PM_ERR_NOMEM, "out of memory checking %llu tensor names", (unsigned long long)n);
	for (uint64_t i = 0; i < n; i++)
		names[i] = (name_ref){ti[i].name, ti[i].name_len};
	name_ref dup;
	int found;
	rc = find_dup(r, names, n, &dup, &found);
	free(names);
	if (rc)
		return rc;
	if (found)
		return fail(r, PM_ERR_FORMAT, "duplicate tensor %s", printable(pb, dup.s, dup.n));

	/* r->pos <= len < 2^62 and align <= 2^31: no overflow below. */
	uint64_t data = (r->pos + align - 1) / align * align;
	for (uint64_t i = 0; i < n; i++) {
		tensor_info *t = &ti[i];
		printable(pb, t->name, t->name_len);
		if (t->offset > r->len)
			return fail(r, PM_ERR_FORMAT, "tensor %s: offset %llu is beyond the end of the file (%llu bytes)",
				    pb, (unsigned long long)t->offset, (unsigned long long)r->len);
		uint64_t start = data + t->offset; /* < 2^63 */
		if (start > r->len || t->nbytes > r->len - start)
			return fail(r, PM_ERR_FORMAT, "truncated: tensor data of %s ends at %llu, file has %llu bytes",
				    pb, (unsigned long long)(start + t->nbytes), (unsigned long long)r->len);
		t->data = r->p + start;
	}
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

/* load parses r's bytes into m (already zeroed); on failure the caller frees m. */
static int load(rd *r, pm_model *m)
{
	uint32_t magic, version;
	uint64_t n_tensors, n_kv;
	int rc;
	if (r->len > GGUF_MAX_FILE)
		return fail(r, PM_ERR_FORMAT, "file of %llu bytes is too large", (unsigned long long)r->len);
	if ((rc = rd_u32(r, &magic, "header")))
		return rc;
	if (magic != GGUF_MAGIC)
		return fail(r, PM_ERR_FORMAT, "bad magic 0x%08x, not a GGUF file", magic);
	if ((rc = rd_u32(r, &version, "header")))
		return rc;
	if (version != GGUF_VERSION)
		return fail(r, PM_ERR_FORMAT, "unsupported GGUF version %u", version);
	if ((rc = rd_u64(r, &n_tensors, "header")) || (rc = rd_u64(r, &n_kv, "header")))
		return rc;
	uint64_t rest = r->len - r->pos;
	if (n_tensors > rest / GGUF_MIN_TENSOR_INFO)
		return fail(r, PM_ERR_FORMAT, "tensor count %llu is more than a %llu-byte file can hold",
			    (unsigned long long)n_tensors, (unsigned long long)r->len);
	if (n_kv > rest / GGUF_MIN_KV)
		return fail(r, PM_ERR_FORMAT, "metadata count %llu is more than a %llu-byte file can hold",
			    (unsigned long long)n_kv, (unsigned long long)r->len);
	if (n_kv > INT32_MAX || n_tensors > INT32_MAX)
		return fail(r, PM_ERR_FORMAT, "more than %d metadata entries or tensors", INT32_MAX);

	if ((rc = parse_metadata(r, m, n_kv)))
		return rc;
	uint64_t align = GGUF_DEFAULT_ALIGNMENT;
	const pm_kv *a = find_kv(m, "general.alignment");
	if (a) {
		char tb[24];
		uint32_t v;
		if (a->type != PM_GGUF_UINT32)
			return fail(r, PM_ERR_FORMAT, "general.alignment: type %s, want uint32",
				    value_type_name(a->type, tb));
		memcpy(&v, a->value, 4);
		if (v == 0 || (v & (v - 1)) != 0)
			return fail(r, PM_ERR_FORMAT, "general.alignment: %u is not a power of two", v);
		align = v;
	}
	m->alignment = (uint32_t)align;

	tensor_info *ti = NULL;
	if (n_tensors) {
		ti = calloc((size_t)n_tensors, sizeof *ti);
		if (!ti)
			return fail(r, PM_ERR_NOMEM, "out of memory for %llu tensor infos", (unsigned long long)n_tensors);
	}
	rc = parse_tensors(r, n_tensors, align, ti);
	if (!rc) {
		m->n_file_tensors = (int)n_tensors;
		rc = build_llama(r, m, ti, n_tensors);
	}
	free(ti);
	return rc;
}

int pm_model_load_mem(const void *buf, size_t len, pm_model *m, char *err, size_t errlen)
{
	static const uint8_t empty[1];
	rd r = {.p = buf ? buf : empty, .len = buf ? len : 0, .err = err, .errlen = errlen};
	if (err && errlen)
		err[0] = 0;
	if (!m)
		return fail(&r, PM_ERR_ARG, "pm_model_load_mem: model is NULL");
	memset(m, 0, sizeof *m);
	int rc = load(&r, m);
	if (rc) {
		pm_model_free(m);
		return rc;
	}
	return PM_OK;
}

int pm_model_load(const char *path, pm_model *m, char *err, size_t errlen)
{
	static const uint8_t empty[1];
	rd r = {.p = empty, .path = path, .err = err, .errlen = errlen};
	if (err && errlen)
		err[0] = 0;
	if (!path || !m) {
		r.path = NULL;
		return fail(&r, PM_ERR_ARG, "pm_model_load: %s is NULL", path ? "model" : "path");
	}
	memset(m, 0, sizeof *m);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(&r, PM_ERR_IO, "%s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return fail(&r, PM_ERR_IO, "stat: %s", strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return fail(&r, PM_ERR_IO, "not a regular file");
	}
	if (st.st_size > 0) {
		if ((uint64_t)st.st_size > GGUF_MAX_FILE || (uint64_t)st.st_size > SIZE_MAX) {
			close(fd);
			return fail(&r, PM_ERR_FORMAT, "file of %llu bytes is too large", (unsigned long long)st.st_size);
		}
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			int e = errno;
			close(fd);
			return fail(&r, PM_ERR_IO, "mmap: %s", strerror(e));
		}
		m->map = p;
		m->map_len = (size_t)st.st_size;
		r.p = p;
		r.len = (uint64_t)st.st_size;
	}
	close(fd);
	int rc = load(&r, m);
	if (rc) {
		pm_model_free(m);
		return rc;
	}
	return PM_OK;
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
	if (m->map)
		munmap(m->map, m->map_len);
	memset(m, 0, sizeof *m);
}
