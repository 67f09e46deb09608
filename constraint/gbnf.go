package constraint

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits bound what a translator may produce.
type Limits struct {
	MaxRules  int // rules in one grammar
	MaxBytes  int // bytes of grammar text
	MaxDepth  int // nesting of inline schemas (or regex groups)
	MaxRepeat int // the largest count a {m,n} may carry
}

// DefaultLimits are the limits the daemon uses.
var DefaultLimits = Limits{MaxRules: 4096, MaxBytes: 1 << 20, MaxDepth: 64, MaxRepeat: 4096}

// MaxSpace is the most whitespace allowed between two JSON tokens.
const MaxSpace = 8

// Error is a constraint that cannot be translated. Keyword names the
// schema keyword (or regex construct, or request field part) at fault.
type Error struct {
	Keyword string // e.g. "format", "oneOf", "maxLength", "(?=" ; "" when none applies
	Path    string // JSON pointer of the schema at fault ("" at the root)
	Msg     string
}

func (e *Error) Error() string {
	at := ""
	if e.Path != "" {
		at = " at " + e.Path
	}
	if e.Keyword != "" {
		return fmt.Sprintf("'%s'%s: %s", e.Keyword, at, e.Msg)
	}
	return e.Msg + at
}

// builder collects named rules, in order, under the limits.
type builder struct {
	lim   Limits
	rules map[string]string
	order []string
	size  int
	err   *Error
}

func newBuilder(lim Limits) *builder {
	if lim.MaxRules == 0 {
		lim = DefaultLimits
	}
	return &builder{lim: lim, rules: map[string]string{}}
}

// fail records the first error.
func (b *builder) fail(kw, path, format string, a ...any) {
	if b.err == nil {
		b.err = &Error{Keyword: kw, Path: path, Msg: fmt.Sprintf(format, a...)}
	}
}

// define sets rule name to body (once; later definitions of the same name
// are ignored, so shared rules may be defined by whoever needs them).
func (b *builder) define(name, body string) string {
	if _, ok := b.rules[name]; ok {
		return name
	}
	b.rules[name] = body
	b.order = append(b.order, name)
	b.size += len(name) + len(body) + 6
	if len(b.order) > b.lim.MaxRules {
		b.fail("", "", "the grammar would need more than %d rules", b.lim.MaxRules)
	}
	if b.size > b.lim.MaxBytes {
		b.fail("", "", "the grammar would exceed %d bytes", b.lim.MaxBytes)
	}
	return name
}

// reserve claims a fresh rule name with the given prefix; set defines it later.
func (b *builder) fresh(prefix string) string {
	name := prefix
	for i := 1; ; i++ {
		if _, ok := b.rules[name]; !ok {
			break
		}
		name = prefix + "-" + strconv.Itoa(i)
	}
	b.rules[name] = "" // placeholder, keeps the name taken
	return name
}

// set gives a fresh rule its body.
func (b *builder) set(name, body string) {
	delete(b.rules, name)
	b.define(name, body)
}

// text renders the grammar, root first.
func (b *builder) text() string {
	var sb strings.Builder
	sb.Grow(b.size)
	for _, n := range b.order {
		sb.WriteString(n)
		sb.WriteString(" ::= ")
		sb.WriteString(b.rules[n])
		sb.WriteByte('\n')
	}
	return sb.String()
}

// ruleName makes s a valid GBNF rule name (lowercase letters, digits, '-').
func ruleName(s string) string {
	var sb strings.Builder
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			sb.WriteRune(c)
		default:
			sb.WriteByte('-')
		}
	}
	n := strings.Trim(sb.String(), "-")
	if len(n) > 32 {
		n = n[:32]
	}
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		n = "r" + n
	}
	return n
}

// lit writes s as a GBNF string literal.
func lit(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range s {
		sb.WriteString(escRune(c, '"'))
	}
	sb.WriteByte('"')
	return sb.String()
}

// escRune escapes one code point for a literal (q = '"') or class (q = ']').
func escRune(c rune, q rune) string {
	switch {
	case c == '\\':
		return `\\`
	case c == q, q == ']' && (c == '[' || c == '^' || c == '-'):
		return `\` + string(c)
	case c == '\n':
		return `\n`
	case c == '\r':
		return `\r`
	case c == '\t':
		return `\t`
	case c < 0x20 || c == 0x7f:
		return fmt.Sprintf(`\x%02X`, c)
	case c >= 0x80 && c < 0xa0, c == 0xfeff, c >= 0xd800 && c <= 0xdfff:
		return fmt.Sprintf(`\u%04X`, c)
	case c > 0xffff:
		return fmt.Sprintf(`\U%08X`, c)
	}
	return string(c)
}

// class writes code point ranges as a GBNF character class.
func class(ranges [][2]rune, negate bool) string {
	var sb strings.Builder
	sb.WriteByte('[')
	if negate {
		sb.WriteByte('^')
	}
	for _, r := range ranges {
		sb.WriteString(escRune(r[0], ']'))
		if r[1] != r[0] {
			sb.WriteByte('-')
			sb.WriteString(escRune(r[1], ']'))
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

// repeat writes item{lo,hi} (hi < 0: unbounded), simplified.
func repeat(item string, lo, hi int) string {
	switch {
	case hi == 0:
		return ""
	case lo == 0 && hi < 0:
		return item + "*"
	case lo == 1 && hi < 0:
		return item + "+"
	case lo == 0 && hi == 1:
		return item + "?"
	case lo == 1 && hi == 1:
		return item
	case hi < 0:
		return fmt.Sprintf("%s{%d,}", item, lo)
	case lo == hi:
		return fmt.Sprintf("%s{%d}", item, lo)
	}
	return fmt.Sprintf("%s{%d,%d}", item, lo, hi)
}
