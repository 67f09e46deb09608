/*
 * test_pool.c: pool.c in isolation, on a hand-built engine (only the pool's
 * fields): with 1, 2, 3 and 4 threads, jobs of 1 to 300 chunks run every
 * chunk exactly once, on a thread id below the thread count, and a job
 * has finished when pool_run returns (the next job sees every write of the
 * last); one thread runs every chunk on the caller. The workers start and
 * stop cleanly (ThreadSanitizer runs test_engine.c over the same pool).
 */
#define CTEST_SEED 0xa54ff53a5f1d36f1ull
#include "ctest.h"
#include "engine_internal.h"

#include <stdlib.h>

enum { MAXC = 300 };

typedef struct {
	atomic_int runs[MAXC];
	atomic_int bad_tid;
	atomic_int callers; /* chunks run by thread 0 */
	int threads;
	int *prev; /* the previous job's writes, read by this one */
	int prev_n;
	atomic_int stale;
} job;

static void task(pm_engine *e, const void *arg, int c, int nc, int tid)
{
	job *j = (job *)arg;
	atomic_fetch_add(&j->runs[c], 1);
	if (tid < 0 || tid >= j->threads)
		atomic_fetch_add(&j->bad_tid, 1);
	if (tid == 0)
		atomic_fetch_add(&j->callers, 1);
	for (int i = 0; i < j->prev_n; i++)
		if (j->prev[i] != i + 1)
			atomic_fetch_add(&j->stale, 1);
}

static void write_task(pm_engine *e, const void *arg, int c, int nc, int tid)
{
	job *j = (job *)arg;
	j->prev[c] = c + 1; /* plain writes, read after pool_run returns */
}

static void test_threads(int threads)
{
	pm_engine *e = calloc(1, sizeof *e);
	e->cfg.threads = threads;
	if (threads > 1)
		e->workers = calloc(1, (size_t)(threads - 1) * (sizeof(pthread_t) + sizeof(worker_arg)));
	int rc = pool_start(e);
	CHECK(rc == PM_OK, "pool_start(%d threads): %d %s", threads, rc, e->err);
	CHECK(e->n_workers == threads - 1, "%d workers for %d threads", e->n_workers, threads);
	job *j = calloc(1, sizeof *j);
	j->threads = threads;
	j->prev = calloc(MAXC, sizeof *j->prev);
	int lost = 0, twice = 0, callers_all = 1;
	for (int it = 0; it < 400; it++) {
		int nc = it < 300 ? it + 1 : (int)(rnd() % MAXC) + 1;
		for (int c = 0; c < MAXC; c++)
			atomic_store(&j->runs[c], 0);
		atomic_store(&j->callers, 0);
		/* write the array in one job, check it from every chunk of the next */
		memset(j->prev, 0, MAXC * sizeof *j->prev);
		pool_run(e, write_task, j, nc);
		j->prev_n = nc;
		pool_run(e, task, j, nc);
		for (int c = 0; c < nc; c++) {
			lost += atomic_load(&j->runs[c]) == 0;
			twice += atomic_load(&j->runs[c]) > 1;
		}
		for (int c = nc; c < MAXC; c++)
			twice += atomic_load(&j->runs[c]) != 0;
		if (threads == 1)
			callers_all &= atomic_load(&j->callers) == nc;
	}
	CHECK(lost == 0 && twice == 0, "%d threads: %d chunks never ran, %d ran twice or out of range",
	      threads, lost, twice);
	CHECK(atomic_load(&j->bad_tid) == 0, "%d threads: a chunk ran on a thread id out of range",
	      threads);
	CHECK(atomic_load(&j->stale) == 0, "%d threads: a chunk saw %d writes of the last job missing",
	      threads, atomic_load(&j->stale));
	CHECK(callers_all, "one thread: a chunk ran off the caller");
	pool_stop(e);
	CHECK(e->n_workers == 0 && e->sync_ok == 0, "%d threads: pool_stop left %d workers", threads,
	      e->n_workers);
	pool_stop(e); /* a second stop is a no-op */
	free(j->prev);
	free(j);
	free(e->workers);
	free(e);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("pool.c: every chunk once, on a valid thread, jobs ordered\n");
	for (int t = 1; t <= 4; t++)
		test_threads(t);
	if (fails) {
		fprintf(stderr, "%d failures\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
