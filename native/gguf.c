/*
 * gguf.c: the GGUF v3 parser behind gguf.h, the project's only one.
 *
 * A GGUF file is a header (magic "GGUF", version 3, tensor count, metadata
 * count), typed metadata, tensor infos, padding to the alignment, and the
 * tensor data. This file is a parser of untrusted bytes: every count,
 * length and offset is checked against the file size before it is used,
 * with arithmetic that cannot overflow, and every failure is a status and a
 * message naming the problem. Nothing here exits, aborts or leaks. It
 * checks what the format defines (magic, version, value types, bools 0 or
 * 1, arrays nested at most 8 deep, unique keys and tensor names,
 * general.alignment a power of two, 1..4 dimensions, known tensor types,
 * offsets aligned and inside the file); model_load.c builds the model.
 * Go reads files through it too (native/gguf_cgo.go), and fuzzes it there
 * (FuzzParseGGUF, and FuzzLoad through the model loader).
 *
 * Sections: errors · reader · metadata · tensor infos · API.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
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
#define GGUF_MAX_DEPTH 8            /* arrays of arrays nest at most this deep */
#define GGUF_MAX_FILE (1ull << 62)  /* bigger sizes are refused: offsets below stay far from overflow */
#define GGUF_MIN_KV 13              /* empty key (8) + type (4) + one-byte value */
#define GGUF_MIN_TENSOR_INFO 32     /* empty name (8) + n_dims (4) + one dim (8) + type (4) + offset (8) */

/* ------------------------------------------------------------------ errors */

typedef struct {
	const uint8_t *p; /* the file */
	uint64_t len;
	uint64_t pos; /* read cursor */
	pm_errbuf e;
} rd;

static int vfail(const pm_errbuf *e, int status, const char *fmt, va_list ap)
{
	if (!e->err || e->errlen == 0)
		return status;
	size_t n = 0;
	if (e->path) {
		int k = snprintf(e->err, e->errlen, "%s: ", e->path);
		n = k < 0 ? 0 : (size_t)k;
		if (n >= e->errlen)
			return status;
	}
	vsnprintf(e->err + n, e->errlen - n, fmt, ap);
	return status;
}

int pm_fail(const pm_errbuf *e, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(e, status, fmt, ap);
	va_end(ap);
	return status;
}

/* fail writes "<path>: <message>" into r's error buffer and returns status. */
__attribute__((format(printf, 3, 4))) static int fail(rd *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(&r->e, status, fmt, ap);
	va_end(ap);
	return status;
}

/* (gguf/'s Go code quotes names the same way.) */
const char *pm_printable(char *dst, const uint8_t *s, uint64_t n)
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
#define printable pm_printable
#define PRINTABLE_MAX PM_PRINTABLE_MAX
#define value_type_name pm_value_type_name
#define ggml_type_name pm_ggml_type_name
#define name_eq pm_name_eq

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

/* ---------------------------------------------------------------- metadata */

static const char *const value_type_names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32",
	"float32", "bool", "string", "array", "uint64", "int64", "float64"};

const char *pm_value_type_name(uint32_t t, char buf[24])
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

int pm_name_eq(const uint8_t *s, uint64_t n, const char *z)
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

static int parse_metadata(rd *r, pm_gguf *g, uint64_t n_kv)
{
	int rc;
	pm_kv *kv = NULL;
	if (n_kv) { /* n_kv <= file size / 13: no overflow */
		kv = calloc((size_t)n_kv, sizeof *kv);
		if (!kv)
			return fail(r, PM_ERR_NOMEM, "metadata table: out of memory for %llu entries",
				    (unsigned long long)n_kv);
	}
	g->kv = kv;
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
	g->n_kv = (int)n_kv; /* the caller bounds n_kv by INT32_MAX */

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

const char *pm_ggml_type_name(uint32_t t, char buf[24])
{
	if (t < N_GGML_TYPES && ggml_types[t].name)
		return ggml_types[t].name;
	snprintf(buf, 24, "type(%u)", t);
	return buf;
}

static int parse_pm_tensor(rd *r, uint64_t i, uint64_t align, pm_tensor *t)
{
	char what[96], pb[PRINTABLE_MAX], tb[24];
	int rc;
	snprintf(what, sizeof what, "tensor info #%llu", (unsigned long long)i);
	if ((rc = rd_str(r, &t->name, &t->name_len, what)))
		return rc;
	snprintf(what, sizeof what, "tensor %s", printable(pb, t->name, t->name_len));
	if ((rc = rd_u32(r, &t->n_dims, what)))
		return rc;
	if (t->n_dims < 1 || t->n_dims > PM_GGUF_MAX_DIMS)
		return fail(r, PM_ERR_FORMAT, "%s: %u dimensions (want 1..%d)", what, t->n_dims, PM_GGUF_MAX_DIMS);
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
static int parse_tensors(rd *r, pm_gguf *g, uint64_t n, uint64_t align, pm_tensor *ti)
{
	int rc;
	char pb[PRINTABLE_MAX];
	for (uint64_t i = 0; i < n; i++)
		if ((rc = parse_pm_tensor(r, i, align, &ti[i])))
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
	g->data_offset = data;
	for (uint64_t i = 0; i < n; i++) {
		pm_tensor *t = &ti[i];
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

/* --------------------------------------------------------------------- API */

/* parse reads r's bytes into g (already zeroed); on failure the caller frees g. */
static int parse(rd *r, pm_gguf *g)
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

	if ((rc = parse_metadata(r, g, n_kv)))
		return rc;
	uint64_t align = GGUF_DEFAULT_ALIGNMENT;
	const pm_kv *a = pm_gguf_find_kv(g, "general.alignment");
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
	g->alignment = (uint32_t)align;

	if (n_tensors) {
		g->tensors = calloc((size_t)n_tensors, sizeof *g->tensors);
		if (!g->tensors)
			return fail(r, PM_ERR_NOMEM, "out of memory for %llu tensor infos", (unsigned long long)n_tensors);
	}
	g->info_offset = r->pos;
	if ((rc = parse_tensors(r, g, n_tensors, align, g->tensors)))
		return rc;
	g->n_tensors = (int)n_tensors;
	return PM_OK;
}

static int parse_rd(rd *r, pm_gguf *g)
{
	int rc = parse(r, g);
	if (rc)
		pm_gguf_free(g);
	return rc;
}

int pm_gguf_parse(const void *buf, size_t len, pm_gguf *g, char *err, size_t errlen)
{
	static const uint8_t empty[1];
	rd r = {.p = buf ? buf : empty, .len = buf ? len : 0, .e = {.err = err, .errlen = errlen}};
	if (err && errlen)
		err[0] = 0;
	if (!g)
		return fail(&r, PM_ERR_ARG, "pm_gguf_parse: g is NULL");
	memset(g, 0, sizeof *g);
	return parse_rd(&r, g);
}

int pm_gguf_open(const char *path, pm_gguf *g, char *err, size_t errlen)
{
	static const uint8_t empty[1];
	rd r = {.p = empty, .e = {.path = path, .err = err, .errlen = errlen}};
	if (err && errlen)
		err[0] = 0;
	if (!path || !g) {
		r.e.path = NULL;
		return fail(&r, PM_ERR_ARG, "pm_gguf_open: %s is NULL", path ? "g" : "path");
	}
	memset(g, 0, sizeof *g);
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
		g->map = p;
		g->map_len = (size_t)st.st_size;
		r.p = p;
		r.len = (uint64_t)st.st_size;
	}
	close(fd);
	return parse_rd(&r, g);
}

void pm_gguf_free(pm_gguf *g)
{
	if (!g)
		return;
	free(g->kv);
	free(g->tensors);
	if (g->map)
		munmap(g->map, g->map_len);
	memset(g, 0, sizeof *g);
}

const pm_kv *pm_gguf_find_kv(const pm_gguf *g, const char *key)
{
	for (int i = 0; i < g->n_kv; i++)
		if (name_eq((const uint8_t *)g->kv[i].key, g->kv[i].key_len, key))
			return &g->kv[i];
	return NULL;
}
