/*
 * llamacpp_score: llama.cpp's own logits for a text, for the real-model test
 * (real_llamacpp_test.go). Built by the test against libllama.
 *
 *   llamacpp_score MODEL OUT f32|f16 TEXT
 *
 * Tokenizes TEXT with the model's vocabulary (special tokens' texts parsed as
 * the tokens, no BOS added), runs all of it in one llama_decode with the KV
 * cache in the given type (no flash attention, one thread) and writes OUT:
 * int32 n, int32 n_vocab, the n token ids, then n rows of n_vocab float32
 * logits, one per position.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: llamacpp_score MODEL OUT f32|f16 TEXT\n");
		return 2;
	}
	enum ggml_type kv = strcmp(argv[3], "f16") == 0 ? GGML_TYPE_F16 : GGML_TYPE_F32;
	llama_backend_init();
	struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
	if (!model)
		return 1;
	const struct llama_vocab *vocab = llama_model_get_vocab(model);
	int32_t cap = (int32_t)strlen(argv[4]) + 8;
	llama_token *toks = malloc(sizeof(llama_token) * (size_t)cap);
	int32_t n = llama_tokenize(vocab, argv[4], (int32_t)strlen(argv[4]), toks, cap, false, true);
	if (n <= 0 || n > 2048) {
		fprintf(stderr, "llamacpp_score: tokenize gave %d\n", n);
		return 1;
	}
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = cp.n_batch = cp.n_ubatch = 2048;
	cp.n_threads = cp.n_threads_batch = 1;
	cp.type_k = cp.type_v = kv;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx)
		return 1;
	struct llama_batch b = llama_batch_init(n, 0, 1);
	for (int32_t i = 0; i < n; i++) {
		b.token[i] = toks[i];
		b.pos[i] = i;
		b.n_seq_id[i] = 1;
		b.seq_id[i][0] = 0;
		b.logits[i] = 1;
	}
	b.n_tokens = n;
	if (llama_decode(ctx, b))
		return 1;
	int32_t nv = llama_vocab_n_tokens(vocab);
	FILE *f = fopen(argv[2], "wb");
	if (!f)
		return 1;
	fwrite(&n, sizeof n, 1, f);
	fwrite(&nv, sizeof nv, 1, f);
	fwrite(toks, sizeof(llama_token), (size_t)n, f);
	for (int32_t i = 0; i < n; i++)
		fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)nv, f);
	if (fclose(f))
		return 1;
	llama_batch_free(b);
	llama_free(ctx);
	llama_model_free(model);
	free(toks);
	return 0;
}
