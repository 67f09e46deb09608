/*
 * weights.h: a weight matrix as the engine computes with it: a typed view
 * of the bytes in the mapped GGUF file (no copy, no conversion), and the
 * per-type row dequantizers the kernels use.
 *
 * Types are ggml's (enum ggml_type numbers). The block layouts are written
 * out beside their dequantizers: quant_float.c (F32, F16, BF16),
 * quant_32.c (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and quant_k.c (Q4_K, Q5_K,
 * Q6_K). Each computes an element with the same float32 operations as the
 * Go codecs (native/gguf/quant*.go), so the engine, the Go reference and
 * the quantizer all see the same weights.
 */
#ifndef PM_WEIGHTS_H
#define PM_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

enum {
	PM_TYPE_F32 = 0,
	PM_TYPE_F16 = 1,
	PM_TYPE_Q4_0 = 2,
	PM_TYPE_Q4_1 = 3,
	PM_TYPE_Q5_0 = 6,
	PM_TYPE_Q5_1 = 7,
	PM_TYPE_Q8_0 = 8,
	PM_TYPE_Q4_K = 12,
	PM_TYPE_Q5_K = 13,
	PM_TYPE_Q6_K = 14,
	PM_TYPE_BF16 = 30,
	PM_TYPE_COUNT = 40 /* bound of the tables indexed by type */
};

/* How a matrix's elements lie (pm_weight.layout). */
enum {
	PM_LAYOUT_ROWS = 0,   /* row-major, as the file stores them */
	PM_LAYOUT_PANEL8 = 1, /* F16 only: panels of 8 rows, the rows in the lanes
			       * (mm_f16_panel.h; an engine's copy, never the file's) */
	PM_LAYOUT_KX8 = 2,    /* Q4_K, Q6_K: tiles of 8 rows, each super-block's blocks
			       * transposed in words (kx8.h; an engine's copy too) */
	PM_LAYOUT_Q32X8 = 3,  /* Q4_0 (AVX2 engines): tiles of 8 rows, codes transposed in
			       * words, scales apart (q32x8.h; an engine's copy too) */
};

/*
 * pm_weight is a matrix [rows][cols] of one type. In rows (the loader's
 * layout) row r is row_bytes bytes at data + r * row_bytes. data points
 * into the file mapping (or, for an F32 tensor the file left misaligned, a
 * loader copy).
 */
typedef struct {
	const void *data;
	uint32_t type;    /* PM_TYPE_* */
	int32_t rows, cols;
	size_t row_bytes; /* pm_type_row_bytes(type, cols) */
	uint32_t layout;  /* PM_LAYOUT_*: the zero of an initializer is rows */
	uint32_t far;     /* nonzero: the engine's weights do not fit the last-level
			   * cache, so decode streams this matrix from memory (its
			   * kernels prefetch into L2; panels.c sets it) */
} pm_weight;

/* pm_weight_row returns the bytes of row r (PM_LAYOUT_ROWS; in panels,
 * of panel r / 8 when r is a multiple of 8). */
static inline const void *pm_weight_row(const pm_weight *w, int r)
{
	return (const uint8_t *)w->data + (size_t)r * w->row_bytes;
}

/*
 * pm_type_row_bytes returns the bytes of a row of cols elements of type,
 * or 0 when the engine cannot compute with type or cols is not a whole
 * number of its blocks.
 */
size_t pm_type_row_bytes(uint32_t type, int64_t cols);

/* pm_type_block returns the elements per block of a supported type, else 0. */
int pm_type_block(uint32_t type);

/* pm_dequant_fn writes the cols elements of one row as float32. */
typedef void (*pm_dequant_fn)(float *out, const void *row, int cols);

/*
 * pm_dequant returns the row dequantizer of type for the kernel set:
 * avx2 != 0 picks the AVX2 (+F16C) one where there is one. NULL for a type
 * the engine cannot compute with. Defined in matmul.c, which chooses the
 * kernel of each type; declared here, beside the types, for the loader.
 */
pm_dequant_fn pm_dequant(uint32_t type, int avx2);

/* The dequantizers, per family (quant_*.c); *_avx2 exist on x86-64 only. */
void pm_dq_f32(float *out, const void *row, int cols);
void pm_dq_f16(float *out, const void *row, int cols);
void pm_dq_bf16(float *out, const void *row, int cols);
void pm_dq_q4_0(float *out, const void *row, int cols);
void pm_dq_q4_1(float *out, const void *row, int cols);
void pm_dq_q5_0(float *out, const void *row, int cols);
void pm_dq_q5_1(float *out, const void *row, int cols);
void pm_dq_q8_0(float *out, const void *row, int cols);
void pm_dq_q4_k(float *out, const void *row, int cols);
void pm_dq_q5_k(float *out, const void *row, int cols);
void pm_dq_q6_k(float *out, const void *row, int cols);
#if defined(__x86_64__) && defined(__GNUC__)
#define PM_HAVE_AVX2_DQ 1
void pm_dq_f16_avx2(float *out, const void *row, int cols);
void pm_dq_bf16_avx2(float *out, const void *row, int cols);
void pm_dq_q4_0_avx2(float *out, const void *row, int cols);
void pm_dq_q4_1_avx2(float *out, const void *row, int cols);
void pm_dq_q5_0_avx2(float *out, const void *row, int cols);
void pm_dq_q5_1_avx2(float *out, const void *row, int cols);
void pm_dq_q8_0_avx2(float *out, const void *row, int cols);
void pm_dq_q4_k_avx2(float *out, const void *row, int cols);
void pm_dq_q5_k_avx2(float *out, const void *row, int cols);
void pm_dq_q6_k_avx2(float *out, const void *row, int cols);
#endif

/* pm_half_to_float widens an IEEE binary16 value (exact). */
float pm_half_to_float(uint16_t h);

#endif
