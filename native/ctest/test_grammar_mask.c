/*
 * test_grammar_mask.c: the grammar matcher (grammar_match.h) and the token
 * mask (grammar_mask.h), under the sanitizers: accept/reject on hand
 * grammars (literals, alternation, repetition, nested rules, UTF-8
 * classes), the bounds (an overflow is a dead end, -1, never a crash), and
 * the mask over a random vocabulary on the tiny model's engine equal to
 * brute force (each token's bytes fed to a copy of the matcher state) at
 * every prefix of a sentence, for two grammars whose states are the same
 * integers asked in turn (they share the transition memo), a cache hit
 * giving the identical mask, EOS
 * allowed exactly where the grammar may end, and a dead end forcing EOS.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctest.h"
#include "engine.h"
#include "engine_internal.h"
#include "grammar.h"
#include "grammar_mask.h"
#include "grammar_match.h"

static int32_t A[GM_STATE_CAP], TMP[2 * GM_STATE_CAP], SCR[GM_SCRATCH_WORDS];

static pm_grammar *compile(const char *text)
{
	pm_grammar *g = NULL;
	char err[256];
	if (pm_grammar_compile(text, strlen(text), &g, err, sizeof err)) {
		fprintf(stderr, "compile %s: %s\n", text, err);
		fails++;
	}
	return g;
}

/* run: -2 overflow, -1 dead, 0 alive, 1 accepting after the bytes of s. */
static int run(const pm_grammar *g, const char *s, size_t n)
{
	gm_scratch sc = {SCR};
	if (gm_start(g, &sc, A) < 0)
		return -2;
	for (size_t i = 0; i < n; i++) {
		int rc = gm_advance_bytes(g, &sc, A, (const uint8_t *)s + i, 1, TMP);
		if (rc < 0)
			return -2;
		if (rc == 0)
			return -1;
	}
	return gm_accepting(A);
}

static void expect(const char *gtext, const char *s, int want)
{
	pm_grammar *g = compile(gtext);
	if (!g)
		return;
	int got = run(g, s, strlen(s));
	CHECK(got == want, "grammar %s on \"%s\": %d, want %d", gtext, s, got, want);
	pm_grammar_release(g);
}

static void hand(void)
{
	const char *lit = "root ::= \"abc\"";
	expect(lit, "abc", 1);
	expect(lit, "ab", 0);
	expect(lit, "", 0);
	expect(lit, "abd", -1);
	expect(lit, "abcd", -1);
	const char *alt = "root ::= \"cat\" | \"dog\" | \"ca\"";
	expect(alt, "ca", 1);
	expect(alt, "cat", 1);
	expect(alt, "do", 0);
	expect(alt, "cow", -1);
	const char *rep = "root ::= \"a\"+ \"b\"*";
	expect(rep, "aaab", 1);
	expect(rep, "a", 1);
	expect(rep, "", 0);
	expect(rep, "ba", -1);
	expect(rep, "aba", -1);
	const char *cnt = "root ::= [0-9]{2,3}";
	expect(cnt, "1", 0);
	expect(cnt, "12", 1);
	expect(cnt, "123", 1);
	expect(cnt, "1234", -1);
	expect(cnt, "1a", -1);
	const char *nest = "root ::= obj\n"
			   "obj ::= \"{\" (pair (\",\" pair)*)? \"}\"\n"
			   "pair ::= [a-z]+ \":\" (obj | [0-9]+)\n";
	expect(nest, "{a:1,b:{c:2}}", 1);
	expect(nest, "{}", 1);
	expect(nest, "{a:{b:{c:{}}}", 0);
	expect(nest, "{a:}", -1);
	expect(nest, "{a:1}}", -1);
	const char *utf = "root ::= [\\u00e9-\\u00eb]+";
	expect(utf, "\xc3\xa9\xc3\xab", 1);
	expect(utf, "\xc3", 0);
	expect(utf, "\xc3\xa8", -1);
	expect(utf, "e", -1);
	const char *neg = "root ::= [^a] \"!\"";
	expect(neg, "\xe6\x97\xa5!", 1);
	expect(neg, "\xe6\x97", 0);
	expect(neg, "a!", -1);
	expect(neg, "\xed\xa0\x80!", -1); /* a surrogate is no character */
	expect("root ::= . .", "x\xf0\x9f\x98\x80", 1);
	/* right recursion (repetition) keeps its depth: no return frames */
	pm_grammar *g = compile("root ::= \"a\"* \"b\"");
	if (g) {
		char *s = malloc(20001);
		memset(s, 'a', 20000);
		s[20000] = 'b';
		CHECK(run(g, s, 20000) == 0, "20000 a's: not alive");
		CHECK(run(g, s, 20001) == 1, "20000 a's then b: not accepted");
		free(s);
		pm_grammar_release(g);
	}
}

static void bounds(void)
{
	/* nesting deeper than GM_MAX_DEPTH: an overflow, not a crash */
	pm_grammar *g = compile("root ::= \"(\" root \")\" | \"x\"");
	if (g) {
		char s[2 * GM_MAX_DEPTH];
		memset(s, '(', sizeof s);
		CHECK(run(g, s, 10) == 0, "10 open parentheses: not alive");
		CHECK(run(g, s, sizeof s) == -2, "%zu open parentheses: %d, want overflow", sizeof s,
		      run(g, s, sizeof s));
		pm_grammar_release(g);
	}
	/* more stacks than GM_MAX_STACKS at the start */
	size_t cap = (GM_MAX_STACKS + 50) * 8 + 32;
	char *t = malloc(cap);
	strcpy(t, "root ::=");
	for (int i = 0; i < GM_MAX_STACKS + 50; i++)
		strcat(t, " \"a\"*");
	g = compile(t);
	free(t);
	if (g) {
		gm_scratch sc = {SCR};
		CHECK(gm_start(g, &sc, A) == -1, "%d stars: the start does not overflow",
		      GM_MAX_STACKS + 50);
		pm_grammar_release(g);
	}
}

/* brute: token bytes fed to a copy of st leave a stack (overflow: refused). */
static int brute(const pm_grammar *g, const int32_t *st, const uint8_t *b, uint32_t n)
{
	if (n == 0 || n > GMASK_MAX_TOKEN)
		return 0;
	gm_scratch sc = {SCR};
	memcpy(A, st, sizeof *st * (size_t)st[1]);
	return gm_advance_bytes(g, &sc, A, b, (int)n, TMP) > 0;
}

static pm_model model;

static pm_engine *engine(void)
{
	pm_engine_config c;
	pm_engine_config_default(&c);
	c.threads = 1;
	pm_engine *e = NULL;
	char err[256] = "";
	int rc = pm_engine_create(&model, &c, &e, err, sizeof err);
	CHECK(rc == PM_OK && e, "create: %s", err);
	return rc == PM_OK ? e : NULL;
}

/* twin: the second grammar and sentence of masks(), the first's with the
 * letters a-c shifted to d-f: the two grammars' matcher states are the
 * same integers at every prefix, so a memo that kept states apart by
 * value alone would hand one grammar the other's transitions. */
static void twin(const char *in, char *out)
{
	for (; *in; in++)
		*out++ = *in >= 'a' && *in <= 'c' ? (char)(*in + 3) : *in;
	*out = 0;
}

/* masks: two requests, under the twin grammars, advanced in lock step
 * along their twin sentences; at each prefix each one's mask is computed
 * twice (a walk, then a cache hit), alternating between the grammars as a
 * batch of two agents' tools does, and compared with brute force. */
static void masks(void)
{
	const char *text = "root ::= obj\n"
			   "obj ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\n"
			   "pair ::= \"\\\"\" [a-c\\u00e9]+ \"\\\"\" ws \":\" ws (obj | [0-9]+ | \"true\")\n"
			   "ws ::= \" \"?\n";
	const char *sentence = "{ \"a\xc3\xa9\": {\"b\":12, \"c\":true}}";
	char text2[512], sentence2[64];
	twin(text, text2);
	twin(sentence, sentence2);
	const char *sent[2] = {sentence, sentence2};
	pm_grammar *g[2] = {compile(text), compile(text2)};
	pm_engine *e = engine();
	if (!g[0] || !g[1] || !e)
		goto out0;
	int32_t n = e->vocab, eos = e->m->eos_id;
	const char *alpha = "{}\":, abcdef019tr\xc3\xa9\xa9x";
	/* every byte of the sentences also has a 1-byte token (ids 200..),
	 * so the requests can be advanced along them below */
	char distinct[64] = "";
	for (int q = 0; q < 2; q++)
		for (const char *c = sent[q]; *c; c++)
			if (!strchr(distinct, *c))
				distinct[strlen(distinct)] = *c;
	int32_t nd = (int32_t)strlen(distinct);
	uint8_t *bytes = malloc((size_t)n * 6);
	uint32_t *offs = malloc(sizeof *offs * ((size_t)n + 1));
	float *l = malloc(sizeof *l * (size_t)n);
	offs[0] = 0;
	for (int32_t i = 0; i < n; i++) {
		int len = i % 50 == 0 || i == eos ? 0 : 1 + (int)(rnd() % 6); /* control tokens */
		if (i >= 200 && i < 200 + nd && i != eos) {
			len = 1;
			bytes[offs[i]] = (uint8_t)distinct[i - 200];
		} else if (i >= 2 && i % 31 == 0) { /* duplicates */
			len = (int)(offs[i - 1] - offs[i - 2]);
			memcpy(bytes + offs[i], bytes + offs[i - 2], (size_t)len);
		} else {
			for (int k = 0; k < len; k++)
				bytes[offs[i] + k] = (uint8_t)alpha[rnd() % strlen(alpha)];
		}
		offs[i + 1] = offs[i] + (uint32_t)len;
	}
	int rc = pm_engine_set_token_bytes(e, bytes, offs, n);
	CHECK(rc == PM_OK, "set token bytes: %s", pm_engine_errmsg(e));
	if (rc)
		goto out;
	req *r[2] = {&e->reqs[0], &e->reqs[1]};
	static int32_t cur[2][GM_STATE_CAP];
	gm_scratch sc = {SCR};
	for (int q = 0; q < 2; q++) {
		r[q]->p.grammar = g[q];
		r[q]->p.n_stop = 0;
		memset(&r[q]->st, 0, sizeof r[q]->st);
		CHECK(gmask_start(e, r[q]) == PM_OK, "start: %s", pm_engine_errmsg(e));
		gm_start(g[q], &sc, cur[q]);
	}
	size_t slen = strlen(sentence);
	for (size_t k = 0; k <= slen; k++) {
		int64_t hits0 = e->met.mask_cache_hits;
		for (int pass = 0; pass < 2; pass++) {
			for (int q = 0; q < 2; q++) {
				for (int32_t t = 0; t < n; t++)
					l[t] = 1.0f;
				gmask_apply(e, r[q], l);
				int allowed = 0, bad = 0;
				for (int32_t t = 0; t < n; t++) {
					int want = t == eos ? gm_accepting(cur[q])
							    : brute(g[q], cur[q], bytes + offs[t],
								    offs[t + 1] - offs[t]);
					int got = !isinf(l[t]);
					allowed += want;
					if (got != want && bad++ < 5)
						CHECK(0,
						      "grammar %d prefix %zu pass %d token %d (%.*s): mask %d, brute force %d",
						      q, k, pass, t, (int)(offs[t + 1] - offs[t]),
						      (const char *)bytes + offs[t], got, want);
				}
				CHECK(allowed > 0, "grammar %d prefix %zu: nothing allowed", q, k);
				CHECK(gm_accepting(cur[q]) == (k == slen), "grammar %d prefix %zu: accepting %d",
				      q, k, gm_accepting(cur[q]));
			}
		}
		CHECK(e->met.mask_cache_hits >= hits0 + 2, "prefix %zu: the second masks were no cache hits",
		      k);
		if (k == slen)
			break;
		for (int q = 0; q < 2; q++) {
			/* advance request q by the 1-byte token of its
			 * sentence's next byte (ids 200..) */
			int32_t tok = -1;
			for (int32_t t = 0; t < n && tok < 0; t++)
				if (offs[t + 1] - offs[t] == 1 && bytes[offs[t]] == (uint8_t)sent[q][k])
					tok = t;
			if (tok < 0) {
				CHECK(0, "no 1-byte token for '%c'", sent[q][k]);
				goto done;
			}
			gmask_accept(e, r[q], tok);
			CHECK(gm_advance_bytes(g[q], &sc, cur[q], (const uint8_t *)sent[q] + k, 1, TMP) > 0,
			      "sentence %d dies at %zu", q, k);
			CHECK(r[q]->st.grammar != PM_GRAMMAR_DEAD, "request %d dead at %zu", q, k);
		}
	}
	for (int q = 0; q < 2; q++)
		CHECK(r[q]->st.masked_tokens == 2 * (int64_t)(slen + 1), "request %d: masked tokens %lld",
		      q, (long long)r[q]->st.masked_tokens);
	/* a dead end: after the sentence nothing but EOS; forcing past it (a
	 * token the grammar refuses) makes every next mask EOS alone */
	int32_t brace = -1;
	for (int32_t t = 0; t < n && brace < 0; t++)
		if (offs[t + 1] - offs[t] == 1 && bytes[offs[t]] == '}')
			brace = t;
	if (brace >= 0) {
		gmask_accept(e, r[0], brace);
		CHECK(r[0]->st.grammar == PM_GRAMMAR_DEAD, "a refused token: grammar %d", r[0]->st.grammar);
		for (int32_t t = 0; t < n; t++)
			l[t] = 1.0f;
		gmask_apply(e, r[0], l);
		int others = 0;
		for (int32_t t = 0; t < n; t++)
			others += t != eos && !isinf(l[t]);
		CHECK(others == 0 && eos >= 0 && !isinf(l[eos]),
		      "dead end: %d other tokens allowed, eos %g", others, eos >= 0 ? l[eos] : 0);
	}
done:
	r[0]->p.grammar = r[1]->p.grammar = NULL;
out:
	free(bytes);
	free(offs);
	free(l);
out0:
	if (e)
		pm_engine_free(e);
	for (int q = 0; q < 2; q++)
		if (g[q])
			pm_grammar_release(g[q]);
}

int main(void)
{
	hand();
	bounds();
	const char *path = getenv("PICOMETER_TINY_MODEL");
	char err[512] = "";
	if (!path || pm_model_load(path, &model, err, sizeof err) != PM_OK) {
		fprintf(stderr, "FAIL: tiny model %s: %s\n", path ? path : "(PICOMETER_TINY_MODEL unset)",
			err);
		return 1;
	}
	masks();
	pm_model_free(&model);
	if (fails) {
		fprintf(stderr, "test_grammar_mask: %d failures\n", fails);
		return 1;
	}
	printf("test_grammar_mask: ok\n");
	return 0;
}
