/*
 * sched.c: the scheduler: admission, preemption, and each step's prefill
 * and decode phases.
 *
 * Contract: sched_step(e) runs one step. It admits waiting requests in
 * order while a slot is free and the cache has room for the whole prompt
 * beyond what prefilling slots still need; gives every prefilling slot one
 * chunk (at most prefill_chunk positions) and samples the first token of
 * each whose prefill ends; then runs one forward over every other decoding
 * slot: its last token, plus its n-gram draft when speculating (spec.c),
 * accepting drafts while the sampled token equals them and rolling the
 * rest back (kv_truncate). When the cache runs short the most recently
 * admitted request is preempted: its blocks freed, it goes back to the
 * head of the queue to be recomputed. Admission starts a slot's prefill
 * after the longest prefix the prefix cache holds (prefix.c), and the
 * blocks a step fills are published there. Outputs of the step are in e->outs,
 * stamped with the step's end time. Greedy output is the same whether a
 * token came from a prefill, decode or verify row, and whatever is batched
 * with it. Nothing here allocates.
 */
#include <string.h>

#include "engine_internal.h"
#include "grammar_mask.h"

int sched_free_slot(const pm_engine *e)
{
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state == SLOT_FREE)
			return i;
	return -1;
}

static void retire(pm_engine *e, int ri)
{
	e->reqs[ri].state = REQ_RETIRED;
	e->retired[e->n_retired++] = ri;
}

void sched_reclaim(pm_engine *e)
{
	for (int i = 0; i < e->n_retired; i++) {
		e->reqs[e->retired[i]].state = REQ_FREE;
		e->free_reqs[e->n_free_reqs++] = e->retired[i];
	}
	e->n_retired = 0;
}

static void release_slot(pm_engine *e, int si)
{
	slot *s = &e->slots[si];
	kv_truncate(e, s, 0);
	if (s->req >= 0)
		e->reqs[s->req].slot = -1;
	s->req = -1;
	s->state = SLOT_FREE;
	s->n_kv = 0;
	s->n_draft = 0;
	s->busy = 0;
	e->n_running--;
}

/* Puts request ri into free slot si; its prefill covers all of seq but the
 * prefix the prefix cache holds. */
void sched_admit(pm_engine *e, int ri, int si, int64_t now)
{
	req *r = &e->reqs[ri];
	slot *s = &e->slots[si];
	s->req = ri;
	s->state = SLOT_PREFILL;
	s->prefill_end = r->n_seq;
	s->n_blocks = 0;
	s->n_kv = prefix_match(e, s, r->seq, r->n_seq);
	if (r->st.preemptions == 0)
		r->st.cached_tokens = s->n_kv;
	if (!e->cfg.no_metrics && !e->cfg.no_prefix_cache) {
		e->met.prefix_queries += r->n_seq;
		e->met.prefix_hits += s->n_kv;
	}
	s->n_draft = 0;
	s->busy = 0;
	s->admit_order = ++e->admit_counter;
	r->state = REQ_RUNNING;
	r->slot = si;
	if (r->st.admitted_ns == 0)
		r->st.admitted_ns = now;
	e->n_running++;
}

/* Whether request ri may enter a slot now: a slot is free and the cache has
 * room for its whole prefill beyond what prefilling slots still need. */
static int admissible(const pm_engine *e, const req *r)
{
	return e->n_running < e->cfg.b_max &&
	       kv_blocks_for(e, r->n_seq) <= e->n_free - kv_reserved_blocks(e);
}

static void admit_waiting(pm_engine *e, int64_t now)
{
	while (e->n_waiting > 0) {
		int ri = e->wait[e->wait_head];
		if (!admissible(e, &e->reqs[ri]))
			break;
		e->wait_head = (e->wait_head + 1) % e->n_reqs;
		e->n_waiting--;
		sched_admit(e, ri, sched_free_slot(e), now);
	}
}

/* Evicts the most recently admitted request: its blocks are freed and it goes
 * back to the head of the waiting queue, to be recomputed from prompt plus
 * output so far. Returns the slot it held. */
static int preempt_newest(pm_engine *e)
{
	int victim = -1;
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state != SLOT_FREE &&
		    (victim < 0 || e->slots[i].admit_order > e->slots[victim].admit_order))
			victim = i;
	if (victim < 0)
		return -1;
	int ri = e->slots[victim].req;
	release_slot(e, victim);
	req *r = &e->reqs[ri];
	r->state = REQ_WAITING;
	r->st.preemptions++;
	e->met.preemptions++;
	e->wait_head = (e->wait_head + e->n_reqs - 1) % e->n_reqs;
	e->wait[e->wait_head] = ri;
	e->n_waiting++;
	return victim;
}

/* Appends tok to request r and returns the finish reason it causes. */
static int emit_token(const pm_engine *e, req *r, int32_t tok)
{
	r->seq[r->n_seq++] = tok;
	r->st.completion_tokens++;
	if (tok == e->m->eos_id)
		return PM_FINISH_STOP;
	for (int i = 0; i < r->p.n_stop; i++)
		if (tok == r->p.stop[i])
			return PM_FINISH_STOP;
	if (r->st.completion_tokens >= r->p.max_tokens || r->n_seq >= e->ctx)
		return PM_FINISH_LENGTH;
	return PM_FINISH_NONE;
}

/* Records the end time t of a step that emitted tokens for r. */
static void note_emit(const pm_engine *e, req *r, int64_t t)
{
	if (r->st.first_token_ns == 0)
		r->st.first_token_ns = t;
	r->st.last_token_ns = t;
	if (r->st.n_emit < e->ctx)
		r->emit[r->st.n_emit++] = t;
}

/* Publishes what slot s emitted this step, and finishes its request if done.
 * Times are stamped when the step ends (stamp_outputs). */
static void deliver(pm_engine *e, slot *s)
{
	int ri = s->req;
	req *r = &e->reqs[ri];
	e->out_req[e->n_outs] = ri;
	pm_output *o = &e->outs[e->n_outs++];
	o->id = r->id;
	o->tokens = r->seq + s->emit0;
	o->n_tokens = s->n_emitted;
	o->finish = s->fin;
	o->stats = s->fin ? &r->st : NULL;
	o->logprobs = NULL;
	o->top_ids = NULL;
	o->top_logprobs = NULL;
	o->top_n = 0;
	if (r->p.logprobs) {
		size_t at = (size_t)(s - e->slots) * (PM_MAX_SPEC_K + 1);
		o->logprobs = e->lp + at;
		o->top_ids = e->top_id + at * PM_MAX_TOP_LOGPROBS;
		o->top_logprobs = e->top_lp + at * PM_MAX_TOP_LOGPROBS;
		o->top_n = r->p.top_logprobs;
	}
	if (s->fin)
		sched_finish(e, ri, s->fin);
}

/* A token leaves the engine when Step returns: every output of the step
 * gets the step's end time as its emit (and finish) time. */
static void stamp_outputs(pm_engine *e)
{
	if (e->cfg.no_metrics || e->n_outs == 0)
		return;
	int64_t t = pm_now();
	for (int i = 0; i < e->n_outs; i++) {
		req *r = &e->reqs[e->out_req[i]];
		note_emit(e, r, t);
		if (e->outs[i].finish)
			metrics_finished_at(e, r, t);
	}
}

/*
 * Gives every slot in e->order[0..n) blocks for positions < upto(slot). When
 * the cache runs short it preempts the newest request (possibly one of them)
 * until the rest fit. Returns how many slots remain in e->order.
 */
static int reserve(pm_engine *e, int n, int (*upto)(const pm_engine *, const slot *))
{
	for (;;) {
		int need = 0;
		for (int i = 0; i < n; i++) {
			const slot *s = &e->slots[e->order[i]];
			need += kv_blocks_short(e, s, upto(e, s));
		}
		if (need <= e->n_free)
			break;
		int v = preempt_newest(e);
		if (v < 0) /* nothing runs: cannot happen while slots wait for blocks */
			return 0;
		int w = 0;
		for (int i = 0; i < n; i++)
			if (e->order[i] != v)
				e->order[w++] = e->order[i];
		n = w;
	}
	for (int i = 0; i < n; i++) {
		slot *s = &e->slots[e->order[i]];
		kv_reserve(e, s, upto(e, s));
	}
	return n;
}

static int prefill_upto(const pm_engine *e, const slot *s)
{
	int left = s->prefill_end - s->n_kv;
	return s->n_kv + (left < e->cfg.prefill_chunk ? left : e->cfg.prefill_chunk);
}

static int decode_upto(const pm_engine *e, const slot *s)
{
	return s->n_kv + 1 + s->n_draft;
}

/* Slots in state st that are not busy, oldest admission first, into e->order. */
static int collect(pm_engine *e, int st)
{
	int n = 0;
	for (int i = 0; i < e->cfg.b_max; i++)
		if (e->slots[i].state == st && !e->slots[i].busy)
			e->order[n++] = i;
	for (int i = 1; i < n; i++) /* insertion sort by admission order */
		for (int j = i; j > 0 && e->slots[e->order[j]].admit_order <
						 e->slots[e->order[j - 1]].admit_order;
		     j--) {
			int t = e->order[j];
			e->order[j] = e->order[j - 1];
			e->order[j - 1] = t;
		}
	return n;
}

/*
 * run_prefill advances every prefilling slot by one chunk. Rows are laid out
 * slot by slot and run in forwards of at most max_rows rows. A slot whose
 * prefill ends samples its next token from its last row's logits (its first
 * output token, or the next one when it is being recomputed) and decodes from
 * the next step on.
 */
static void run_prefill(pm_engine *e)
{
	int ns = collect(e, SLOT_PREFILL);
	if (ns == 0)
		return;
	int metrics = !e->cfg.no_metrics;
	int64_t t0 = metrics ? pm_now() : 0;
	ns = reserve(e, ns, prefill_upto);
	int total = 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		s->busy = 1;
		s->pf_start = s->n_kv;
		s->n_kv = prefill_upto(e, s); /* positions pf_start..n_kv-1 run now */
		s->n_emitted = 0;
		s->fin = PM_FINISH_NONE;
		total += s->n_kv - s->pf_start;
	}
	int si = 0, p = ns > 0 ? e->slots[e->order[0]].pf_start : 0;
	while (si < ns) {
		int n = 0, nl = 0;
		while (si < ns && n < e->max_rows) {
			const slot *s = &e->slots[e->order[si]];
			e->row_tok[n] = e->reqs[s->req].seq[p];
			e->row_pos[n] = p;
			e->row_slot[n] = e->order[si];
			n++;
			if (++p == s->n_kv) {
				if (p == s->prefill_end)
					e->logit_row[nl++] = n - 1;
				if (++si < ns)
					p = e->slots[e->order[si]].pf_start;
			}
		}
		forward_rows(e, n, nl);
		for (int i = 0; i < nl; i++) {
			slot *s = &e->slots[e->row_slot[e->logit_row[i]]];
			req *r = &e->reqs[s->req];
			s->emit0 = r->n_seq;
			float *l = e->logits + (size_t)i * e->vocab;
			if (r->p.grammar)
				gmask_apply(e, r, l);
			int32_t tok = sample_at(e, r, (int)(s - e->slots), 0, l);
			if (r->p.grammar)
				gmask_accept(e, r, tok);
			s->fin = emit_token(e, r, tok);
			s->n_emitted = 1;
			s->state = SLOT_DECODE;
		}
	}
	int64_t t1 = metrics ? pm_now() : 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		e->reqs[s->req].st.prefill_tokens += s->n_kv - s->pf_start;
		prefix_commit(e, s, e->reqs[s->req].seq);
		if (s->n_emitted)
			deliver(e, s);
	}
	if (metrics) {
		e->met.prefill_ns += t1 - t0;
		e->met.prefill_tokens += total;
		metrics_step_record(e, PM_PHASE_PREFILL, ns, total, t1 - t0);
	}
}

/*
 * run_decode runs one forward over every decoding slot that did not just
 * finish its prefill: the slot's last token at its next position, plus its
 * draft tokens when speculating. Each draft position is accepted while the
 * token sampled there equals the draft; the first mismatch is emitted in the
 * draft's place and the K/V of the rejected positions is rolled back.
 */
static void run_decode(pm_engine *e)
{
	int ns = collect(e, SLOT_DECODE);
	if (ns == 0)
		return;
	int metrics = !e->cfg.no_metrics;
	int64_t t0 = metrics ? pm_now() : 0;
	int drafted = 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		req *r = &e->reqs[s->req];
		spec_draft(e, r, s);
		if (r->p.grammar)
			gmask_trim_draft(e, r, s);
		drafted += s->n_draft;
	}
	drafted = spec_ration(e, ns, drafted);
	if (e->cfg.spec_k > 0 && metrics) {
		int64_t t1 = pm_now();
		e->met.draft_ns += t1 - t0;
		e->met.decode_ns += t1 - t0;
		metrics_time_cost(&e->met.draft_by_bs[ns], t1 - t0);
		metrics_step_record(e, PM_PHASE_DRAFT, ns, drafted, t1 - t0);
		t0 = t1;
	}
	if (drafted > 0) { /* drafts never cost a preemption: drop them first */
		int need = 0;
		for (int i = 0; i < ns; i++) {
			const slot *s = &e->slots[e->order[i]];
			need += kv_blocks_short(e, s, decode_upto(e, s));
		}
		if (need > e->n_free)
			for (int i = 0; i < ns; i++)
				e->slots[e->order[i]].n_draft = 0;
	}
	ns = reserve(e, ns, decode_upto);
	if (ns == 0)
		return;
	int n = 0;
	drafted = 0;
	for (int i = 0; i < ns; i++) {
		int sx = e->order[i];
		slot *s = &e->slots[sx];
		const req *r = &e->reqs[s->req];
		s->row0 = n;
		for (int j = 0; j <= s->n_draft; j++) {
			e->row_tok[n] = j == 0 ? r->seq[r->n_seq - 1] : s->draft[j - 1];
			e->row_pos[n] = s->n_kv + j;
			e->row_slot[n] = sx;
			e->logit_row[n] = n;
			n++;
		}
		drafted += s->n_draft;
	}
	forward_rows(e, n, n);
	int emitted_all = 0;
	for (int i = 0; i < ns; i++) {
		slot *s = &e->slots[e->order[i]];
		req *r = &e->reqs[s->req];
		int accepted = 0, fin = PM_FINISH_NONE, j = 0;
		s->emit0 = r->n_seq;
		for (; j <= s->n_draft; j++) {
			float *l = e->logits + (size_t)(s->row0 + j) * e->vocab;
			if (r->p.grammar)
				gmask_apply(e, r, l);
			int32_t tok = sample_at(e, r, (int)(s - e->slots), j, l);
			if (r->p.grammar)
				gmask_accept(e, r, tok);
			fin = emit_token(e, r, tok);
			int match = j < s->n_draft && tok == s->draft[j];
			accepted += match;
			if (fin || !match)
				break;
		}
		s->n_emitted = j + 1; /* the loop always ends by break at j <= n_draft */
		s->fin = fin;
		emitted_all += s->n_emitted;
		r->st.decode_tokens += s->n_emitted;
		r->st.draft_tokens += s->n_draft;
		r->st.accepted_tokens += accepted;
		spec_verified(r, s->n_draft, accepted);
		if (metrics)
			for (int d = 0; d < s->n_draft; d++) {
				e->met.draft_count[d]++;
				e->met.accept_count[d] += d < accepted;
			}
		/* keep the K/V of the last token and the accepted drafts; a
		 * finishing slot publishes it too, then releases its blocks */
		s->n_kv += 1 + accepted;
		if (!fin)
			kv_truncate(e, s, s->n_kv);
		prefix_commit(e, s, r->seq);
	}
	int64_t t1 = metrics ? pm_now() : 0;
	for (int i = 0; i < ns; i++)
		deliver(e, &e->slots[e->order[i]]);
	if (metrics) {
		int64_t d = t1 - t0;
		e->met.decode_ns += d;
		e->met.decode_tokens += emitted_all;
		if (drafted > 0) {
			e->met.verify_ns += d;
			metrics_time_cost(&e->met.verify_by_bs[ns], d);
			metrics_step_record(e, PM_PHASE_VERIFY, ns, n, d);
		} else {
			metrics_time_cost(&e->met.decode_by_bs[ns], d);
			metrics_step_record(e, PM_PHASE_DECODE, ns, n, d);
		}
	}
}

/* Ends request ri (frees its slot if it holds one); its stats stay readable
 * until the next call on the engine. The caller stamps its finish time. */
void sched_finish(pm_engine *e, int ri, int reason)
{
	req *r = &e->reqs[ri];
	if (r->slot >= 0)
		release_slot(e, r->slot);
	r->st.finish = reason;
	if (r->p.grammar && r->st.grammar == PM_GRAMMAR_NONE)
		r->st.grammar = PM_GRAMMAR_INCOMPLETE;
	if (!e->cfg.no_metrics) {
		e->met.requests_finished++;
		e->met.prompt_tokens += r->st.prompt_tokens;
		e->met.completion_tokens += r->st.completion_tokens;
	}
	retire(e, ri);
}

/* sched_step runs one step: admits what fits, advances every prefilling
 * slot by a chunk, decodes every decoding slot, and stamps the outputs. */
void sched_step(pm_engine *e)
{
	for (int i = 0; i < e->cfg.b_max; i++)
		e->slots[i].busy = 0;
	admit_waiting(e, e->cfg.no_metrics ? 0 : pm_now());
	run_prefill(e);
	run_decode(e);
	stamp_outputs(e);
}
