package snapshots

import "sort"

// DiffTree returns the tree of signed deltas b - a: the two trees merged
// frame by frame (by function, file:line and object, never by address),
// each node's Bytes the after side's minus the before side's. Lines of one
// parent that name the same frame are merged, and so are its
// below-threshold buckets. The result is an ordinary tree: Sites, the
// renderers and the exporters take it like any other, and because sites
// are linear in the bytes, Sites(DiffTree(a, b)) gives each site's delta.
// Children are ordered by the size of their change, largest first.
func DiffTree(a, b *Node) *Node {
	var as, bs []*Node
	if a != nil {
		as = []*Node{a}
	}
	if b != nil {
		bs = []*Node{b}
	}
	if len(as) == 0 && len(bs) == 0 {
		return nil
	}
	return mergeDelta(as, bs)
}

// treeKey identifies a tree line among its siblings.
type treeKey struct {
	below bool
	frame Frame
}

func keyOfNode(n *Node) treeKey {
	if n.Below {
		return treeKey{below: true}
	}
	f := n.Frame
	f.Addr = ""
	return treeKey{frame: f}
}

// mergeDelta merges the before-side lines as and after-side lines bs that
// share one key.
func mergeDelta(as, bs []*Node) *Node {
	out := &Node{}
	first := as
	if len(bs) > 0 {
		first = bs
	}
	out.Frame = first[0].Frame
	out.Frame.Addr = ""
	out.Below = first[0].Below
	for _, n := range bs {
		out.Bytes += n.Bytes
		out.Places += n.Places
	}
	for _, n := range as {
		out.Bytes -= n.Bytes
	}
	if len(bs) == 0 {
		for _, n := range as {
			out.Places += n.Places
		}
	}

	type pair struct{ as, bs []*Node }
	groups := make(map[treeKey]*pair)
	var order []treeKey
	group := func(k treeKey) *pair {
		p := groups[k]
		if p == nil {
			p = &pair{}
			groups[k] = p
			order = append(order, k)
		}
		return p
	}
	for _, n := range as {
		for _, c := range n.Children {
			if c == nil {
				continue
			}
			p := group(keyOfNode(c))
			p.as = append(p.as, c)
		}
	}
	for _, n := range bs {
		for _, c := range n.Children {
			if c == nil {
				continue
			}
			p := group(keyOfNode(c))
			p.bs = append(p.bs, c)
		}
	}
	if len(order) > 0 {
		out.Children = make([]*Node, 0, len(order))
	}
	for _, k := range order {
		p := groups[k]
		out.Children = append(out.Children, mergeDelta(p.as, p.bs))
	}
	sort.SliceStable(out.Children, func(i, j int) bool {
		ci, cj := out.Children[i], out.Children[j]
		return deltaFirst(ci.Bytes, cj.Bytes, ci.Below, cj.Below, ci.Frame, cj.Frame)
	})
	return out
}

// deltaFirst orders the children of a delta tree: the largest change
// first, then real frames before the below-threshold buckets, then by
// frame. The growth graph and DiffTree order alike with it.
func deltaFirst(xBytes, yBytes int64, xBelow, yBelow bool, x, y Frame) bool {
	if a, b := absBytes(xBytes), absBytes(yBytes); a != b {
		return a > b
	}
	if xBelow != yBelow {
		return yBelow // buckets last
	}
	return frameLess(x, y)
}
