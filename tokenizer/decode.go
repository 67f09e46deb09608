package tokenizer

// Piece returns the bytes token id stands for (nil for an id outside the
// vocabulary): a byte token's byte, SPM's ▁ as a space, a byte-level
// token's bytes, a control token's text. The bytes of one token need not
// be whole UTF-8 characters: a streaming caller holds partial characters
// back across tokens.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.piece) {
		return nil
	}
	return t.piece[id]
}

// IsControl reports whether id is a control token (BOS, EOS, chat markers):
// a token the model emits that is no text for the user.
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.isCtl) && t.isCtl[id]
}

// Decode appends the text of ids to dst, control tokens included. With
// add_space_prefix (SentencePiece) one leading space is dropped, as
// Hugging Face's Strip decoder and llama.cpp do.
func (t *Tokenizer) Decode(dst []byte, ids []int32) []byte {
	start := len(dst)
	for _, id := range ids {
		dst = append(dst, t.Piece(id)...)
	}
	if t.kind == kindSPM && t.v.AddSpacePrefix && len(dst) > start && dst[start] == ' ' {
		dst = append(dst[:start], dst[start+1:]...)
	}
	return dst
}

// BOS, EOS, EOT and EOM return the special ids (-1 when the vocabulary has
// none); AddBOS and AddEOS say whether a prompt starts with BOS and ends
// with EOS.
func (t *Tokenizer) BOS() int32   { return t.v.BOS }
func (t *Tokenizer) EOS() int32   { return t.v.EOS }
func (t *Tokenizer) EOT() int32   { return t.v.EOT }
func (t *Tokenizer) EOM() int32   { return t.v.EOM }
func (t *Tokenizer) AddBOS() bool { return t.v.AddBOS }
func (t *Tokenizer) AddEOS() bool { return t.v.AddEOS }
