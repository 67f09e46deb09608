/*
 * gguf.h: the project's one GGUF parser (gguf.c). It parses the format
 * only: header, typed metadata, tensor infos and where each tensor's data
 * lies. Whether the tensors make a model is model_load.c's business; Go
 * reads any GGUF file through it (native.ParseGGUF, native.ReadGGUF), so
 * there is no second parser to keep in step.
 *
 * Every count, length and offset is checked against the buffer's size
 * before use; any bytes are safe input, and a failure is a status
 * (model.h) and a message naming the problem.
 */
#ifndef PM_GGUF_H
#define PM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define PM_GGUF_MAX_DIMS 4

/* One tensor info, with its data located in the buffer. */
typedef struct {
	const uint8_t *name; /* not NUL-terminated */
	uint64_t name_len;
	uint32_t n_dims;                 /* 1..PM_GGUF_MAX_DIMS */
	uint64_t ne[PM_GGUF_MAX_DIMS];   /* innermost first; unused dims are 0 */
	uint32_t type;                   /* ggml type (PM_TYPE_* for the computable ones) */
	uint64_t offset;                 /* from the start of the data section */
	uint64_t nbytes;                 /* the data's size, from type and shape */
	const uint8_t *data;             /* into the buffer */
} pm_tensor;

/* A parsed file. kv and tensors are owned (pm_gguf_free); the names,
 * values and data they point at are the caller's buffer, or the mapping
 * when pm_gguf_open made one. */
typedef struct {
	uint32_t alignment;   /* general.alignment (default 32) */
	uint64_t info_offset; /* of the first tensor info */
	uint64_t data_offset; /* of the tensor data section */
	int n_kv;
	pm_kv *kv; /* [n_kv] in file order (pm_kv: model.h) */
	int n_tensors;
	pm_tensor *tensors; /* [n_tensors] in file order */
	void *map;          /* the file's mapping (pm_gguf_open), else NULL */
	size_t map_len;
} pm_gguf;

/*
 * pm_gguf_parse parses len bytes at buf (which must outlive g) into g.
 * On failure it returns a status, writes a message into err (at most
 * errlen bytes, NUL-terminated) and leaves g zeroed.
 */
int pm_gguf_parse(const void *buf, size_t len, pm_gguf *g, char *err, size_t errlen);

/* pm_gguf_open maps the file at path read-only and parses it; messages
 * are "<path>: <problem>". The file must not be truncated while g lives. */
int pm_gguf_open(const char *path, pm_gguf *g, char *err, size_t errlen);

/* pm_gguf_free releases g's tables and mapping; safe on a zeroed g. */
void pm_gguf_free(pm_gguf *g);

/* pm_gguf_find_kv returns the entry named key, or NULL. */
const pm_kv *pm_gguf_find_kv(const pm_gguf *g, const char *key);

/* ---- shared with model_load.c (not an API for Go or the engine) ---- */

/* pm_errbuf is where a message goes: "<path>: <message>" when path is set. */
typedef struct {
	const char *path;
	char *err;
	size_t errlen;
} pm_errbuf;

/* pm_fail writes the message into e and returns status. */
int pm_fail(const pm_errbuf *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* pm_printable copies at most 64 bytes of a name from the file into dst,
 * bytes outside printable ASCII as '?', a cut marked "..."; dst holds
 * PM_PRINTABLE_MAX bytes. */
#define PM_PRINTABLE_MAX (64 + 4)
const char *pm_printable(char *dst, const uint8_t *s, uint64_t n);

/* pm_name_eq reports whether the n bytes at s are the string z. */
int pm_name_eq(const uint8_t *s, uint64_t n, const char *z);

/* Names of GGUF value types and ggml tensor types ("type(N)" in buf when unknown). */
const char *pm_value_type_name(uint32_t t, char buf[24]);
const char *pm_ggml_type_name(uint32_t t, char buf[24]);

#endif
