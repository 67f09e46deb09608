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
func (a *Aggregator) Expire(now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	removed := 0
	for key, t := range a.targets {
		t.mu.Lock()
		if t.connected == 0 && now.Sub(t.idleSince) >= a.expireAfter {
			for _, s := range t.series {
				s.unregister()
			}
			t.series = nil
			for id := range t.boots {
				delete(a.boots, id)
			}
			delete(a.targets, key)
			removed++
			a.log.Info("daemon series expired", "model", key.model, "engine", key.engine)
		} else {
			t.foldDeadBoots()
		}
		t.mu.Unlock()
	}
	return removed
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
