package tokenizer

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
)

// wordCache remembers the BPE result of recent pre-tokenized pieces: text
// repeats its words, and a cached word costs one hash instead of a merge
// loop. It is direct-mapped (a new word replaces the slot's old one), lock
// free (each slot holds an immutable entry) and bounded: 4096 words of at
// most 32 bytes.
type wordCache struct {
	seed  maphash.Seed
	slots [cacheSlots]atomic.Pointer[cacheEntry]
}

const (
	cacheSlots   = 4096
	cacheMaxWord = 32
)

type cacheEntry struct {
	word string
	ids  []int32
}

func newWordCache() *wordCache { return &wordCache{seed: maphash.MakeSeed()} }

// get appends the cached ids of word to dst.
func (c *wordCache) get(dst []int32, word string) ([]int32, bool) {
	if len(word) > cacheMaxWord {
		return dst, false
	}
	e := c.slots[maphash.String(c.seed, word)%cacheSlots].Load()
	if e == nil || e.word != word {
		return dst, false
	}
	return append(dst, e.ids...), true
}

func (c *wordCache) put(word string, ids []int32) {
	if len(word) > cacheMaxWord {
		return
	}
	c.slots[maphash.String(c.seed, word)%cacheSlots].Store(&cacheEntry{strings.Clone(word), slices.Clone(ids)})
}
