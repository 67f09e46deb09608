package constraint

import (
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// FromRegex translates a regular expression (RE2 syntax, as Go's regexp
// reads it) into a GBNF grammar accepting exactly the texts the pattern
// matches in whole (the pattern is anchored at both ends, as vLLM's
// guided_regex is). Supported: literals, classes (with negation and case
// folding), '.', concatenation, alternation, groups, *, +, ?, {m,n} (n
// at most MaxRepeat), and ^ and $ at the pattern's ends. Refused by name:
// \b, \B, ^ or $ inside the pattern, and what RE2 itself refuses
// (backreferences, lookaround).
func FromRegex(pattern string, lim Limits) (string, error) {
	b := newBuilder(lim)
	root := b.fresh("root")
	e, err := regexExpr(pattern, b, false)
	if err != nil {
		return "", err
	}
	b.set(root, e)
	if b.err != nil {
		return "", b.err
	}
	return b.text(), nil
}

// regexExpr returns the GBNF expression of a pattern. inJSON: the text
// is inside a JSON string, so a literal '"', '\' or control character is
// written escaped and classes never yield one.
func regexExpr(pattern string, b *builder, inJSON bool) (string, *Error) {
	if len(pattern) > b.lim.MaxBytes/8 {
		return "", &Error{Keyword: "pattern", Msg: "the pattern is too long"}
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		kw := ""
		if se, ok := err.(*syntax.Error); ok {
			kw = se.Expr
		}
		return "", &Error{Keyword: kw, Msg: "the pattern is not supported: " + err.Error()}
	}
	re = re.Simplify()
	t := regexTr{b: b, inJSON: inJSON}
	e := t.expr(re, 0, true, true)
	if t.err != nil {
		return "", t.err
	}
	if b.err != nil {
		return "", b.err
	}
	return e, nil
}

type regexTr struct {
	b      *builder
	inJSON bool
	err    *Error
}

func (t *regexTr) fail(kw, msg string) string {
	if t.err == nil {
		t.err = &Error{Keyword: kw, Msg: msg}
	}
	return `""`
}

// expr translates re; atStart/atEnd say whether it begins/ends the pattern.
func (t *regexTr) expr(re *syntax.Regexp, depth int, atStart, atEnd bool) string {
	if t.err != nil {
		return `""`
	}
	if depth > t.b.lim.MaxDepth {
		return t.fail("", "the pattern nests too deeply")
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return t.fail("", "the pattern matches nothing")
	case syntax.OpEmptyMatch:
		return `""`
	case syntax.OpLiteral:
		var sb strings.Builder
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				if f := foldClass(r); f != "" {
					sb.WriteString(" " + f)
					continue
				}
			}
			sb.WriteString(" " + t.literal(r))
		}
		return "(" + strings.TrimSpace(sb.String()) + ")"
	case syntax.OpCharClass:
		return t.class(re.Rune)
	case syntax.OpAnyCharNotNL:
		return t.class([]rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune})
	case syntax.OpAnyChar:
		return t.class([]rune{0, utf8.MaxRune})
	case syntax.OpBeginLine, syntax.OpBeginText:
		if !atStart {
			return t.fail("^", "'^' is supported only at the start of the pattern")
		}
		return `""`
	case syntax.OpEndLine, syntax.OpEndText:
		if !atEnd {
			return t.fail("$", "'$' is supported only at the end of the pattern")
		}
		return `""`
	case syntax.OpWordBoundary:
		return t.fail(`\b`, `word boundaries (\b) are not supported`)
	case syntax.OpNoWordBoundary:
		return t.fail(`\B`, `\B is not supported`)
	case syntax.OpCapture:
		return t.expr(re.Sub[0], depth+1, atStart, atEnd)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, -1
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
		}
		if lo > t.b.lim.MaxRepeat || hi > t.b.lim.MaxRepeat {
			return t.fail("{", "a repetition count is over the limit")
		}
		inner := re.Sub[0]
		if hi < 0 && nullable(inner) {
			// (y*)*, (y?)+, (y|)* are y*: a grammar must not repeat
			// without end what can match nothing
			inner = nonEmpty(inner)
			if inner == nil {
				return t.fail(re.String(), "an unbounded repetition of something that can match the empty string is not supported")
			}
			lo = 0
		}
		sub := t.expr(inner, depth+1, false, false)
		if hi == 0 {
			return `""`
		}
		return "(" + repeat(sub, lo, hi) + ")"
	case syntax.OpConcat:
		parts := make([]string, len(re.Sub))
		for i, s := range re.Sub {
			parts[i] = t.expr(s, depth+1, atStart && i == 0, atEnd && i == len(re.Sub)-1)
		}
		return "(" + strings.Join(parts, " ") + ")"
	case syntax.OpAlternate:
		parts := make([]string, len(re.Sub))
		for i, s := range re.Sub {
			parts[i] = t.expr(s, depth+1, atStart, atEnd)
		}
		return "(" + strings.Join(parts, " | ") + ")"
	}
	return t.fail(re.String(), "this construct is not supported")
}

// nullable reports whether re matches the empty string.
func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpStar, syntax.OpQuest, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !nullable(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if nullable(s) {
				return true
			}
		}
	}
	return false
}

// nonEmpty returns a regexp y such that y* matches what re* matches and
// y is not nullable, for the shapes y*, y?, y+, y{0,n} and alternations
// with empty branches; nil for any other nullable re.
func nonEmpty(re *syntax.Regexp) *syntax.Regexp {
	if !nullable(re) {
		return re
	}
	switch re.Op {
	case syntax.OpCapture:
		return nonEmpty(re.Sub[0])
	case syntax.OpStar, syntax.OpQuest, syntax.OpPlus:
		return nonEmpty(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min <= 1 {
			return nonEmpty(re.Sub[0])
		}
	case syntax.OpAlternate:
		var subs []*syntax.Regexp
		for _, s := range re.Sub {
			if s.Op == syntax.OpEmptyMatch {
				continue
			}
			n := nonEmpty(s)
			if n == nil {
				return nil
			}
			subs = append(subs, n)
		}
		switch len(subs) {
		case 0:
			return nil
		case 1:
			return subs[0]
		}
		return &syntax.Regexp{Op: syntax.OpAlternate, Sub: subs, Flags: re.Flags}
	}
	return nil
}

// literal writes one code point.
func (t *regexTr) literal(r rune) string {
	if t.inJSON {
		switch {
		case r == '"':
			return lit(`\"`)
		case r == '\\':
			return lit(`\\`)
		case r < 0x20:
			return lit(quoteJSON(string(r))[1 : len(quoteJSON(string(r)))-1])
		}
	}
	return lit(string(r))
}

// class writes a class of rune pairs (lo, hi, lo, hi, …).
func (t *regexTr) class(rs []rune) string {
	var ranges [][2]rune
	for i := 0; i+1 < len(rs); i += 2 {
		lo, hi := rs[i], rs[i+1]
		if t.inJSON { // no '"', '\' nor control characters in a JSON string
			for _, cut := range [][2]rune{{0, 0x1f}, {'"', '"'}, {'\\', '\\'}} {
				if lo >= cut[0] && lo <= cut[1] {
					lo = cut[1] + 1
				}
			}
			if lo > hi {
				continue
			}
			if lo <= '"' && hi >= '"' {
				if lo < '"' {
					ranges = append(ranges, [2]rune{lo, '"' - 1})
				}
				lo = '"' + 1
			}
			if lo <= '\\' && hi >= '\\' {
				if lo < '\\' {
					ranges = append(ranges, [2]rune{lo, '\\' - 1})
				}
				lo = '\\' + 1
			}
			if lo > hi {
				continue
			}
		}
		ranges = append(ranges, [2]rune{lo, hi})
	}
	if len(ranges) == 0 {
		return t.fail("[", "a character class matches no character that can be written")
	}
	if len(ranges) > 256 {
		name := t.b.fresh("cls")
		t.b.set(name, class(ranges, false))
		return name
	}
	return class(ranges, false)
}

// foldClass is the case-folded class of r, "" when r has no other case.
func foldClass(r rune) string {
	rs := []rune{r}
	for f := simpleFold(r); f != r; f = simpleFold(f) {
		rs = append(rs, f)
	}
	if len(rs) == 1 {
		return ""
	}
	var ranges [][2]rune
	for _, x := range rs {
		ranges = append(ranges, [2]rune{x, x})
	}
	return class(ranges, false)
}

// FromChoices is the grammar of exactly one of the given strings.
func FromChoices(choices []string, lim Limits) (string, error) {
	if len(choices) == 0 {
		return "", &Error{Keyword: "guided_choice", Msg: "expected at least one choice"}
	}
	b := newBuilder(lim)
	alts := make([]string, len(choices))
	for i, c := range choices {
		alts[i] = lit(c)
	}
	b.define("root", strings.Join(alts, " | "))
	if b.err != nil {
		return "", b.err
	}
	return b.text(), nil
}

func simpleFold(r rune) rune { return unicode.SimpleFold(r) }
