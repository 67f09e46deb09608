package iree

import (
	"fmt"
	"math"
	"strings"
)

// Shape is a Llama-family decode step's shape: what DecodeStepMLIR needs of
// a model (plain Llama: no biases, no q/k norms, adjacent-pair RoPE).
type Shape struct {
	Dim, Layers, Heads, KVHeads, HeadDim, FFN, Vocab, Context int
	RMSEps                                                    float64
	// RopeNeox rotates (x[i], x[i+HeadDim/2]) instead of adjacent pairs
	// (StepMLIR only; DecodeStepMLIR refuses it).
	RopeNeox bool
}

// DecodeStepMLIR returns a linalg-on-tensors module (the dialects
// iree-compile takes by default) holding @decode: one token of one
// sequence through every layer, f32 throughout.
//
// Arguments, in order (Q = Heads*HeadDim, K = KVHeads*HeadDim, C = Context):
//
//	x [Dim]            the token's embedding row (gathered by the host)
//	mask [C]           0 at positions <= pos, -1e30 after
//	onehot [C]         1 at pos, 0 elsewhere: where this token's k and v go
//	rq [Q][Q], rk [K][K] the RoPE rotations at pos (block-diagonal, per head)
//	per layer: attn_norm [Dim], wq [Q][Dim], wk [K][Dim], wv [K][Dim],
//	  wo [Dim][Q], ffn_norm [Dim], wgate [FFN][Dim], wup [FFN][Dim],
//	  wdown [Dim][FFN], kcache [C][K], vcache [C][K] (rows > pos zero)
//	out_norm [Dim], output [Vocab][Dim]
//
// Results: logits [Vocab], then per layer the caches with row pos set.
//
// The caches travel by value on every call: this is a program to check the
// numerics against the reference, not yet the engine's step.
func DecodeStepMLIR(s Shape) (string, error) {
	if min(s.Dim, s.Layers, s.Heads, s.KVHeads, s.HeadDim, s.FFN, s.Vocab, s.Context) < 1 ||
		s.Heads%s.KVHeads != 0 || s.HeadDim%2 != 0 || !(s.RMSEps > 0) || s.RopeNeox {
		return "", fmt.Errorf("iree: unsupported shape %+v", s)
	}
	g := &gen{s: s}
	return g.module(), nil
}

type gen struct {
	s Shape
	b strings.Builder
	n int
}

func (g *gen) tmp() string { g.n++; return fmt.Sprintf("%%t%d", g.n) }

func (g *gen) line(format string, a ...any) { fmt.Fprintf(&g.b, "  "+format+"\n", a...) }

func ty(dims ...int) string {
	var b strings.Builder
	b.WriteString("tensor<")
	for _, d := range dims {
		fmt.Fprintf(&b, "%dx", d)
	}
	b.WriteString("f32>")
	return b.String()
}

// filled returns a new tensor of dims filled with v.
func (g *gen) filled(v string, dims ...int) string {
	e, z := g.tmp(), g.tmp()
	g.line("%s = tensor.empty() : %s", e, ty(dims...))
	g.line("%s = linalg.fill ins(%s : f32) outs(%s : %s) -> %s", z, v, e, ty(dims...), ty(dims...))
	return z
}

// matvec returns W x for W [r][c].
func (g *gen) matvec(w, x string, r, c int) string {
	z, out := g.filled("%zero", r), g.tmp()
	g.line("%s = linalg.matvec ins(%s, %s : %s, %s) outs(%s : %s) -> %s", out, w, x, ty(r, c), ty(c), z, ty(r), ty(r))
	return out
}

// generic emits a linalg.generic; maps are affine map bodies, body the
// region's operations on its block arguments %a0.. (inputs then output),
// ending with the value to yield.
func (g *gen) generic(dims string, iters []string, maps []string, ins []string, inTys []string, init, outTy string, body []string, yield string) string {
	out := g.tmp()
	am := make([]string, len(maps))
	for i, m := range maps {
		am[i] = fmt.Sprintf("affine_map<(%s) -> (%s)>", dims, m)
	}
	it := make([]string, len(iters))
	for i, s := range iters {
		it[i] = fmt.Sprintf("%q", s)
	}
	g.line("%s = linalg.generic {indexing_maps = [%s], iterator_types = [%s]} ins(%s : %s) outs(%s : %s) {",
		out, strings.Join(am, ", "), strings.Join(it, ", "), strings.Join(ins, ", "), strings.Join(inTys, ", "), init, outTy)
	args := make([]string, len(ins)+1)
	for i := range args {
		args[i] = fmt.Sprintf("%%a%d: f32", i)
	}
	g.line("^bb0(%s):", strings.Join(args, ", "))
	for _, op := range body {
		g.line("  %s", op)
	}
	g.line("  linalg.yield %s : f32", yield)
	g.line("} -> %s", outTy)
	return out
}

// rmsnorm returns x / sqrt(mean(x²) + eps) * w.
func (g *gen) rmsnorm(x, w string) string {
	d := g.s.Dim
	ss := g.generic("i", []string{"reduction"}, []string{"i", ""}, []string{x}, []string{ty(d)},
		g.filled("%zero"), ty(), []string{"%m = arith.mulf %a0, %a0 : f32", "%s = arith.addf %a1, %m : f32"}, "%s")
	return g.generic("i", []string{"parallel"}, []string{"i", "", "i", "i"}, []string{x, ss, w}, []string{ty(d), ty(), ty(d)},
		g.filled("%zero", d), ty(d), []string{
			fmt.Sprintf("%%n = arith.constant %d.0 : f32", d),
			fmt.Sprintf("%%eps = arith.constant %e : f32", g.s.RMSEps),
			"%mean = arith.divf %a1, %n : f32",
			"%v = arith.addf %mean, %eps : f32",
			"%sq = math.sqrt %v : f32",
			"%y = arith.divf %a0, %sq : f32",
			"%r = arith.mulf %y, %a2 : f32",
		}, "%r")
}

// add returns a + b for two [n] tensors.
func (g *gen) add(a, b string, n int) string {
	return g.generic("i", []string{"parallel"}, []string{"i", "i", "i"}, []string{a, b}, []string{ty(n), ty(n)},
		g.filled("%zero", n), ty(n), []string{"%r = arith.addf %a0, %a1 : f32"}, "%r")
}

func (g *gen) module() string {
	s := g.s
	q, k, c, d := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.Context, s.Dim
	kvh, grp, hd := s.KVHeads, s.Heads/s.KVHeads, s.HeadDim
	args := []string{
		"%x: " + ty(d), "%mask: " + ty(c), "%onehot: " + ty(c), "%rq: " + ty(q, q), "%rk: " + ty(k, k),
	}
	for l := 0; l < s.Layers; l++ {
		args = append(args,
			fmt.Sprintf("%%an%d: %s", l, ty(d)), fmt.Sprintf("%%wq%d: %s", l, ty(q, d)),
			fmt.Sprintf("%%wk%d: %s", l, ty(k, d)), fmt.Sprintf("%%wv%d: %s", l, ty(k, d)),
			fmt.Sprintf("%%wo%d: %s", l, ty(d, q)), fmt.Sprintf("%%fn%d: %s", l, ty(d)),
			fmt.Sprintf("%%wg%d: %s", l, ty(s.FFN, d)), fmt.Sprintf("%%wu%d: %s", l, ty(s.FFN, d)),
			fmt.Sprintf("%%wd%d: %s", l, ty(d, s.FFN)),
			fmt.Sprintf("%%kc%d: %s", l, ty(c, k)), fmt.Sprintf("%%vc%d: %s", l, ty(c, k)))
	}
	args = append(args, "%on: "+ty(d), "%wout: "+ty(s.Vocab, d))
	results := []string{ty(s.Vocab)}
	for l := 0; l < s.Layers; l++ {
		results = append(results, ty(c, k), ty(c, k))
	}
	fmt.Fprintf(&g.b, "func.func @decode(%s) -> (%s) {\n", strings.Join(args, ", "), strings.Join(results, ", "))
	g.line("%%zero = arith.constant 0.0 : f32")
	g.line("%%ninf = arith.constant -3.0e38 : f32")
	x := "%x"
	var caches []string
	for l := 0; l < s.Layers; l++ {
		h := g.rmsnorm(x, fmt.Sprintf("%%an%d", l))
		// RoPE as a matrix: rq (rk) rotates each head's adjacent pairs.
		qv := g.matvec("%rq", g.matvec(fmt.Sprintf("%%wq%d", l), h, q, d), q, q)
		kv := g.matvec("%rk", g.matvec(fmt.Sprintf("%%wk%d", l), h, k, d), k, k)
		vv := g.matvec(fmt.Sprintf("%%wv%d", l), h, k, d)
		kc, vc := g.place(fmt.Sprintf("%%kc%d", l), kv), g.place(fmt.Sprintf("%%vc%d", l), vv)
		caches = append(caches, kc, vc)
		att := g.attention(qv, kc, vc, kvh, grp, hd)
		x = g.add(x, g.matvec(fmt.Sprintf("%%wo%d", l), att, d, q), d)
		h2 := g.rmsnorm(x, fmt.Sprintf("%%fn%d", l))
		gate := g.matvec(fmt.Sprintf("%%wg%d", l), h2, s.FFN, d)
		up := g.matvec(fmt.Sprintf("%%wu%d", l), h2, s.FFN, d)
		act := g.generic("i", []string{"parallel"}, []string{"i", "i", "i"}, []string{gate, up}, []string{ty(s.FFN), ty(s.FFN)},
			g.filled("%zero", s.FFN), ty(s.FFN), []string{
				"%one = arith.constant 1.0 : f32",
				"%ng = arith.negf %a0 : f32",
				"%e = math.exp %ng : f32",
				"%den = arith.addf %one, %e : f32",
				"%sg = arith.divf %a0, %den : f32",
				"%r = arith.mulf %sg, %a1 : f32",
			}, "%r")
		x = g.add(x, g.matvec(fmt.Sprintf("%%wd%d", l), act, d, s.FFN), d)
	}
	logits := g.matvec("%wout", g.rmsnorm(x, "%on"), s.Vocab, d)
	outs := append([]string{logits}, caches...)
	g.line("return %s : %s", strings.Join(outs, ", "), strings.Join(results, ", "))
	g.b.WriteString("}\n")
	return g.b.String()
}

// place returns cache + onehot ⊗ row: row written at pos (exact: the
// cache's row pos is zero and the other rows gain 0·row).
func (g *gen) place(cache, row string) string {
	c, k := g.s.Context, g.s.KVHeads*g.s.HeadDim
	return g.generic("t, j", []string{"parallel", "parallel"}, []string{"t, j", "t", "j", "t, j"},
		[]string{cache, "%onehot", row}, []string{ty(c, k), ty(c), ty(k)},
		g.filled("%zero", c, k), ty(c, k), []string{
			"%p = arith.mulf %a1, %a2 : f32",
			"%r = arith.addf %a0, %p : f32",
		}, "%r")
}

// attention returns softmax(q·Kᵀ/√hd + mask)·V per head, heads grouped
// over their KV head as [kvh][grp][hd], flattened to [Heads*HeadDim].
func (g *gen) attention(q, kc, vc string, kvh, grp, hd int) string {
	c := g.s.Context
	q3, k3, v3 := g.tmp(), g.tmp(), g.tmp()
	g.line("%s = tensor.expand_shape %s [[0, 1, 2]] output_shape [%d, %d, %d] : %s into %s", q3, q, kvh, grp, hd, ty(kvh*grp*hd), ty(kvh, grp, hd))
	g.line("%s = tensor.expand_shape %s [[0], [1, 2]] output_shape [%d, %d, %d] : %s into %s", k3, kc, c, kvh, hd, ty(c, kvh*hd), ty(c, kvh, hd))
	g.line("%s = tensor.expand_shape %s [[0], [1, 2]] output_shape [%d, %d, %d] : %s into %s", v3, vc, c, kvh, hd, ty(c, kvh*hd), ty(c, kvh, hd))
	sc := ty(kvh, grp, c)
	dots := g.generic("h, r, t, d", []string{"parallel", "parallel", "parallel", "reduction"}, []string{"h, r, d", "t, h, d", "h, r, t"},
		[]string{q3, k3}, []string{ty(kvh, grp, hd), ty(c, kvh, hd)}, g.filled("%zero", kvh, grp, c), sc,
		[]string{"%m = arith.mulf %a0, %a1 : f32", "%s = arith.addf %a2, %m : f32"}, "%s")
	scaled := g.generic("h, r, t", []string{"parallel", "parallel", "parallel"}, []string{"h, r, t", "t", "h, r, t"},
		[]string{dots, "%mask"}, []string{sc, ty(c)}, g.filled("%zero", kvh, grp, c), sc, []string{
			fmt.Sprintf("%%sq = arith.constant %e : f32", sqrt(float64(hd))),
			"%y = arith.divf %a0, %sq : f32",
			"%r = arith.addf %y, %a1 : f32",
		}, "%r")
	mx := g.generic("h, r, t", []string{"parallel", "parallel", "reduction"}, []string{"h, r, t", "h, r"},
		[]string{scaled}, []string{sc}, g.filled("%ninf", kvh, grp), ty(kvh, grp),
		[]string{"%r = arith.maximumf %a0, %a1 : f32"}, "%r")
	ex := g.generic("h, r, t", []string{"parallel", "parallel", "parallel"}, []string{"h, r, t", "h, r", "h, r, t"},
		[]string{scaled, mx}, []string{sc, ty(kvh, grp)}, g.filled("%zero", kvh, grp, c), sc,
		[]string{"%s = arith.subf %a0, %a1 : f32", "%r = math.exp %s : f32"}, "%r")
	sum := g.generic("h, r, t", []string{"parallel", "parallel", "reduction"}, []string{"h, r, t", "h, r"},
		[]string{ex}, []string{sc}, g.filled("%zero", kvh, grp), ty(kvh, grp),
		[]string{"%r = arith.addf %a1, %a0 : f32"}, "%r")
	p := g.generic("h, r, t", []string{"parallel", "parallel", "parallel"}, []string{"h, r, t", "h, r", "h, r, t"},
		[]string{ex, sum}, []string{sc, ty(kvh, grp)}, g.filled("%zero", kvh, grp, c), sc,
		[]string{"%r = arith.divf %a0, %a1 : f32"}, "%r")
	o := g.generic("h, r, d, t", []string{"parallel", "parallel", "parallel", "reduction"}, []string{"h, r, t", "t, h, d", "h, r, d"},
		[]string{p, v3}, []string{sc, ty(c, kvh, hd)}, g.filled("%zero", kvh, grp, hd), ty(kvh, grp, hd),
		[]string{"%m = arith.mulf %a0, %a1 : f32", "%s = arith.addf %a2, %m : f32"}, "%s")
	flat := g.tmp()
	g.line("%s = tensor.collapse_shape %s [[0, 1, 2]] : %s into %s", flat, o, ty(kvh, grp, hd), ty(kvh*grp*hd))
	return flat
}

func sqrt(x float64) float64 { return math.Sqrt(x) }
