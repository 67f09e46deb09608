package tokenizer

// trie matches the texts of the tokens written literally in rendered
// templates (control, user-defined and unknown tokens: llama.cpp's
// "special" attribute set, Hugging Face's added tokens) at a position of a
// text: the longest one wins, as Hugging Face's added-token regex and
// llama.cpp's partitioning do.
type trie struct {
	first [256]bool        // bytes some token starts with
	edge  map[uint32]int32 // node<<8 | byte → child node (node < 2^24)
	id    []int32          // token ending at node, or -1
}

func newTrie() *trie { return &trie{edge: map[uint32]int32{}, id: []int32{-1}} }

func (t *trie) add(text string, id int32) {
	if text == "" || len(t.id) >= 1<<24-len(text) {
		return
	}
	t.first[text[0]] = true
	node := int32(0)
	for i := 0; i < len(text); i++ {
		k := uint32(node)<<8 | uint32(text[i])
		next, ok := t.edge[k]
		if !ok {
			next = int32(len(t.id))
			t.id = append(t.id, -1)
			t.edge[k] = next
		}
		node = next
	}
	t.id[node] = id
}

// match returns the id and length of the longest token at the start of s
// (n == 0 when none).
func (t *trie) match(s string) (id int32, n int) {
	if len(s) == 0 || !t.first[s[0]] {
		return -1, 0
	}
	node := int32(0)
	id = -1
	for i := 0; i < len(s); i++ {
		next, ok := t.edge[uint32(node)<<8|uint32(s[i])]
		if !ok {
			break
		}
		node = next
		if t.id[node] >= 0 {
			id, n = t.id[node], i+1
		}
	}
	return id, n
}
