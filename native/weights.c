/*
 * weights.c: the types the engine computes with: elements per block and
 * bytes per row of each (weights.h). It stands below every kernel and
 * calls none: which kernel computes a type is matmul.c's choice.
 */
#include <stdint.h>

#include "weights.h"

static const struct {
	int block, bytes;
} types[PM_TYPE_COUNT] = {
	[PM_TYPE_F32] = {1, 4},      [PM_TYPE_F16] = {1, 2},      [PM_TYPE_BF16] = {1, 2},
	[PM_TYPE_Q4_0] = {32, 18},   [PM_TYPE_Q4_1] = {32, 20},   [PM_TYPE_Q5_0] = {32, 22},
	[PM_TYPE_Q5_1] = {32, 24},   [PM_TYPE_Q8_0] = {32, 34},   [PM_TYPE_Q4_K] = {256, 144},
	[PM_TYPE_Q5_K] = {256, 176}, [PM_TYPE_Q6_K] = {256, 210},
};

int pm_type_block(uint32_t type)
{
	return type < PM_TYPE_COUNT ? types[type].block : 0;
}

size_t pm_type_row_bytes(uint32_t type, int64_t cols)
{
	int b = pm_type_block(type);
	if (b == 0 || cols < 1 || cols % b != 0 || cols > (int64_t)1 << 40)
		return 0;
	return (size_t)(cols / b) * (size_t)types[type].bytes;
}
