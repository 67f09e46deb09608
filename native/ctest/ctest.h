/*
 * ctest.h: what the C tests share: CHECK (count a failure, print it, go
 * on), a xorshift generator (seed: CTEST_SEED before the include) and a
 * random finite F16.
 */
#ifndef PM_CTEST_H
#define PM_CTEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fails++;                                                      \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, "\n");                                        \
		}                                                                     \
	} while (0)

#ifndef CTEST_SEED
#define CTEST_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rs = CTEST_SEED;
static inline uint32_t rnd(void)
{
	rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
	return (uint32_t)(rs >> 16);
}

/* put_f16 writes a finite F16 of magnitude about 2^-3 .. 2^1, random sign. */
static inline void put_f16(uint8_t *p)
{
	uint16_t h = (uint16_t)(0x3000 + rnd() % 0x1000) | (uint16_t)(rnd() & 1 ? 0x8000 : 0);
	memcpy(p, &h, 2);
}

#endif
