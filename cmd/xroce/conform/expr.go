package conform

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Expr is a value relative to what the peer advertised in perftest's key message
// or answered: a number (decimal, 0x hex), or one of the symbols base (the
// advertised address), end (base plus the region's length, see Setup.Size), rkey
// (the advertised rkey), qpn (the peer's QPN) and origK (the original remote data
// in the AtomicAckETH of expected response K, from 1: what an atomic found, so
// that a scenario needs no zeroed buffer), optionally followed by +N, -N or ^N
// (exclusive or), computed modulo 2^64.
type Expr struct {
	Sym  string // "" for a plain number
	Ref  int    // origK: K
	Op   byte   // '+', '-', '^' or 0
	N    uint64
	Text string
	Line int
}

// Peer is what the peer advertised, for evaluating expressions, and the
// original remote data of its answers so far (Orig[K-1] for response K; 0 for an
// answer without an AtomicAckETH).
type Peer struct {
	QPN       uint32
	RKey      uint32
	Base      uint64
	RegionLen uint64
	Orig      []uint64
}

var exprSyms = []string{"base", "end", "rkey", "qpn", "orig"}

// ParseExpr parses an expression (see Expr).
func ParseExpr(s string) (Expr, error) {
	e := Expr{Text: s}
	t := strings.ReplaceAll(s, " ", "")
	for _, sym := range exprSyms {
		if strings.HasPrefix(t, sym) {
			e.Sym, t = sym, t[len(sym):]
			break
		}
	}
	if e.Sym == "orig" {
		k := strings.IndexAny(t, "+-^")
		if k < 0 {
			k = len(t)
		}
		n, err := strconv.Atoi(t[:k])
		if err != nil || n < 1 || t[:k] != strconv.Itoa(n) {
			return e, fmt.Errorf("%q: orig is followed by the number (from 1) of an expected ATOMIC_ACKNOWLEDGE, e.g. orig1+5", s)
		}
		e.Ref, t = n, t[k:]
	}
	if e.Sym != "" {
		if t == "" {
			return e, nil
		}
		e.Op, t = t[0], t[1:]
		if e.Op != '+' && e.Op != '-' && e.Op != '^' {
			return e, fmt.Errorf("%q: after %s comes +N, -N or ^N", s, e.Sym)
		}
	}
	n, err := strconv.ParseUint(t, 0, 64)
	if err != nil {
		return e, fmt.Errorf("%q is not a number (decimal or 0x hex) nor one of %s with an optional +N, -N or ^N", s, strings.Join(exprSyms, ", "))
	}
	e.N = n
	return e, nil
}

// Eval returns the expression's value for peer p.
func (e Expr) Eval(p Peer) uint64 {
	var v uint64
	switch e.Sym {
	case "":
		return e.N
	case "base":
		v = p.Base
	case "end":
		v = p.Base + p.RegionLen
	case "rkey":
		v = uint64(p.RKey)
	case "qpn":
		v = uint64(p.QPN)
	case "orig":
		if e.Ref <= len(p.Orig) {
			v = p.Orig[e.Ref-1]
		}
	}
	switch e.Op {
	case '+':
		v += e.N
	case '-':
		v -= e.N
	case '^':
		v ^= e.N
	}
	return v
}

// String is the expression as written, or the number in hex.
func (e Expr) String() string {
	if e.Text != "" {
		return e.Text
	}
	return fmt.Sprintf("%#x", e.N)
}

// UnmarshalYAML reads an expression from a scalar.
func (e *Expr) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a number or an expression such as base+64, not a %s", n.Line, kindName(n.Kind))
	}
	v, err := ParseExpr(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	v.Line = n.Line
	*e = v
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "value"
}
