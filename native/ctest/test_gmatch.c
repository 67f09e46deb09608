/*
 * test_gmatch.c: the grammar matcher (gmatch.h) and the vocabulary mask
 * (gmask.h): accept/reject on hand grammars (literals, alternation,
 * repetition, nested rules, UTF-8 classes), the bounds (overflow is a dead
 * end with GM_OVERFLOW, never a crash), and masks over random vocabularies
 * equal to brute force (each token's bytes fed to a copy of the matcher),
 * a cache hit giving the identical mask.
 */
#include <stdlib.h>
#include <string.h>

#include "ctest.h"
#include "gmask.h"
#include "grammar.h"

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

static gm_set A, B;

/* run: -1 dead (or overflow), 0 alive, 1 accepting after the bytes of s. */
static int run(const pm_grammar *g, const char *s, size_t n)
{
	gm_init(g, &A);
	gm_set *a = &A, *b = &B;
	for (size_t i = 0; i < n && a->n > 0; i++) {
		gm_step(g, a, (uint8_t)s[i], b);
		gm_set *t = a;
		a = b;
		b = t;
	}
	if (a->n == 0)
		return -1;
	return gm_accepting(a);
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
	/* right recursion (repetitions) keeps its depth: tail calls */
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
	/* nesting deeper than PM_GMATCH_MAX_DEPTH: a dead end with a status */
	pm_grammar *g = compile("root ::= \"(\" root \")\" | \"x\"");
	if (g) {
		char s[200];
		memset(s, '(', sizeof s);
		CHECK(run(g, s, 10) == 0, "10 open parentheses: not alive");
		gm_init(g, &A);
		gm_set *a = &A, *b = &B;
		int i = 0;
		for (; i < 200 && a->n > 0; i++) {
			gm_step(g, a, '(', b);
			gm_set *t = a;
			a = b;
			b = t;
		}
		CHECK(a->n == 0 && a->status == GM_OVERFLOW && i < 200 && i > 50,
		      "deep nesting: n %d status %d after %d", a->n, a->status, i);
		pm_grammar_release(g);
	}
	/* more stacks than PM_GMATCH_MAX_STACKS */
	size_t cap = 400 * 8 + 32;
	char *t = malloc(cap);
	strcpy(t, "root ::=");
	for (int i = 0; i < 400; i++)
		strcat(t, " \"a\"*");
	g = compile(t);
	free(t);
	if (g) {
		gm_init(g, &A);
		CHECK(A.n == 0 && A.status == GM_OVERFLOW, "400 stars: n %d status %d", A.n, A.status);
		pm_grammar_release(g);
	}
}

/* brute: token t's bytes fed to a copy of s leave a stack alive. */
static int brute(const pm_grammar *g, const gm_set *s, const uint8_t *b, uint32_t n)
{
	gm_copy(&A, s);
	gm_set *a = &A, *c = &B;
	for (uint32_t i = 0; i < n && a->n > 0; i++) {
		gm_step(g, a, b[i], c);
		gm_set *x = a;
		a = c;
		c = x;
	}
	return a->n > 0;
}

static void masks(void)
{
	const char *text = "root ::= obj\n"
			   "obj ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\n"
			   "pair ::= \"\\\"\" [a-c\\u00e9]+ \"\\\"\" ws \":\" ws (obj | [0-9]+ | \"true\")\n"
			   "ws ::= \" \"?\n";
	pm_grammar *g = compile(text);
	if (!g)
		return;
	const char *alpha = "{}\":, abc019tre\xc3\xa9\xa9x";
	int n = 3000;
	uint8_t *bytes = malloc((size_t)n * 6);
	uint32_t *offs = malloc(sizeof *offs * ((size_t)n + 1));
	offs[0] = 0;
	for (int i = 0; i < n; i++) {
		int len = i % 50 == 0 ? 0 : 1 + (int)(rnd() % 6); /* some control tokens */
		if (i >= 2 && i % 97 == 0) { /* duplicates */
			len = (int)(offs[i - 1] - offs[i - 2]);
			memcpy(bytes + offs[i], bytes + offs[i - 2], (size_t)len);
		} else {
			for (int k = 0; k < len; k++)
				bytes[offs[i] + k] = (uint8_t)alpha[rnd() % strlen(alpha)];
		}
		offs[i + 1] = offs[i] + (uint32_t)len;
	}
	gm_vocab *v;
	char err[128];
	int rc = gmask_vocab_new(bytes, offs, n, &v, err, sizeof err);
	CHECK(rc == 0, "vocab: %d %s", rc, err);
	if (rc)
		goto out;
	const char *sentence = "{ \"a\xc3\xa9\": {\"b\":12, \"c\":true}}";
	static gm_set st, st2;
	uint64_t *saved = malloc(sizeof *saved * (size_t)((n + 63) / 64));
	gm_init(g, &st);
	for (size_t k = 0; k <= strlen(sentence); k++) {
		gm_copy(&st2, &st);
		gm_mask m = gmask_compute(v, g, &st2);
		CHECK(!m.hit || k > 0, "a hit on an empty cache");
		int allowed = 0, bad = 0;
		for (int t = 0; t < n; t++) {
			int want = offs[t + 1] > offs[t] &&
				   brute(g, &st2, bytes + offs[t], offs[t + 1] - offs[t]);
			int got = (int)((m.words[t >> 6] >> (t & 63)) & 1);
			allowed += want;
			if (got != want && bad++ < 5)
				CHECK(0, "prefix %zu token %d (%.*s): mask %d, brute force %d", k, t,
				      (int)(offs[t + 1] - offs[t]), (const char *)bytes + offs[t], got, want);
		}
		CHECK(allowed == m.n_allowed, "prefix %zu: %d allowed, mask says %d", k, allowed,
		      m.n_allowed);
		CHECK(m.accepting == (k == strlen(sentence)), "prefix %zu: accepting %d", k, m.accepting);
		memcpy(saved, m.words, sizeof *saved * (size_t)((n + 63) / 64));
		gm_mask m2 = gmask_compute(v, g, &st2);
		CHECK(m2.hit && m2.n_allowed == m.n_allowed &&
			      !memcmp(saved, m2.words, sizeof *saved * (size_t)((n + 63) / 64)),
		      "prefix %zu: the cached mask differs", k);
		if (k < strlen(sentence)) {
			gm_step(g, &st, (uint8_t)sentence[k], &st2);
			CHECK(st2.n > 0, "sentence dies at %zu", k);
			gm_copy(&st, &st2);
		}
	}
	int64_t hits, misses;
	gmask_cache_stats(v, &hits, &misses);
	CHECK(hits >= (int64_t)strlen(sentence) && misses > 0, "cache: %lld hits %lld misses",
	      (long long)hits, (long long)misses);
	free(saved);
	/* a token over the bound is refused by name */
	gm_vocab *v2;
	uint32_t o2[2] = {0, PM_GMASK_MAX_TOKEN + 1};
	uint8_t *big = calloc(PM_GMASK_MAX_TOKEN + 1, 1);
	CHECK(gmask_vocab_new(big, o2, 1, &v2, err, sizeof err) == 5 && strstr(err, "token 0"),
	      "long token: %s", err);
	free(big);
	gmask_vocab_free(v);
out:
	free(bytes);
	free(offs);
	pm_grammar_release(g);
}

int main(void)
{
	hand();
	bounds();
	masks();
	if (fails) {
		fprintf(stderr, "test_gmatch: %d failures\n", fails);
		return 1;
	}
	printf("test_gmatch: ok\n");
	return 0;
}
