//go:build cgo

package native

/*
#include <stdlib.h>
#include "grammar.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Grammar is a compiled GBNF grammar (llama.cpp's dialect; see
// native/grammar.h for what is accepted and refused). It is immutable and
// independent of any vocabulary: one Grammar may constrain any number of
// requests, on any engine, from any goroutine. Its C memory is freed by
// Free or, failing that, by a finalizer; an engine keeps its own reference
// while a request uses it, so Free after Submit is safe.
type Grammar struct {
	mu sync.Mutex
	c  *C.pm_grammar
}

// CompileGrammar parses and compiles GBNF text. The error names the
// problem and its line and column ("grammar: line 3 col 9: rule value is
// not defined"). Text over 1 MiB, or a grammar over about a million
// elements once repetitions are expanded, is refused, never slow.
func CompileGrammar(gbnf string) (*Grammar, error) {
	var cg *C.pm_grammar
	var msg [256]C.char
	var p *C.char
	if len(gbnf) > 0 {
		p = (*C.char)(unsafe.Pointer(unsafe.StringData(gbnf)))
	}
	rc := C.pm_grammar_compile(p, C.size_t(len(gbnf)), &cg, &msg[0], C.size_t(len(msg)))
	if rc != 0 {
		return nil, &Error{Status: Status(rc), Msg: C.GoString(&msg[0])}
	}
	g := &Grammar{c: cg}
	runtime.SetFinalizer(g, (*Grammar).Free)
	return g, nil
}

// Free drops the Grammar's reference to its C memory (requests that use it
// keep theirs). The Grammar must not be submitted afterwards; Free twice is
// fine.
func (g *Grammar) Free() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.c != nil {
		C.pm_grammar_release(g.c)
		g.c = nil
	}
}
