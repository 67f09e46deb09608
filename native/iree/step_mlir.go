package iree

import (
	"fmt"
	"strings"
)

// StepMLIR returns a linalg-on-tensors module holding @step: one token for
// each of batch slots through every layer, f32 throughout. It is the
// engine's program (engine_iree.go); DecodeStepMLIR is the one-sequence
// check it grew from.
//
// Unlike DecodeStepMLIR, nothing large travels by value: the weights and
// the KV caches are buffers the engine allocates once and passes by
// reference, and the program never writes a cache. It attends over the
// cache rows before each slot's position plus the token's own k and v,
// and returns those, which the engine then writes into the cache row at
// that position (a host-to-device copy of one row per layer and slot).
//
// Arguments, in order (B = batch, Q = Heads*HeadDim, K = KVHeads*HeadDim,
// C = Context, H2 = HeadDim/2):
//
//	x [B][Dim]            each slot's token embedding (gathered by the host)
//	cos, sin [B][H2]      each slot's RoPE angles at its position
//	mask [B][C]           0 at cache rows < pos, -1e30 from pos on
//	per layer: attn_norm [Dim], wq [Q][Dim], wk [K][Dim], wv [K][Dim],
//	  wo [Dim][Q], ffn_norm [Dim], wgate [FFN][Dim], wup [FFN][Dim],
//	  wdown [Dim][FFN]
//	out_norm [Dim], output [Vocab][Dim]
//	per layer: kcache [B*KVHeads][C][HeadDim], vcache the same (head-major)
//
// Results: logits [B][Vocab], then per layer k [B][K] and v [B][K] of the
// tokens just run (RoPE applied to k).
//
// A slot with nothing to run gets a zero x and an all -1e30 mask: its row
// computes finite values the engine ignores.
func StepMLIR(s Shape, batch int) (string, error) {
	if min(s.Dim, s.Layers, s.Heads, s.KVHeads, s.HeadDim, s.FFN, s.Vocab, s.Context, batch) < 1 ||
		s.Heads%s.KVHeads != 0 || s.HeadDim%2 != 0 || !(s.RMSEps > 0) {
		return "", fmt.Errorf("iree: unsupported shape %+v, batch %d", s, batch)
	}
	g := &bgen{gen: gen{s: s}, b: batch}
	return g.module(), nil
}

// StepArgs is the number of @step's arguments for s.
func StepArgs(s Shape) int { return 4 + 9*s.Layers + 2 + 2*s.Layers }

type bgen struct {
	gen
	b int
}

// matmul returns x Wᵀ for x [B][c] and W [r][c]: [B][r].
func (g *bgen) matmul(x, w string, r, c int) string {
	return g.generic("b, n, k", []string{"parallel", "parallel", "reduction"}, []string{"b, k", "n, k", "b, n"},
		[]string{x, w}, []string{ty(g.b, c), ty(r, c)}, g.filled("%zero", g.b, r), ty(g.b, r),
		[]string{"%m = arith.mulf %a0, %a1 : f32", "%s = arith.addf %a2, %m : f32"}, "%s")
}

// rmsnorm returns each row of x [B][Dim] / sqrt(mean(row²) + eps) * w.
func (g *bgen) rmsnorm(x, w string) string {
	d, b := g.s.Dim, g.b
	ss := g.generic("b, i", []string{"parallel", "reduction"}, []string{"b, i", "b"}, []string{x}, []string{ty(b, d)},
		g.filled("%zero", b), ty(b), []string{"%m = arith.mulf %a0, %a0 : f32", "%s = arith.addf %a1, %m : f32"}, "%s")
	return g.generic("b, i", []string{"parallel", "parallel"}, []string{"b, i", "b", "i", "b, i"}, []string{x, ss, w},
		[]string{ty(b, d), ty(b), ty(d)}, g.filled("%zero", b, d), ty(b, d), []string{
			fmt.Sprintf("%%n = arith.constant %d.0 : f32", d),
			fmt.Sprintf("%%eps = arith.constant %e : f32", g.s.RMSEps),
			"%mean = arith.divf %a1, %n : f32",
			"%v = arith.addf %mean, %eps : f32",
			"%sq = math.sqrt %v : f32",
			"%y = arith.divf %a0, %sq : f32",
			"%r = arith.mulf %y, %a2 : f32",
		}, "%r")
}

// add2 returns a + b for two [B][n] tensors.
func (g *bgen) add2(a, b string, n int) string {
	return g.generic("b, i", []string{"parallel", "parallel"}, []string{"b, i", "b, i", "b, i"}, []string{a, b},
		[]string{ty(g.b, n), ty(g.b, n)}, g.filled("%zero", g.b, n), ty(g.b, n), []string{"%r = arith.addf %a0, %a1 : f32"}, "%r")
}

// rope rotates x [B][heads*HeadDim] pairwise by each row's angles: the
// pair (2i, 2i+1) of each head, or (i, i+HeadDim/2) when RopeNeox.
func (g *bgen) rope(x string, heads int) string {
	b, hd, h2 := g.b, g.s.HeadDim, g.s.HeadDim/2
	n := heads * hd
	// Split each head into [pairs][2] (adjacent) or [2][pairs] (neox); the
	// iteration space is (b, h, i, j): pair i, member j.
	shape, first, second, out := []int{b, heads, h2, 2}, "b, h, i, 0", "b, h, i, 1", "b, h, i, j"
	if g.s.RopeNeox {
		shape, first, second, out = []int{b, heads, 2, h2}, "b, h, 0, i", "b, h, 1, i", "b, h, j, i"
	}
	x4 := g.tmp()
	g.line("%s = tensor.expand_shape %s [[0], [1, 2, 3]] output_shape [%d, %d, %d, %d] : %s into %s",
		x4, x, shape[0], shape[1], shape[2], shape[3], ty(b, n), ty(shape...))
	// The iteration space is always (b, h, i, j): linalg.index 3 is j.
	dims := "b, h, i, j"
	r := g.generic(dims, []string{"parallel", "parallel", "parallel", "parallel"},
		[]string{first, second, "b, i", "b, i", out}, []string{x4, x4, "%cos", "%sin"},
		[]string{ty(shape...), ty(shape...), ty(b, h2), ty(b, h2)}, g.filled("%zero", shape...), ty(shape...), []string{
			"%j = linalg.index 3 : index",
			"%c0 = arith.constant 0 : index",
			"%first = arith.cmpi eq, %j, %c0 : index",
			"%xc = arith.mulf %a0, %a2 : f32",
			"%ys = arith.mulf %a1, %a3 : f32",
			"%r0 = arith.subf %xc, %ys : f32",
			"%xs = arith.mulf %a0, %a3 : f32",
			"%yc = arith.mulf %a1, %a2 : f32",
			"%r1 = arith.addf %xs, %yc : f32",
			"%r = arith.select %first, %r0, %r1 : f32",
		}, "%r")
	flat := g.tmp()
	g.line("%s = tensor.collapse_shape %s [[0], [1, 2, 3]] : %s into %s", flat, r, ty(shape...), ty(b, n))
	return flat
}

// attention returns, per row, softmax over the cache rows before pos (the
// mask) and the token's own k of q·k/√hd, times the matching v rows,
// heads grouped over their KV head; [B][Heads*HeadDim]. The caches are
// head-major, [B*KVHeads][C][HeadDim], so both products are batched
// matmuls over (slot, kv head), which data tiling packs.
func (g *bgen) attention(q, kn, vn, kc, vc string) string {
	s, b := g.s, g.b
	kvh, grp, hd, c := s.KVHeads, s.Heads/s.KVHeads, s.HeadDim, s.Context
	k, p := kvh*hd, b*kvh
	q4, q3, kn2, vn2 := g.tmp(), g.tmp(), g.tmp(), g.tmp()
	g.line("%s = tensor.expand_shape %s [[0], [1, 2, 3]] output_shape [%d, %d, %d, %d] : %s into %s", q4, q, b, kvh, grp, hd, ty(b, kvh*grp*hd), ty(b, kvh, grp, hd))
	g.line("%s = tensor.collapse_shape %s [[0, 1], [2], [3]] : %s into %s", q3, q4, ty(b, kvh, grp, hd), ty(p, grp, hd))
	for _, x := range [][2]string{{kn2, kn}, {vn2, vn}} {
		e := g.tmp()
		g.line("%s = tensor.expand_shape %s [[0], [1, 2]] output_shape [%d, %d, %d] : %s into %s", e, x[1], b, kvh, hd, ty(b, k), ty(b, kvh, hd))
		g.line("%s = tensor.collapse_shape %s [[0, 1], [2]] : %s into %s", x[0], e, ty(b, kvh, hd), ty(p, hd))
	}
	scale := fmt.Sprintf("%%sq = arith.constant %e : f32", sqrt(float64(hd)))
	three := []string{"parallel", "parallel", "parallel"}
	red3 := []string{"parallel", "parallel", "reduction"}
	red4 := []string{"parallel", "parallel", "parallel", "reduction"}
	sc, sr := ty(p, grp, c), ty(p, grp)
	mb := fmt.Sprintf("p floordiv %d, t", kvh) // the mask row of (slot, kv head) p
	dots := g.generic("p, r, t, d", red4, []string{"p, r, d", "p, t, d", "p, r, t"}, []string{q3, kc},
		[]string{ty(p, grp, hd), ty(p, c, hd)}, g.filled("%zero", p, grp, c), sc,
		[]string{"%m = arith.mulf %a0, %a1 : f32", "%s = arith.addf %a2, %m : f32"}, "%s")
	scaled := g.generic("p, r, t", three, []string{"p, r, t", mb, "p, r, t"}, []string{dots, "%mask"},
		[]string{sc, ty(b, c)}, g.filled("%zero", p, grp, c), sc,
		[]string{scale, "%y = arith.divf %a0, %sq : f32", "%r = arith.addf %y, %a1 : f32"}, "%r")
	own := g.generic("p, r, d", red3, []string{"p, r, d", "p, d", "p, r"}, []string{q3, kn2},
		[]string{ty(p, grp, hd), ty(p, hd)}, g.filled("%zero", p, grp), sr,
		[]string{"%m = arith.mulf %a0, %a1 : f32", "%s = arith.addf %a2, %m : f32"}, "%s")
	ownScaled := g.generic("p, r", []string{"parallel", "parallel"}, []string{"p, r", "p, r"}, []string{own},
		[]string{sr}, g.filled("%zero", p, grp), sr, []string{scale, "%r = arith.divf %a0, %sq : f32"}, "%r")
	mx := g.generic("p, r, t", red3, []string{"p, r, t", "p, r"}, []string{scaled}, []string{sc},
		ownScaled, sr, []string{"%r = arith.maximumf %a0, %a1 : f32"}, "%r")
	ex := g.generic("p, r, t", three, []string{"p, r, t", "p, r", "p, r, t"}, []string{scaled, mx},
		[]string{sc, sr}, g.filled("%zero", p, grp, c), sc, []string{"%s = arith.subf %a0, %a1 : f32", "%r = math.exp %s : f32"}, "%r")
	exOwn := g.generic("p, r", []string{"parallel", "parallel"}, []string{"p, r", "p, r", "p, r"},
		[]string{ownScaled, mx}, []string{sr, sr}, g.filled("%zero", p, grp), sr,
		[]string{"%s = arith.subf %a0, %a1 : f32", "%r = math.exp %s : f32"}, "%r")
	sum := g.generic("p, r, t", red3, []string{"p, r, t", "p, r"}, []string{ex}, []string{sc},
		exOwn, sr, []string{"%r = arith.addf %a1, %a0 : f32"}, "%r")
	ownV := g.generic("p, r, d", three, []string{"p, r", "p, d", "p, r, d"}, []string{exOwn, vn2},
		[]string{sr, ty(p, hd)}, g.filled("%zero", p, grp, hd), ty(p, grp, hd),
		[]string{"%r = arith.mulf %a0, %a1 : f32"}, "%r")
	o := g.generic("p, r, d, t", red4, []string{"p, r, t", "p, t, d", "p, r, d"}, []string{ex, vc},
		[]string{sc, ty(p, c, hd)}, ownV, ty(p, grp, hd),
		[]string{"%m = arith.mulf %a0, %a1 : f32", "%s = arith.addf %a2, %m : f32"}, "%s")
	norm := g.generic("p, r, d", three, []string{"p, r, d", "p, r", "p, r, d"}, []string{o, sum},
		[]string{ty(p, grp, hd), sr}, g.filled("%zero", p, grp, hd), ty(p, grp, hd),
		[]string{"%r = arith.divf %a0, %a1 : f32"}, "%r")
	flat := g.tmp()
	g.line("%s = tensor.collapse_shape %s [[0, 1, 2]] : %s into %s", flat, norm, ty(p, grp, hd), ty(p*grp*hd))
	out := g.tmp()
	g.line("%s = tensor.expand_shape %s [[0, 1]] output_shape [%d, %d] : %s into %s", out, flat, b, kvh*grp*hd, ty(p*grp*hd), ty(b, kvh*grp*hd))
	return out
}

func (g *bgen) module() string {
	s, b := g.s, g.b
	q, k, c, d := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.Context, s.Dim
	args := []string{"%x: " + ty(b, d), "%cos: " + ty(b, s.HeadDim/2), "%sin: " + ty(b, s.HeadDim/2), "%mask: " + ty(b, c)}
	for l := 0; l < s.Layers; l++ {
		args = append(args,
			fmt.Sprintf("%%an%d: %s", l, ty(d)), fmt.Sprintf("%%wq%d: %s", l, ty(q, d)),
			fmt.Sprintf("%%wk%d: %s", l, ty(k, d)), fmt.Sprintf("%%wv%d: %s", l, ty(k, d)),
			fmt.Sprintf("%%wo%d: %s", l, ty(d, q)), fmt.Sprintf("%%fn%d: %s", l, ty(d)),
			fmt.Sprintf("%%wg%d: %s", l, ty(s.FFN, d)), fmt.Sprintf("%%wu%d: %s", l, ty(s.FFN, d)),
			fmt.Sprintf("%%wd%d: %s", l, ty(d, s.FFN)))
	}
	args = append(args, "%on: "+ty(d), "%wout: "+ty(s.Vocab, d))
	for l := 0; l < s.Layers; l++ {
		args = append(args, fmt.Sprintf("%%kc%d: %s", l, ty(b*s.KVHeads, c, s.HeadDim)), fmt.Sprintf("%%vc%d: %s", l, ty(b*s.KVHeads, c, s.HeadDim)))
	}
	results := []string{ty(b, s.Vocab)}
	for l := 0; l < s.Layers; l++ {
		results = append(results, ty(b, k), ty(b, k))
	}
	fmt.Fprintf(&g.gen.b, "func.func @step(%s) -> (%s) {\n", strings.Join(args, ", "), strings.Join(results, ", "))
	g.line("%%zero = arith.constant 0.0 : f32")
	x := "%x"
	var kv []string
	for l := 0; l < s.Layers; l++ {
		h := g.rmsnorm(x, fmt.Sprintf("%%an%d", l))
		qv := g.rope(g.matmul(h, fmt.Sprintf("%%wq%d", l), q, d), s.Heads)
		kn := g.rope(g.matmul(h, fmt.Sprintf("%%wk%d", l), k, d), s.KVHeads)
		vn := g.matmul(h, fmt.Sprintf("%%wv%d", l), k, d)
		kv = append(kv, kn, vn)
		att := g.attention(qv, kn, vn, fmt.Sprintf("%%kc%d", l), fmt.Sprintf("%%vc%d", l))
		x = g.add2(x, g.matmul(att, fmt.Sprintf("%%wo%d", l), d, q), d)
		h2 := g.rmsnorm(x, fmt.Sprintf("%%fn%d", l))
		gate := g.matmul(h2, fmt.Sprintf("%%wg%d", l), s.FFN, d)
		up := g.matmul(h2, fmt.Sprintf("%%wu%d", l), s.FFN, d)
		act := g.generic("b, i", []string{"parallel", "parallel"}, []string{"b, i", "b, i", "b, i"}, []string{gate, up},
			[]string{ty(b, s.FFN), ty(b, s.FFN)}, g.filled("%zero", b, s.FFN), ty(b, s.FFN), []string{
				"%one = arith.constant 1.0 : f32",
				"%ng = arith.negf %a0 : f32",
				"%e = math.exp %ng : f32",
				"%den = arith.addf %one, %e : f32",
				"%sg = arith.divf %a0, %den : f32",
				"%r = arith.mulf %sg, %a1 : f32",
			}, "%r")
		x = g.add2(x, g.matmul(act, fmt.Sprintf("%%wd%d", l), d, s.FFN), d)
	}
	logits := g.matmul(g.rmsnorm(x, "%on"), "%wout", s.Vocab, d)
	outs := append([]string{logits}, kv...)
	g.line("return %s : %s", strings.Join(outs, ", "), strings.Join(results, ", "))
	g.gen.b.WriteString("}\n")
	return g.gen.b.String()
}
