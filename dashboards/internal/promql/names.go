// Package promql extracts the metric names a PromQL expression selects,
// so tests can check every name in dashboards and rules against schema/.
//
// It is a lexer, not a parser: it finds identifiers in metric-name position
// (not a function, aggregation or keyword, not a label name inside {} or a
// grouping list) plus {__name__="…"} matchers. Grafana variables ($x,
// ${x}, $__rate_interval) are skipped. Whether an expression parses is left
// to Prometheus (the e2e check sends every expression to a real one).
package promql

import (
	"fmt"
	"strings"
)

// keywords are PromQL words that are never metric names.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true,
	// aggregation operators (may be followed by a by/without clause, not "(")
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
}

// listKeywords are followed by a parenthesised list of label names.
var listKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// Names returns the metric names expr selects, each once, in order of first
// appearance. It returns an error for an unterminated string, bracket,
// brace or label list.
func Names(expr string) ([]string, error) {
	l := lexer{s: expr, seen: map[string]bool{}}
	if err := l.run(); err != nil {
		return nil, err
	}
	return l.names, nil
}

type lexer struct {
	s     string
	i     int
	names []string
	seen  map[string]bool
}

func (l *lexer) add(name string) {
	if !l.seen[name] {
		l.seen[name] = true
		l.names = append(l.names, name)
	}
}

func (l *lexer) run() error {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			l.i++
		case c == '#':
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
		case c == '"' || c == '\'' || c == '`':
			if _, err := l.str(); err != nil {
				return err
			}
		case c == '[':
			end := strings.IndexByte(l.s[l.i:], ']')
			if end < 0 {
				return fmt.Errorf("unterminated [ at offset %d", l.i)
			}
			l.i += end + 1
		case c == '{':
			if err := l.matchers(); err != nil {
				return err
			}
		case c == '$':
			l.variable()
		case isDigit(c) || c == '.' && l.i+1 < len(l.s) && isDigit(l.s[l.i+1]):
			l.number()
		case isIdentStart(c):
			id := l.ident()
			lower := strings.ToLower(id)
			next := l.peek()
			switch {
			case listKeywords[lower]:
				if next == '(' {
					if err := l.skipList(); err != nil {
						return err
					}
				}
			case keywords[lower], next == '(':
				// an operator, aggregation or function call
			default:
				l.add(id)
			}
		default:
			l.i++
		}
	}
	return nil
}

// peek returns the next non-space byte without consuming it (0 at the end).
func (l *lexer) peek() byte {
	for j := l.i; j < len(l.s); j++ {
		if c := l.s[j]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

func (l *lexer) skipSpace() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t' || l.s[l.i] == '\n' || l.s[l.i] == '\r') {
		l.i++
	}
}

func (l *lexer) ident() string {
	start := l.i
	for l.i < len(l.s) && isIdent(l.s[l.i]) {
		l.i++
	}
	return l.s[start:l.i]
}

// str consumes a quoted string and returns its (unescaped for \" and \\)
// contents.
func (l *lexer) str() (string, error) {
	q, start := l.s[l.i], l.i
	l.i++
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == q:
			l.i++
			return b.String(), nil
		case c == '\\' && q != '`' && l.i+1 < len(l.s):
			b.WriteByte(l.s[l.i+1])
			l.i += 2
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	return "", fmt.Errorf("unterminated string at offset %d", start)
}

// matchers consumes {label op "value", …}, adding the value of a
// __name__="…" matcher as a metric name.
func (l *lexer) matchers() error {
	start := l.i
	l.i++ // {
	for {
		l.skipSpace()
		if l.i >= len(l.s) {
			return fmt.Errorf("unterminated { at offset %d", start)
		}
		switch c := l.s[l.i]; {
		case c == '}':
			l.i++
			return nil
		case c == ',':
			l.i++
		case isIdentStart(c):
			label := l.ident()
			l.skipSpace()
			op := ""
			for l.i < len(l.s) && strings.IndexByte("=!~", l.s[l.i]) >= 0 {
				op += string(l.s[l.i])
				l.i++
			}
			l.skipSpace()
			if l.i >= len(l.s) || strings.IndexByte("\"'`", l.s[l.i]) < 0 {
				return fmt.Errorf("label %s at offset %d: want a quoted value", label, l.i)
			}
			v, err := l.str()
			if err != nil {
				return err
			}
			if label == "__name__" && op == "=" {
				l.add(v)
			}
		case c == '"' || c == '\'' || c == '`':
			// a quoted metric name or label (Prometheus 3): treat as a name only
			// when used alone, which these dashboards never do; skip it.
			if _, err := l.str(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected %q in label matchers at offset %d", c, l.i)
		}
	}
}

// skipList consumes a parenthesised list of label names.
func (l *lexer) skipList() error {
	l.skipSpace()
	start := l.i
	end := strings.IndexByte(l.s[l.i:], ')')
	if end < 0 {
		return fmt.Errorf("unterminated label list at offset %d", start)
	}
	l.i += end + 1
	return nil
}

// variable consumes a Grafana variable: $name, ${name} or ${name:format}.
func (l *lexer) variable() {
	l.i++ // $
	if l.i < len(l.s) && l.s[l.i] == '{' {
		if end := strings.IndexByte(l.s[l.i:], '}'); end >= 0 {
			l.i += end + 1
			return
		}
	}
	l.ident()
}

// number consumes a number or duration: 0.99, 1e-9, 0x1f, 5m, 1h30m.
func (l *lexer) number() {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case isIdent(c) || c == '.':
			l.i++
		case (c == '+' || c == '-') && (l.s[l.i-1] == 'e' || l.s[l.i-1] == 'E'):
			l.i++
		default:
			return
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }
