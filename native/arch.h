/*
 * arch.h: the model architectures the loader accepts, as llama.cpp reads
 * them. Each architecture's hyperparameters live under its own GGUF key
 * prefix (the architecture's name: "llama.embedding_length",
 * "qwen2.embedding_length", ...); the table says which optional tensors a
 * block has and which RoPE layout it uses.
 */
#ifndef PM_ARCH_H
#define PM_ARCH_H

#include <stddef.h>
#include <stdint.h>

/* Whether a block's q/k/v projections have bias vectors (attn_{q,k,v}.bias). */
enum { PM_BIAS_NONE = 0, PM_BIAS_OPTIONAL = 1, PM_BIAS_REQUIRED = 2 };

/* RoPE layouts (ggml's mode numbers). NORM rotates adjacent pairs
 * (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n/2]), as GPT-NeoX and the
 * Hugging Face checkpoints that llama.cpp converts without permuting q/k. */
enum { PM_ROPE_NORM = 0, PM_ROPE_NEOX = 2 };

typedef struct {
	const char *name; /* general.architecture, also the key prefix */
	int rope_type;    /* PM_ROPE_* */
	int qkv_bias;     /* PM_BIAS_* */
	int qk_norm;      /* 1: attn_q_norm / attn_k_norm ([head_dim] RMSNorm per head) */
} pm_arch;

/* pm_arch_find returns the architecture named s[0..n), or NULL. */
const pm_arch *pm_arch_find(const uint8_t *s, size_t n);

/* pm_arch_names is the list of supported names for messages ("llama, qwen2, qwen3"). */
extern const char pm_arch_names[];

#endif
