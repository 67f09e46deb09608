package constraint

import (
	"container/list"
	"sync"
)

// Cache is a bounded LRU of compiled grammars (or anything else) by their
// text. It is safe for concurrent use.
type Cache[V any] struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front: most recent
	items map[string]*list.Element
	hits  uint64
	miss  uint64
}

type cacheEntry[V any] struct {
	key string
	val V
}

// NewCache makes a cache of at most max entries (max ≥ 1).
func NewCache[V any](max int) *Cache[V] {
	if max < 1 {
		panic("BUG: constraint.NewCache: max < 1")
	}
	return &Cache[V]{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

// Get returns the value cached for key.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		c.hits++
		return e.Value.(*cacheEntry[V]).val, true
	}
	c.miss++
	var zero V
	return zero, false
}

// Add caches val for key, evicting the least recently used entry when
// full; it returns the evicted value, if any (for freeing).
func (c *Cache[V]) Add(key string, val V) (evicted V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		e.Value.(*cacheEntry[V]).val = val
		return evicted, false
	}
	c.items[key] = c.ll.PushFront(&cacheEntry[V]{key, val})
	if c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		ent := last.Value.(*cacheEntry[V])
		delete(c.items, ent.key)
		return ent.val, true
	}
	return evicted, false
}

// Len is the number of cached entries.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Stats are the hits and misses of Get so far.
func (c *Cache[V]) Stats() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.miss
}
