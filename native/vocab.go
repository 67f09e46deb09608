package native

// The byte-level vocabulary every picometer model uses (the mkmodel tool
// writes it into tokenizer.ggml.* metadata; the daemon tokenizes with it).
// Ids 0..255 are the raw bytes; the control tokens follow.
const (
	TokBOS       = 256 // <|bos|>: starts every prompt
	TokEOS       = 257 // <|eos|>: end of text; generation stops on it
	TokPad       = 258 // <|pad|>: padding, never generated on purpose
	TokSystem    = 259 // <|system|>: starts a system message (chat template)
	TokUser      = 260 // <|user|>: starts a user message (chat template)
	TokAssistant = 261 // <|assistant|>: starts an assistant message (chat template)
	TokEnd       = 262 // <|end|>: ends a chat message; a chat turn stops on it
	TokUnk       = 263 // <|unk|>: unknown

	// VocabSize is the number of tokens: 256 bytes and 8 control tokens.
	VocabSize = 264
)

// ControlTokens are the texts of the control tokens, indexed by id-256.
var ControlTokens = [VocabSize - 256]string{
	"<|bos|>", "<|eos|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|unk|>",
}

// IsByte reports whether tok is a byte token (0..255).
func IsByte(tok int32) bool { return tok >= 0 && tok < 256 }
