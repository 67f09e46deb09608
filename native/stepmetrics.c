/*
 * stepmetrics.c: the engine's metrics, recorded in the step loop.
 *
 * Contract: plain struct updates, never a wait or an allocation:
 * metrics_time_cost adds one duration to an MLC-LLM TimeCost (the first of
 * each is a warm-up, not counted), metrics_step_record appends a step to
 * the ring (e->ring; when it is full the oldest is dropped and counted in
 * steps_dropped), metrics_finished_at stamps a request's finish time and
 * makes it the engine's last finished request. pm_now is the engine's clock
 * (CLOCK_MONOTONIC nanoseconds; native.Now reads the same).
 */
#include <time.h>

#include "engine_internal.h"

int64_t pm_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* MLC-LLM TimeCost: the first sample of each batch size is a warm-up and is
 * not counted (MLC discards it too); count and sum cover the rest. */
void metrics_time_cost(pm_time_cost *c, int64_t ns)
{
	if (!c->warm) {
		c->warm = 1;
		return;
	}
	c->count++;
	c->sum_ns += ns;
}

/* Appends a step record; when the ring is full the oldest is dropped and counted. */
void metrics_step_record(pm_engine *e, int phase, int batch, int tokens, int64_t ns)
{
	int cap = e->cfg.step_ring;
	pm_step_record *rec;
	if (e->ring_n == cap) {
		rec = &e->ring[e->ring_head];
		e->ring_head = (e->ring_head + 1) % cap;
		e->met.steps_dropped++;
	} else {
		rec = &e->ring[(e->ring_head + e->ring_n) % cap];
		e->ring_n++;
	}
	rec->phase = phase;
	rec->batch_size = batch;
	rec->tokens = tokens;
	rec->_pad = 0;
	rec->duration_ns = ns;
}

/* Sets r's finish time; r is now the engine's last finished request. */
void metrics_finished_at(pm_engine *e, req *r, int64_t t)
{
	r->st.finish_ns = t;
	e->met.last_finished = r->st;
	e->met.last_finished.emit_ns = NULL;
	e->met.has_last = 1;
}
