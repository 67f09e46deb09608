package sidecar

import (
	"slices"
	"time"
)

// This file is expiry: a target whose connections all closed keeps its
// series for ExpireAfter, then loses them; boots that stopped speaking are
// folded so a target keeps at most MaxDeadBoots. aggregate_test.go
// (TestExpiry) covers it.

// Expire removes every target whose connections all closed ExpireAfter ago
// or earlier, and folds the oldest disconnected boots of live targets beyond
// MaxDeadBoots into their retired totals. It returns the targets removed.
//
// The global lock is never held across the pass: the targets are listed
// under it, then each is checked and removed under it on its own, and its
// series are dropped whole (registry.dropOwner, O(families)) after it is
// released; so a hello or a scrape waits for one target at most.
func (a *Aggregator) Expire(now time.Time) int {
	a.mu.Lock()
	ts := make([]*target, 0, len(a.targets))
	for _, t := range a.targets {
		ts = append(ts, t)
	}
	a.mu.Unlock()
	removed := 0
	for _, t := range ts {
		if a.expireOne(t, now) {
			a.reg.dropOwner(t.own)
			removed++
			a.log.Info("daemon series expired", "model", t.key.model, "engine", t.key.engine)
		}
	}
	return removed
}

// expireOne removes t from the aggregator if it has expired, else folds its
// dead boots.
func (a *Aggregator) expireOne(t *target, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.targets[t.key] != t {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.connected == 0 && now.Sub(t.idleSince) >= a.expireAfter {
		t.series = nil
		for id := range t.boots {
			delete(a.boots, id)
		}
		delete(a.targets, t.key)
		return true
	}
	t.foldDeadBoots()
	return false
}

func (t *target) foldDeadBoots() {
	for {
		var dead []*boot
		for _, b := range t.order {
			if b.conns == 0 {
				dead = append(dead, b)
			}
		}
		if len(dead) <= MaxDeadBoots {
			return
		}
		oldest := dead[0]
		for _, b := range dead[1:] {
			if b.disconnects.Before(oldest.disconnects) {
				oldest = b
			}
		}
		for i := range oldest.ints {
			t.retInts[i] = satAdd(t.retInts[i], oldest.ints[i])
		}
		for i := range oldest.flts {
			t.retFlts[i] += oldest.flts[i]
		}
		delete(t.boots, oldest.id)
		delete(t.a.boots, oldest.id)
		t.order = slices.DeleteFunc(t.order, func(b *boot) bool { return b == oldest })
	}
}
