package constraint

import (
	"math"
	"strconv"
	"strings"
)

// maxIntDigits is the most digits an unbounded integer may have.
const maxIntDigits = 18

// numRange is an interval of numbers with integer bounds.
type numRange struct {
	lo, hi         float64
	hasLo, hasHi   bool
	loOpen, hiOpen bool
}

// integers is the GBNF of the integers in r ("" if none).
func (r numRange) integers() string {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if r.hasLo {
		lo = int64(math.Ceil(r.lo))
		if r.loOpen && float64(lo) == r.lo {
			lo++
		}
	}
	if r.hasHi {
		hi = int64(math.Floor(r.hi))
		if r.hiOpen && float64(hi) == r.hi {
			hi--
		}
	}
	if lo > hi {
		return ""
	}
	const inf = -1
	var alts []string
	if hi >= 0 { // the non-negative part
		h := hi
		if !r.hasHi {
			h = inf
		}
		alts = append(alts, digitRange(uint64(max(lo, 0)), h)...)
	}
	if lo < 0 { // the negative part, by magnitude
		mlo := uint64(1)
		if hi < 0 {
			mlo = uint64(-hi)
		}
		mh := int64(inf)
		if r.hasLo {
			mh = -lo
		}
		for _, a := range digitRange(mlo, mh) {
			alts = append(alts, `"-" `+a)
		}
	}
	return strings.Join(alts, " | ")
}

// numbers is the GBNF of the decimal numbers in r (no exponent; "" if none).
func (r numRange) numbers() string {
	var alts []string
	// non-negative values: magnitude in [A, B]
	if !r.hasHi || r.hi > 0 || (r.hi == 0 && !r.hiOpen) {
		a, aOpen := 0.0, false
		if r.hasLo && r.lo >= 0 {
			a, aOpen = r.lo, r.loOpen
		}
		alts = append(alts, magnitudes(a, aOpen, r.hi, r.hiOpen, r.hasHi, "")...)
	}
	// negative values: magnitude in (max(0, -hi), -lo]
	if !r.hasLo || r.lo < 0 {
		a, aOpen := 0.0, true
		if r.hasHi && r.hi < 0 {
			a, aOpen = -r.hi, r.hiOpen
		}
		alts = append(alts, magnitudes(a, aOpen, -r.lo, r.loOpen, r.hasLo, `"-" `)...)
	}
	return strings.Join(alts, " | ")
}

// magnitudes writes the decimals m with a ≤ m ≤ b (< when open; b
// unbounded when !hasB), a and b non-negative integers, each prefixed.
func magnitudes(a float64, aOpen bool, b float64, bOpen, hasB bool, prefix string) []string {
	const frac = `("." [0-9]{1,16})?`
	const zero = `("." "0"{1,16})?`
	const nonzero = `"." [0-9]{0,15} [1-9]`
	A := uint64(a)
	var alts []string
	if hasB && b == a {
		if !aOpen && !bOpen {
			alts = append(alts, prefix+lit(strconv.FormatUint(A, 10))+" "+zero)
		}
		return alts
	}
	if hasB && b < a {
		return nil
	}
	// integer part A
	if aOpen {
		alts = append(alts, prefix+lit(strconv.FormatUint(A, 10))+" "+nonzero)
	} else {
		alts = append(alts, prefix+lit(strconv.FormatUint(A, 10))+" "+frac)
	}
	// integer parts strictly between
	h := int64(-1)
	if hasB {
		h = int64(b) - 1
	}
	if !hasB || int64(b)-1 >= int64(A)+1 {
		for _, d := range digitRange(A+1, h) {
			alts = append(alts, prefix+"("+d+") "+frac)
		}
	}
	// integer part B
	if hasB && !bOpen {
		alts = append(alts, prefix+lit(strconv.FormatUint(uint64(b), 10))+" "+zero)
	}
	return alts
}

// digitRange writes the decimal integers in [lo, hi] (hi < 0: no upper
// bound, up to maxIntDigits digits) without leading zeros, as
// alternatives.
func digitRange(lo uint64, hi int64) []string {
	maxN := uint64(1)
	for i := 0; i < maxIntDigits; i++ {
		maxN *= 10
	}
	maxN--
	h := maxN
	if hi >= 0 {
		h = uint64(hi)
	}
	if lo > h {
		return nil
	}
	var alts []string
	for n := len(strconv.FormatUint(lo, 10)); n <= len(strconv.FormatUint(h, 10)); n++ {
		first := uint64(1)
		for i := 1; i < n; i++ {
			first *= 10
		}
		last := first*10 - 1
		if n == 1 {
			first = 0
		}
		a, z := max(lo, first), min(h, last)
		if a > z {
			continue
		}
		alts = append(alts, sameLen(strconv.FormatUint(a, 10), strconv.FormatUint(z, 10))...)
	}
	return alts
}

// sameLen writes the integers from a to z, both of the same length.
func sameLen(a, z string) []string {
	if a == z {
		return []string{lit(a)}
	}
	n := len(a)
	if strings.Trim(a[1:], "0") == "" && strings.Trim(z[1:], "9") == "" {
		return []string{join(digitClass(a[0], z[0]), anyDigits(n-1))}
	}
	if a[0] == z[0] {
		var out []string
		for _, s := range sameLen(a[1:], z[1:]) {
			out = append(out, join(lit(a[:1]), s))
		}
		return out
	}
	var out []string
	for _, s := range sameLen(a[1:], strings.Repeat("9", n-1)) {
		out = append(out, join(lit(a[:1]), s))
	}
	if a[0]+1 <= z[0]-1 {
		out = append(out, join(digitClass(a[0]+1, z[0]-1), anyDigits(n-1)))
	}
	for _, s := range sameLen(strings.Repeat("0", n-1), z[1:]) {
		out = append(out, join(lit(z[:1]), s))
	}
	return out
}

func digitClass(a, z byte) string {
	if a == z {
		return lit(string(a))
	}
	return "[" + string(a) + "-" + string(z) + "]"
}

func anyDigits(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "[0-9]"
	}
	return "[0-9]{" + strconv.Itoa(n) + "}"
}

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + " " + b
}
