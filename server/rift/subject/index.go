package subject

// Index maps patterns to values and finds every value whose pattern matches a literal subject by
// walking a token trie: the cost of a lookup grows with the subject's token count and the number
// of matching wildcard branches, not with the number of entries.
//
// An Index is not safe for concurrent use: callers hold their own lock (the bus takes a read lock
// for Match and a write lock for Insert and Remove).
type Index[T comparable] struct {
	root node[T]
	n    int
}

type node[T comparable] struct {
	literal map[string]*node[T]
	star    *node[T] // the '*' child
	gt      []T      // values whose pattern ends with '>' here
	here    []T      // values whose pattern ends exactly at this node
}

// Len returns the number of entries.
func (x *Index[T]) Len() int { return x.n }

// Insert adds v under pattern p (assumed valid). The same (p, v) pair may be inserted once.
func (x *Index[T]) Insert(p string, v T) {
	n := &x.root
	for rest := p; ; {
		tok, more := cut(rest)
		if tok == ">" {
			n.gt = append(n.gt, v)
			break
		}
		n = n.child(tok)
		if more == "" {
			n.here = append(n.here, v)
			break
		}
		rest = more
	}
	x.n++
}

func (n *node[T]) child(tok string) *node[T] {
	if tok == "*" {
		if n.star == nil {
			n.star = &node[T]{}
		}
		return n.star
	}
	c := n.literal[tok]
	if c == nil {
		if n.literal == nil {
			n.literal = map[string]*node[T]{}
		}
		c = &node[T]{}
		n.literal[tok] = c
	}
	return c
}

// Remove deletes v from under pattern p and prunes emptied branches. It reports whether v was
// there.
func (x *Index[T]) Remove(p string, v T) bool {
	if x.root.remove(p, v) {
		x.n--
		return true
	}
	return false
}

func (n *node[T]) remove(p string, v T) bool {
	tok, more := cut(p)
	if tok == ">" {
		var ok bool
		n.gt, ok = without(n.gt, v)
		return ok
	}
	var c *node[T]
	if tok == "*" {
		c = n.star
	} else {
		c = n.literal[tok]
	}
	if c == nil {
		return false
	}
	var ok bool
	if more == "" {
		c.here, ok = without(c.here, v)
	} else {
		ok = c.remove(more, v)
	}
	if ok && c.empty() {
		if tok == "*" {
			n.star = nil
		} else {
			delete(n.literal, tok)
		}
	}
	return ok
}

func (n *node[T]) empty() bool {
	return len(n.literal) == 0 && n.star == nil && len(n.gt) == 0 && len(n.here) == 0
}

func without[T comparable](s []T, v T) ([]T, bool) {
	for i, e := range s {
		if e == v {
			last := len(s) - 1
			s[i] = s[last]
			var zero T
			s[last] = zero
			return s[:last], true
		}
	}
	return s, false
}

// Match appends to dst every value whose pattern matches the literal subject s (assumed valid)
// and returns the extended slice. Each value appears once per pattern it was inserted under.
func (x *Index[T]) Match(dst []T, s string) []T {
	return x.root.match(dst, s)
}

func (n *node[T]) match(dst []T, s string) []T {
	dst = append(dst, n.gt...) // s has at least one more token
	tok, more := cut(s)
	if c := n.literal[tok]; c != nil {
		dst = c.matchNext(dst, more)
	}
	if n.star != nil {
		dst = n.star.matchNext(dst, more)
	}
	return dst
}

func (n *node[T]) matchNext(dst []T, more string) []T {
	if more == "" {
		return append(dst, n.here...)
	}
	return n.match(dst, more)
}

// All appends every value in the index to dst.
func (x *Index[T]) All(dst []T) []T { return x.root.all(dst) }

func (n *node[T]) all(dst []T) []T {
	dst = append(append(dst, n.here...), n.gt...)
	for _, c := range n.literal {
		dst = c.all(dst)
	}
	if n.star != nil {
		dst = n.star.all(dst)
	}
	return dst
}
