package constraint

import "testing"

func TestCache(t *testing.T) {
	c := NewCache[int](2)
	c.Add("a", 1)
	c.Add("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now the most recent
		t.Fatalf("a: %v %v", v, ok)
	}
	if ev, ok := c.Add("c", 3); !ok || ev != 2 {
		t.Fatalf("evicted %v %v, want b's 2", ev, ok)
	}
	if _, ok := c.Get("b"); ok {
		t.Error("b still cached")
	}
	if v, ok := c.Get("c"); !ok || v != 3 || c.Len() != 2 {
		t.Errorf("c: %v %v, len %d", v, ok, c.Len())
	}
	if h, m := c.Stats(); h != 2 || m != 1 {
		t.Errorf("stats %d hits %d misses", h, m)
	}
}
