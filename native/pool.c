/*
 * pool.c: the compute threads and the jobs they run.
 *
 * Contract: pool_run(e, fn, arg, nc) runs fn on chunks 0..nc-1 of one job
 * on e->cfg.threads threads (the caller is thread 0) and returns when every
 * chunk is done; a chunk's result must depend only on its number and nc,
 * never on which thread ran it (engine_internal.h, job_fn). With one
 * thread, or one chunk, the caller runs the chunks itself and no lock or
 * atomic is touched. pool_start starts the workers at create time (their
 * start-up allocations happen there, not in the step loop) and pool_stop
 * joins them; pool_run allocates nothing.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "engine_internal.h"

/*
 * The pool. The caller publishes a job in one word, gen << 32 | chunks << 16
 * | next: the job's number, its chunk count and the next chunk to claim.
 * Every thread, the caller included, claims chunks by compare-and-swap on
 * that word until none is left, so the caller never waits for a worker
 * that has not started (asleep, or descheduled on a busy machine): it only
 * waits for chunks a worker has claimed. A claim carries the job's number,
 * so a worker that wakes late cannot take a chunk of a newer job for the
 * old one; the caller publishes the next job only after every chunk of
 * this one is done, so e->job and e->job_arg are stable while a claimed
 * chunk runs. Sleeping (workers on cv_go, the caller on cv_done) follows
 * Dekker's pattern: the sleeper announces itself (sleepers, caller_waits)
 * and rechecks under mu; the waker publishes, then looks for an announced
 * sleeper and only then takes mu, so a job where nobody sleeps touches no
 * lock.
 *
 * How long (pause instructions, ~50 us here) a worker polls for the next
 * job, and the caller for the last chunks, before sleeping: a forward
 * issues about six jobs per layer, microseconds apart, so a sleep/wake pair
 * per job would cost more than the job; but on an oversubscribed machine a
 * spinner steals a core from others, so the spin stays short.
 */
#define SPIN 2000

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#define WORD_GEN(w) ((uint32_t)((w) >> 32))

#define WORD_CHUNKS(w) ((int)(((w) >> 16) & 0xffff))

#define WORD_NEXT(w) ((int)((w)&0xffff))

#define MAX_CHUNKS 0xffff

/* run_chunks claims and runs chunks of job gen (w: the word as last seen)
 * until none is left or a newer job is published, then adds the chunks it
 * ran to job_done in one step (one write of that shared line per thread
 * and job, not one per chunk: at batch 1 a job is a few microseconds). */
static void run_chunks(pm_engine *e, uint64_t w, uint32_t gen, int tid)
{
	int done = 0, nc = WORD_CHUNKS(w);
	for (;;) {
		if (WORD_GEN(w) != gen || WORD_NEXT(w) >= WORD_CHUNKS(w))
			break;
		if (!atomic_compare_exchange_weak_explicit(&e->job_word, &w, w + 1, memory_order_acq_rel,
							   memory_order_acquire))
			continue; /* w is reloaded */
		nc = WORD_CHUNKS(w);
		e->job(e, e->job_arg, WORD_NEXT(w), nc, tid);
		done++;
		w = atomic_load_explicit(&e->job_word, memory_order_acquire);
	}
	if (done > 0 && atomic_fetch_add(&e->job_done, done) + done == nc && atomic_load(&e->caller_waits)) {
		pthread_mutex_lock(&e->mu); /* the last chunks wake a sleeping caller */
		pthread_cond_signal(&e->cv_done);
		pthread_mutex_unlock(&e->mu);
	}
}

static void *worker_main(void *p)
{
	pm_engine *e = ((worker_arg *)p)->e;
	int tid = ((worker_arg *)p)->t;
	uint32_t seen = 0;
	uint64_t w;
	atomic_fetch_add(&e->started, 1);
	for (;;) {
		int spins = 0;
		while (WORD_GEN(w = atomic_load_explicit(&e->job_word, memory_order_acquire)) == seen &&
		       !atomic_load_explicit(&e->quit, memory_order_relaxed)) {
			if (++spins < SPIN) {
				cpu_relax();
				continue;
			}
			pthread_mutex_lock(&e->mu);
			atomic_fetch_add(&e->sleepers, 1);
			while (WORD_GEN(atomic_load(&e->job_word)) == seen && !atomic_load(&e->quit))
				pthread_cond_wait(&e->cv_go, &e->mu);
			atomic_fetch_sub(&e->sleepers, 1);
			pthread_mutex_unlock(&e->mu);
			spins = 0;
		}
		if (atomic_load(&e->quit))
			return NULL;
		seen = WORD_GEN(w);
		run_chunks(e, w, seen, tid);
	}
}

/* pool_run runs fn on chunks 0..nc-1 (nc <= MAX_CHUNKS) on the compute
 * threads (the caller is thread 0) and returns when all are done. */
void pool_run(pm_engine *e, job_fn fn, const void *arg, int nc)
{
	if (nc > MAX_CHUNKS)
		nc = MAX_CHUNKS;
	if (e->n_workers == 0 || nc <= 1) {
		for (int c = 0; c < nc; c++)
			fn(e, arg, c, nc, 0);
		return;
	}
	e->job = fn;
	e->job_arg = arg;
	atomic_store_explicit(&e->job_done, 0, memory_order_relaxed);
	uint32_t gen = ++e->job_seq;
	if (gen == 0) /* 0 is no job yet, what a new worker has seen */
		gen = ++e->job_seq;
	uint64_t w = (uint64_t)gen << 32 | (uint64_t)nc << 16;
	/* an exchange, not a store: a read-modify-write orders it before the
	 * sleepers load on every machine, emulated ones too (qemu-user on x86
	 * hosts runs an AArch64 stlr as a plain store, which a later load may
	 * pass: the Dekker pair then lost a wakeup and both threads slept) */
	atomic_exchange(&e->job_word, w);
	if (atomic_load(&e->sleepers) > 0) {
		pthread_mutex_lock(&e->mu);
		pthread_cond_broadcast(&e->cv_go);
		pthread_mutex_unlock(&e->mu);
	}
	run_chunks(e, w, gen, 0);
	for (int spins = 0; atomic_load_explicit(&e->job_done, memory_order_acquire) < nc; spins++) {
		if (spins < SPIN) {
			cpu_relax();
			continue;
		}
		pthread_mutex_lock(&e->mu);
		atomic_exchange(&e->caller_waits, 1); /* a read-modify-write, as above */
		while (atomic_load(&e->job_done) < nc)
			pthread_cond_wait(&e->cv_done, &e->mu);
		atomic_store(&e->caller_waits, 0);
		pthread_mutex_unlock(&e->mu);
	}
}

static worker_arg *worker_args(pm_engine *e);

int pool_start(pm_engine *e)
{
	if (e->cfg.threads == 1)
		return PM_OK;
	if (pthread_mutex_init(&e->mu, NULL) != 0)
		return seterr(e, PM_ERR_NOMEM, "threads: pthread_mutex_init failed");
	if (pthread_cond_init(&e->cv_go, NULL) != 0) {
		pthread_mutex_destroy(&e->mu);
		return seterr(e, PM_ERR_NOMEM, "threads: pthread_cond_init failed");
	}
	if (pthread_cond_init(&e->cv_done, NULL) != 0) {
		pthread_cond_destroy(&e->cv_go);
		pthread_mutex_destroy(&e->mu);
		return seterr(e, PM_ERR_NOMEM, "threads: pthread_cond_init failed");
	}
	e->sync_ok = 1;
	worker_arg *wa = worker_args(e);
	for (int i = 0; i < e->cfg.threads - 1; i++) {
		wa[i].e = e;
		wa[i].t = i + 1;
		int rc = pthread_create(&e->workers[i], NULL, worker_main, &wa[i]);
		if (rc != 0)
			return seterr(e, PM_ERR_NOMEM, "threads: pthread_create: %s", strerror(rc));
		e->n_workers++;
	}
	/* A thread's start-up allocates (the C library's, a sanitizer's): let
	 * it happen here, not in the first steps, where no worker has to run
	 * for a job to finish. */
	while (atomic_load(&e->started) < e->n_workers)
		sched_yield();
	return PM_OK;
}

/* The worker arguments live after the worker handles (one allocation). */
static worker_arg *worker_args(pm_engine *e)
{
	return (worker_arg *)(e->workers + (e->cfg.threads - 1));
}

void pool_stop(pm_engine *e)
{
	if (!e->sync_ok)
		return;
	atomic_store(&e->quit, 1);
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->cv_go);
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < e->n_workers; i++)
		pthread_join(e->workers[i], NULL);
	e->n_workers = 0;
	pthread_cond_destroy(&e->cv_go);
	pthread_cond_destroy(&e->cv_done);
	pthread_mutex_destroy(&e->mu);
	e->sync_ok = 0;
}
