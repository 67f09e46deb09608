/*
 * arch.c: the architecture table of arch.h.
 *
 * llama  Llama 1-3, SmolLM, Mistral-style GQA: NORM RoPE (llama.cpp's
 *        converter permutes q/k into adjacent pairs), optional q/k/v biases.
 * qwen2  Qwen2 / Qwen2.5: NEOX RoPE, q/k/v biases.
 * qwen3  Qwen3 (dense): NEOX RoPE, no biases, RMSNorm of each query and key
 *        head (attn_q_norm, attn_k_norm) before RoPE.
 */
#include "arch.h"

#include <string.h>

static const pm_arch archs[] = {
	{"llama", PM_ROPE_NORM, PM_BIAS_OPTIONAL, 0},
	{"qwen2", PM_ROPE_NEOX, PM_BIAS_REQUIRED, 0},
	{"qwen3", PM_ROPE_NEOX, PM_BIAS_NONE, 1},
};

const char pm_arch_names[] = "llama, qwen2, qwen3";

const pm_arch *pm_arch_find(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
		if (strlen(archs[i].name) == n && memcmp(archs[i].name, s, n) == 0)
			return &archs[i];
	return NULL;
}
