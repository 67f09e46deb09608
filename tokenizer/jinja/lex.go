// Package jinja renders the subset of Jinja that Hugging Face chat
// templates use, with Hugging Face's settings (trim_blocks, lstrip_blocks,
// no autoescape): {{ }}, {% if/elif/else %}, {% for %} with loop.*,
// {% set %} (names and namespace attributes), comments, "-" whitespace
// control; literals, names, attributes, subscripts and slices, calls,
// filters, tests ("is"), arithmetic, comparison, and/or/not, in, ~, and
// conditional expressions. Whatever a template uses beyond that is a
// parse or render error naming it, never a panic.
package jinja

import (
	"fmt"
	"strings"
)

// A chunk of template source: text, an expression {{ }} or a statement {% %}.
type chunk struct {
	kind int // chunkText, chunkExpr, chunkStmt
	src  string
	line int
}

const (
	chunkText = iota
	chunkExpr
	chunkStmt
)

// split cuts src into chunks, applying "-" whitespace control, and
// trim_blocks/lstrip_blocks to statements and comments.
func split(src string) ([]chunk, error) {
	var out []chunk
	line := 1
	i := 0
	trimNext := false // strip leading white space of the next text
	for i < len(src) {
		j := indexOpen(src, i)
		text := src[i:]
		if j >= 0 {
			text = src[i:j]
		}
		if trimNext {
			text = strings.TrimLeft(text, " \t\r\n")
			trimNext = false
		}
		if j < 0 {
			out = append(out, chunk{chunkText, text, line})
			break
		}
		open := src[j : j+2]
		inner := j + 2
		stripLeft := inner < len(src) && src[inner] == '-'
		if stripLeft {
			inner++
		}
		if stripLeft {
			text = strings.TrimRight(text, " \t\r\n")
		} else if open != "{{" && !(inner < len(src) && src[inner] == '+') {
			// lstrip_blocks: white space from the line start to a block
			ls := strings.LastIndexByte(src[:j], '\n') + 1
			if ls >= i && strings.Trim(src[ls:j], " \t") == "" {
				text = strings.TrimRight(text, " \t")
			}
		}
		out = append(out, chunk{chunkText, text, line})
		line += strings.Count(src[i:j], "\n")
		closeTag := map[string]string{"{{": "}}", "{%": "%}", "{#": "#}"}[open]
		k := indexClose(src, inner, closeTag, open == "{#")
		if k < 0 {
			return nil, fmt.Errorf("line %d: %s is not closed", line, open)
		}
		body := src[inner:k]
		end := k + 2
		if strings.HasSuffix(body, "-") {
			body = body[:len(body)-1]
			trimNext = true
		} else if open != "{{" && end < len(src) && src[end] == '\n' {
			end++ // trim_blocks: the newline after a block
		}
		switch open {
		case "{{":
			out = append(out, chunk{chunkExpr, body, line})
		case "{%":
			out = append(out, chunk{chunkStmt, strings.TrimSpace(body), line})
		}
		line += strings.Count(src[j:end], "\n")
		i = end
	}
	return out, nil
}

func indexOpen(s string, from int) int {
	for i := from; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// indexClose finds the closing tag, skipping string literals in code.
func indexClose(s string, from int, tag string, comment bool) int {
	var quote byte
	for i := from; i+1 < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case !comment && (c == '\'' || c == '"'):
			quote = c
		case c == tag[0] && s[i+1] == tag[1]:
			return i
		}
	}
	return -1
}
