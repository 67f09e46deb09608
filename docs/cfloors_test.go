package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The C side of the architecture test: native/'s C files read as rooms
// (a .c file and the .h of the same name are one room; a header without a
// .c is a room of its own), each on a floor of the C floors table of
// ARCHITECTURE.md. A room may include, call or take the address of what a
// room on its own floor or below defines, never above, and the rooms'
// graph has no cycle. No C file is over maxCLines lines unless the long
// C files table names it with its reason.

const maxCLines = 800

// cFile is what the test reads of one C file.
type cFile struct {
	name     string   // base name, "sched.c"
	lines    int      // newline count
	includes []string // quoted #include targets, base names
	defs     []cDef   // functions defined at file scope
	idents   []string // every identifier outside definitions' and declarations' names
	statics  []string // object-like macros whose body says static (AVX2_INLINE)
}

type cDef struct {
	name string
	spec []string // the tokens before the name, back to the previous ; { or }
}

// room is a file's room: its base name without the extension.
func room(file string) string { return strings.TrimSuffix(file, filepath.Ext(file)) }

var includeRE = regexp.MustCompile(`^#\s*include\s+"([^"]+)"`)
var defineRE = regexp.MustCompile(`^#\s*define\s+\w+(\([^)]*\))?`)

// parseC reads a C file's includes, file-scope function definitions and the
// identifiers it uses. It is no C parser: comments and literals are dropped,
// macro bodies are read as code (a kernel macro's calls count), and a
// definition is a name followed by a parenthesized list and then a body,
// at brace depth 0 (attributes between them skipped).
func parseC(name string, src []byte) cFile {
	f := cFile{name: name, lines: bytes.Count(src, []byte("\n"))}
	code := stripComments(string(src), false)
	// Join continued lines, then handle preprocessor lines.
	code = strings.ReplaceAll(code, "\\\n", " ")
	var body strings.Builder
	for _, line := range strings.Split(code, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") {
			if m := includeRE.FindStringSubmatch(t); m != nil {
				f.includes = append(f.includes, filepath.Base(m[1]))
			} else if m := defineRE.FindString(t); m != "" {
				// a macro body is code, read as a block so that a
				// definition it generates is no file-scope one
				rest := t[len(m):]
				if !strings.HasSuffix(m, ")") && slices.Contains(tokenize(rest), "static") {
					f.statics = append(f.statics, strings.Fields(m)[len(strings.Fields(m))-1])
				}
				body.WriteString("{ " + rest + " }\n")
			}
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	toks := tokenize(stripComments(body.String(), true))
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t {
		case "{":
			depth++
			continue
		case "}":
			depth--
			continue
		}
		if !isIdent(t) {
			continue
		}
		if depth == 0 && i+1 < len(toks) && toks[i+1] == "(" && t != "__attribute__" {
			if j := closeParen(toks, i+1); j > 0 {
				k := j + 1
				for k+1 < len(toks) && toks[k] == "__attribute__" && toks[k+1] == "(" {
					if k = closeParen(toks, k+1); k < 0 {
						break
					}
					k++
				}
				if k > 0 && k < len(toks) && toks[k] == "{" {
					f.defs = append(f.defs, cDef{name: t, spec: specOf(toks, i)})
					continue
				}
				if k > 0 && k < len(toks) && (toks[k] == ";" || toks[k] == ",") {
					continue // a declaration names, it does not use
				}
			}
		}
		f.idents = append(f.idents, t)
	}
	return f
}

// specOf returns the tokens before the name at toks[i], back to the
// previous ; or } or {: its return type and storage class.
func specOf(toks []string, i int) []string {
	j := i - 1
	for j >= 0 && toks[j] != ";" && toks[j] != "}" && toks[j] != "{" {
		j--
	}
	return toks[j+1 : i]
}

func closeParen(toks []string, open int) int {
	d := 0
	for j := open; j < len(toks); j++ {
		switch toks[j] {
		case "(":
			d++
		case ")":
			if d--; d == 0 {
				return j
			}
		}
	}
	return -1
}

func isIdent(t string) bool {
	c := t[0]
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// stripComments drops comments, keeping newlines, and with blank the
// contents of string and character literals too.
func stripComments(s string, blank bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				end = len(s) - i - 2
			}
			b.WriteString(strings.Repeat("\n", strings.Count(s[i:i+2+end], "\n")))
			b.WriteByte(' ')
			i += end + 3
		case strings.HasPrefix(s[i:], "//"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
		case s[i] == '"' || s[i] == '\'':
			q, j := s[i], i+1
			for ; j < len(s) && s[j] != q && s[j] != '\n'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if blank {
				b.WriteByte(q)
				b.WriteByte(q)
			} else {
				b.WriteString(s[i:min(j+1, len(s))])
			}
			i = j
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func tokenize(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '.' || s[j] >= '0' && s[j] <= '9' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				j++
			}
			i = j // numbers are not tokens anyone needs
		case c == '(' || c == ')' || c == '{' || c == '}' || c == ';':
			toks = append(toks, string(c))
			i++
		default:
			i++
		}
	}
	return toks
}

// cEdge is one arrow between rooms and the first reason for it.
type cEdge struct{ from, to, why string }

// cEdges returns the arrows between the rooms of files: an include of
// another room's header, or a use of a function another room defines (a
// non-static one, or a static one in a header the file includes). A
// file's own definitions shadow others'.
func cEdges(files []cFile) []cEdge {
	statics := map[string]bool{"static": true}
	for _, f := range files {
		for _, m := range f.statics {
			statics[m] = true
		}
	}
	defRoom := map[string][]string{}  // function -> rooms that export it
	inHeader := map[string][]string{} // static function -> headers that define it
	for _, f := range files {
		for _, d := range f.defs {
			switch {
			case !slices.ContainsFunc(d.spec, func(t string) bool { return statics[t] }):
				defRoom[d.name] = append(defRoom[d.name], room(f.name))
			case strings.HasSuffix(f.name, ".h"):
				inHeader[d.name] = append(inHeader[d.name], f.name)
			}
		}
	}
	seen := map[[2]string]bool{}
	var out []cEdge
	add := func(from, to, why string) {
		if from == to || seen[[2]string{from, to}] {
			return
		}
		seen[[2]string{from, to}] = true
		out = append(out, cEdge{from, to, why})
	}
	for _, f := range files {
		r := room(f.name)
		for _, inc := range f.includes {
			add(r, room(inc), "includes "+inc)
		}
		own := map[string]bool{}
		for _, d := range f.defs {
			own[d.name] = true
		}
		for _, id := range f.idents {
			if own[id] {
				continue
			}
			for _, to := range defRoom[id] {
				add(r, to, "uses "+id)
			}
			for _, h := range inHeader[id] {
				if slices.Contains(f.includes, h) {
					add(r, room(h), "uses "+id)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b cEdge) int { return strings.Compare(a.from+" "+a.to, b.from+" "+b.to) })
	return out
}

// cViolations returns every arrow that goes up a floor, every room in no
// floor, every cycle, and every file over maxCLines lines that longOK does
// not name (and every name in longOK that is no longer long).
func cViolations(floors map[string]int, longOK map[string]string, files []cFile) []string {
	var out []string
	rooms := map[string]bool{}
	for _, f := range files {
		r := room(f.name)
		if _, ok := floors[r]; !ok && !rooms[r] {
			out = append(out, r+": in no C floor (add it to docs/ARCHITECTURE.md)")
		}
		rooms[r] = true
		_, ok := longOK[f.name]
		switch {
		case f.lines > maxCLines && !ok:
			out = append(out, fmt.Sprintf("%s: %d lines, over %d (split it, or name it in the long C files table if it is an unrolled kernel or a generated table)", f.name, f.lines, maxCLines))
		case f.lines <= maxCLines && ok:
			out = append(out, fmt.Sprintf("%s: %d lines, no longer long (drop it from the long C files table)", f.name, f.lines))
		}
	}
	for name := range longOK {
		if !slices.ContainsFunc(files, func(f cFile) bool { return f.name == name }) {
			out = append(out, name+": in the long C files table but not in native/")
		}
	}
	edges := cEdges(files)
	next := map[string][]string{}
	for _, e := range edges {
		next[e.from] = append(next[e.from], e.to)
		fa, oka := floors[e.from]
		fb, okb := floors[e.to]
		if oka && okb && fb > fa {
			out = append(out, fmt.Sprintf("%s (floor %d) %s of %s (floor %d): up a floor", e.from, fa, e.why, e.to, fb))
		}
	}
	for _, c := range cycles(next) {
		why := make([]string, 0, len(c))
		for i := range c {
			a, b := c[i], c[(i+1)%len(c)]
			for _, e := range edges {
				if e.from == a && e.to == b {
					why = append(why, a+" "+e.why)
				}
			}
		}
		out = append(out, "cycle: "+strings.Join(append(c, c[0]), " -> ")+" ("+strings.Join(why, "; ")+")")
	}
	slices.Sort(out)
	return out
}

// cycles returns one cycle through every strongly connected component of
// more than one room (Tarjan, then a path around the component).
func cycles(next map[string][]string) [][]string {
	index, low := map[string]int{}, map[string]int{}
	on := map[string]bool{}
	var stack []string
	var comps [][]string
	n := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		on[v] = true
		for _, w := range next[v] {
			if _, ok := index[w]; !ok {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				comps = append(comps, comp)
			}
		}
	}
	var keys []string
	for k := range next {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := index[k]; !ok {
			visit(k)
		}
	}
	var out [][]string
	for _, comp := range comps {
		slices.Sort(comp)
		in := map[string]bool{}
		for _, c := range comp {
			in[c] = true
		}
		// walk from the first room inside the component until a room repeats
		path, at := []string{comp[0]}, map[string]int{comp[0]: 0}
		for v := comp[0]; ; {
			var w string
			for _, x := range next[v] {
				if in[x] {
					w = x
					break
				}
			}
			if i, ok := at[w]; ok {
				out = append(out, path[i:])
				break
			}
			at[w] = len(path)
			path = append(path, w)
			v = w
		}
	}
	return out
}

// readCFloors reads the C floors table (room -> floor) and the long C
// files table (file -> reason) of ARCHITECTURE.md.
func readCFloors(t *testing.T) (map[string]int, map[string]string) {
	data, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	floors, long := map[string]int{}, map[string]string{}
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| C floor | rooms"):
			table = "floors"
		case strings.HasPrefix(line, "| long C file | why"):
			table = "long"
		case table != "" && strings.HasPrefix(line, "|---"):
		case table != "" && strings.HasPrefix(line, "|"):
			cols := strings.Split(line, "|")
			if len(cols) < 4 {
				t.Fatalf("ARCHITECTURE.md: malformed %s row %q", table, line)
			}
			if table == "floors" {
				fl, err := strconv.Atoi(strings.TrimSpace(cols[1]))
				if err != nil {
					t.Fatalf("ARCHITECTURE.md: C floor row %q: %v", line, err)
				}
				for _, m := range cell.FindAllStringSubmatch(cols[2], -1) {
					if _, dup := floors[m[1]]; dup {
						t.Fatalf("ARCHITECTURE.md: room %s on two C floors", m[1])
					}
					floors[m[1]] = fl
				}
			} else {
				m := cell.FindStringSubmatch(cols[1])
				why := strings.TrimSpace(cols[2])
				if m == nil || why == "" {
					t.Fatalf("ARCHITECTURE.md: long C file row %q needs a `file` and a reason", line)
				}
				long[m[1]] = why
			}
		default:
			table = ""
		}
	}
	if len(floors) < 10 {
		t.Fatalf("ARCHITECTURE.md: found %d rooms in the C floors table", len(floors))
	}
	return floors, long
}

// TestCFloors: native/'s C files include and call only down the C floors
// of ARCHITECTURE.md, form no cycle, and stay under maxCLines lines.
func TestCFloors(t *testing.T) {
	floors, long := readCFloors(t)
	var files []cFile
	for _, pat := range []string{"../native/*.c", "../native/*.h"} {
		names, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			src, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, parseC(filepath.Base(n), src))
		}
	}
	if len(files) < 20 {
		t.Fatalf("found %d C files in native/", len(files))
	}
	edges := cEdges(files)
	if len(edges) < 30 {
		t.Fatalf("found only %d arrows between C rooms: the reader is broken", len(edges))
	}
	for _, v := range cViolations(floors, long, files) {
		t.Error(v)
	}
	if testing.Verbose() {
		for _, e := range edges {
			t.Logf("%s (%d) -> %s (%d): %s", e.from, floors[e.from], e.to, floors[e.to], e.why)
		}
	}
}

// TestCViolations checks the C rules on made-up files, so that the floors
// test can fail: an include up a floor, a call up a floor, a cycle on one
// floor, a static function that is no one else's, a long file.
func TestCViolations(t *testing.T) {
	src := map[string]string{
		"w.h": "typedef int w;\nstatic inline int w_row(int r) { return r; }\n",
		"w.c": "#include \"w.h\"\nint w_bytes(int t) { return t; }\n",
		"k.h": "#include \"w.h\"\nint k_run(int);\n",
		"k.c": "#include \"k.h\"\n/* k_top() in a comment is no call */\n" +
			"#define K(x) w_bytes(x)\nint k_run(int x) { return K(x) + e_api(\"k_top(\"); }\n" +
			"static int helper(void) { return 0; }\n",
		"e.c": "#include \"k.h\"\nstatic int helper(void) { return 1; }\n" +
			"int e_api(const char *s) { return k_run(helper()) + s2(); }\n",
		"s.c": "int s2(void) __attribute__((cold));\nint s2(void) { return s3(); }\n",
		"t.c": "int s3(void) { return s2(); }\n" + strings.Repeat("\n", maxCLines),
	}
	var files []cFile
	for _, n := range []string{"e.c", "k.c", "k.h", "s.c", "t.c", "w.c", "w.h"} {
		files = append(files, parseC(n, []byte(src[n])))
	}
	floors := map[string]int{"w": 0, "k": 1, "e": 2, "s": 2, "t": 2}
	got := cViolations(floors, map[string]string{"gone.c": "a table"}, files)
	want := []string{
		"cycle: e -> k -> e (e includes k.h; k uses e_api)",
		"cycle: s -> t -> s (s uses s3; t uses s2)",
		"gone.c: in the long C files table but not in native/",
		"k (floor 1) uses e_api of e (floor 2): up a floor",
		fmt.Sprintf("t.c: %d lines, over %d (split it, or name it in the long C files table if it is an unrolled kernel or a generated table)", maxCLines+1, maxCLines),
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("cViolations:\n got %q\nwant %q", got, want)
	}
	// k.c's w_row comes through the macro body: an arrow k -> w.
	if !slices.ContainsFunc(cEdges(files), func(e cEdge) bool { return e.from == "k" && e.to == "w" && e.why == "uses w_bytes" }) {
		t.Errorf("no arrow k -> w in %v", cEdges(files))
	}
	// a room in no floor
	if got := cViolations(map[string]int{"w": 0}, nil, files[6:]); !slices.Equal(got, []string(nil)) {
		t.Errorf("w alone: %q", got)
	}
	if got := cViolations(map[string]int{}, nil, files[6:]); !slices.Equal(got, []string{"w: in no C floor (add it to docs/ARCHITECTURE.md)"}) {
		t.Errorf("w in no floor: %q", got)
	}
}
