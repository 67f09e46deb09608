// Package jinja renders Jinja chat templates as Hugging Face renders them
// (transformers' Python Jinja2 environment and @huggingface/jinja):
// trim_blocks, lstrip_blocks, no autoescape, the loopcontrols extension
// and the {% generation %} tag.
//
// Stages, one file each: lex.go cuts the source into tokens in one linear
// pass; parse.go (statements) and expr.go (expressions) build the tree,
// with nesting capped at maxDepth; exec.go runs statements and eval.go
// evaluates expressions under the render budgets (output bytes, loop
// iterations, steps, macro call depth); filters.go, methods.go and
// tests.go are the filter, method and test tables; value.go and json.go
// hold the values and tojson. Whatever a template does beyond what is
// supported is a parse or render error naming it, never a panic.
package jinja

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on a template's source (it comes from a model file).
const (
	maxSource = 8 << 20 // bytes of template source (real ones are under 100 KiB)
	maxDepth  = 200     // nesting of blocks and expressions together
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tText
	tVarBegin   // {{
	tVarEnd     // }}
	tBlockBegin // {%
	tBlockEnd   // %}
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	line int32
	s    string
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tVarBegin:
		return "'{{'"
	case tVarEnd:
		return "'}}'"
	case tBlockBegin:
		return "'{%'"
	case tBlockEnd:
		return "'%}'"
	case tString:
		return fmt.Sprintf("string %q", t.s)
	case tText:
		return "text"
	}
	return "'" + t.s + "'"
}

// lex cuts src into tokens in one pass. Whitespace control is applied
// here: "-" inside a tag strips the white space beside it, lstrip_blocks
// removes spaces and tabs from a line's start to a {% or {# tag,
// trim_blocks the newline after %} or #}, and one trailing newline of the
// source is dropped (keep_trailing_newline=False).
func lex(src string) ([]token, error) {
	if len(src) > maxSource {
		return nil, fmt.Errorf("template of %d bytes is over the %d-byte limit", len(src), maxSource)
	}
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("template is not valid UTF-8")
	}
	src = strings.TrimSuffix(src, "\n")
	// about one token per 6 bytes of template, allocated once
	l := &lexer{src: src, line: 1, toks: make([]token, 0, len(src)/6+16)}
	trimNext := false
	for l.pos < len(l.src) {
		j := indexTag(src, l.pos)
		end := j
		if j < 0 {
			end = len(src)
		}
		raw := src[l.pos:end]
		text := raw
		if trimNext {
			text = strings.TrimLeft(text, " \t\r\n\v\f")
			trimNext = false
		}
		if j >= 0 {
			kind := src[j+1]
			mod := byte(0)
			if j+2 < len(src) {
				mod = src[j+2]
			}
			switch {
			case mod == '-':
				text = strings.TrimRight(text, " \t\r\n\v\f")
			case mod == '+' || kind == '{':
			default: // lstrip_blocks
				k := len(raw)
				for k > 0 && (raw[k-1] == ' ' || raw[k-1] == '\t') {
					k--
				}
				if k > 0 && raw[k-1] == '\n' || k == 0 && (l.pos == 0 || src[l.pos-1] == '\n') {
					text = strings.TrimRight(text, " \t")
				}
			}
		}
		if text != "" {
			l.emit(tText, text)
		}
		l.line += int32(strings.Count(raw, "\n"))
		if j < 0 {
			break
		}
		l.pos = j + 2
		if l.pos < len(src) && (src[l.pos] == '-' || src[l.pos] == '+') {
			l.pos++
		}
		var err error
		switch src[j+1] {
		case '#':
			trimNext, err = l.comment()
		case '{':
			trimNext, err = l.tag(tVarBegin, tVarEnd, '}')
		case '%':
			trimNext, err = l.tag(tBlockBegin, tBlockEnd, '%')
		}
		if err != nil {
			return nil, err
		}
	}
	l.emit(tEOF, "")
	return l.toks, nil
}

type lexer struct {
	src  string
	pos  int
	line int32
	toks []token
	open int // brackets open in the current tag
}

func (l *lexer) emit(k tokKind, s string) { l.toks = append(l.toks, token{k, l.line, s}) }

func (l *lexer) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", l.line, fmt.Sprintf(format, args...))
}

// indexTag finds the next "{{", "{%" or "{#" at or after from.
func indexTag(s string, from int) int {
	for {
		i := strings.IndexByte(s[from:], '{')
		if i < 0 {
			return -1
		}
		i += from
		if i+1 < len(s) && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
		from = i + 1
	}
}

// trimBlock applies trim_blocks after a %} or #}.
func (l *lexer) trimBlock() {
	if l.pos < len(l.src) && l.src[l.pos] == '\n' {
		l.pos++
		l.line++
	} else if l.pos+1 < len(l.src) && l.src[l.pos] == '\r' && l.src[l.pos+1] == '\n' {
		l.pos += 2
		l.line++
	}
}

func (l *lexer) comment() (bool, error) {
	k := strings.Index(l.src[l.pos:], "#}")
	if k < 0 {
		return false, l.errorf("comment {# is not closed")
	}
	body := l.src[l.pos : l.pos+k]
	l.line += int32(strings.Count(body, "\n"))
	l.pos += k + 2
	if strings.HasSuffix(body, "-") {
		return true, nil
	}
	l.trimBlock()
	return false, nil
}

// tag lexes the code of a {{ }} or {% %} up to its closing delimiter
// (close is '}' or '%'); it reports whether the close had a "-".
func (l *lexer) tag(begin, end tokKind, close byte) (bool, error) {
	l.emit(begin, "")
	l.open = 0
	start := l.line
	braces := 0
	src := l.src
	for {
		for l.pos < len(src) && isSpace(src[l.pos]) {
			if src[l.pos] == '\n' {
				l.line++
			}
			l.pos++
		}
		if l.pos >= len(src) {
			return false, fmt.Errorf("line %d: %s is not closed", start, map[byte]string{'}': "{{", '%': "{%"}[close])
		}
		rest := src[l.pos:]
		trim := false
		if rest[0] == '-' && len(rest) > 2 && rest[1] == close && rest[2] == '}' {
			trim = true
			rest = rest[1:]
		}
		if rest[0] == close && len(rest) > 1 && rest[1] == '}' && (close == '%' || braces == 0) {
			if trim {
				l.pos++
			}
			l.pos += 2
			l.emit(end, "")
			if !trim && close == '%' {
				l.trimBlock()
			}
			return trim, nil
		}
		c := rest[0]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			n := 1
			for n < len(rest) && isWord(rest[n]) {
				n++
			}
			l.emit(tName, rest[:n])
			l.pos += n
		case c >= '0' && c <= '9':
			n := 1
			for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
				n++
			}
			kind := tInt
			afterDot := len(l.toks) > 0 && l.toks[len(l.toks)-1].kind == tOp && l.toks[len(l.toks)-1].s == "."
			if !afterDot && n+1 < len(rest) && rest[n] == '.' && rest[n+1] >= '0' && rest[n+1] <= '9' {
				n += 2
				for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
					n++
				}
				kind = tFloat
			}
			l.emit(kind, rest[:n])
			l.pos += n
		case c == '\'' || c == '"':
			if err := l.str(c); err != nil {
				return false, err
			}
		default:
			op := ""
			if len(rest) > 1 {
				switch two := rest[:2]; two {
				case "**", "//", "==", "!=", "<=", ">=":
					op = two
				}
			}
			if op == "" {
				if !strings.ContainsRune("()[]{}.,:|~+-*/%<>=", rune(c)) {
					r, _ := utf8.DecodeRuneInString(rest)
					return false, l.errorf("unexpected character %q in a tag", r)
				}
				op = rest[:1]
			}
			switch op {
			case "(", "[", "{":
				if op == "{" {
					braces++
				}
				// brackets nested past the parser's cap fail here, before
				// the rest of a hostile tag is lexed
				if l.open++; l.open > maxDepth {
					return false, l.errorf("brackets nested deeper than %d levels", maxDepth)
				}
			case ")", "]", "}":
				if op == "}" {
					braces--
				}
				l.open--
			}
			l.emit(tOp, op)
			l.pos += len(op)
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// str lexes a string literal with Python's escapes (\n, \t, \xHH,
// \uHHHH, \UHHHHHHHH, …; an unknown escape keeps its backslash).
func (l *lexer) str(quote byte) error {
	src := l.src
	i := l.pos + 1
	var sb strings.Builder
	start := l.line
	for {
		if i >= len(src) {
			return fmt.Errorf("line %d: string literal is not closed", start)
		}
		c := src[i]
		if c == quote {
			break
		}
		if c == '\n' {
			l.line++
		}
		if c != '\\' || i+1 >= len(src) {
			sb.WriteByte(c)
			i++
			continue
		}
		e := src[i+1]
		i += 2
		switch e {
		case 'n':
			sb.WriteByte('\n')
		case 't':
			sb.WriteByte('\t')
		case 'r':
			sb.WriteByte('\r')
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'v':
			sb.WriteByte('\v')
		case 'a':
			sb.WriteByte('\a')
		case '0':
			sb.WriteByte(0)
		case '\\', '\'', '"':
			sb.WriteByte(e)
		case '\n':
			l.line++
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			r, ok := hexRune(src, i, n)
			if !ok {
				return l.errorf("bad \\%c escape in a string", e)
			}
			i += n
			if r >= 0xd800 && r < 0xdc00 && e == 'u' && i+1 < len(src) && src[i] == '\\' && src[i+1] == 'u' {
				if lo, ok := hexRune(src, i+2, 4); ok && lo >= 0xdc00 && lo < 0xe000 {
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
					i += 6
				}
			}
			if r > utf8.MaxRune {
				return l.errorf("bad \\%c escape in a string", e)
			}
			sb.WriteRune(r)
		default:
			sb.WriteByte('\\')
			sb.WriteByte(e)
		}
	}
	l.emit(tString, sb.String())
	l.pos = i + 1
	return nil
}

func hexRune(s string, i, n int) (rune, bool) {
	if i+n > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+n]) {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
