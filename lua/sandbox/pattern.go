package sandbox

// A Lua 5.1 pattern matcher (the manual's §5.4.1, after lstrlib.c's backtracking match) that
// counts its steps and asks its budget every checkSteps of them, so that a pattern that
// backtracks for hours ends with the run's budget. gopher-lua's own matcher (pm) cannot be
// interrupted: one string.find is one VM instruction.

const (
	maxCaptures = 32 // LUA_MAXCAPTURES
	// maxMatchDepth bounds the matcher's recursion (Lua 5.2's MAXCCALLS): each optional,
	// repeated or captured item of a pattern nests one call.
	maxMatchDepth = 200
	// checkSteps is how many matcher steps run between two budget checks (a step is a few
	// nanoseconds: a check every few microseconds).
	checkSteps    = 4096
	capUnfinished = -1
	capPosition   = -2
)

// patternError is a malformed pattern, or a matcher that ran out of its budget (the run's budget
// then says so: State.Call reports ErrTimeout).
type patternError struct{ msg string }

type capture struct {
	init, len int
}

// matcher is one match of a pattern against a subject. over reports whether the run's budget
// has run out.
type matcher struct {
	src, pat string
	level    int
	capture  [maxCaptures]capture
	depth    int
	steps    int // work done, in steps of a few nanoseconds
	check    int // the step count at which to ask the budget next
	over     func() bool
}

func (m *matcher) fail(msg string) { panic(&patternError{msg: msg}) }

// step counts one unit of work and ends the match when the budget has run out.
func (m *matcher) step() { m.work(1) }

// work counts n units of work (a set of n characters read, n bytes compared), asking the budget
// every checkSteps of them.
func (m *matcher) work(n int) {
	if m.steps += n; m.steps >= m.check {
		m.check = m.steps + checkSteps
		if m.over != nil && m.over() {
			panic(&patternError{msg: "script timed out"})
		}
	}
}

// at returns the pattern byte at p, or 0 past its end (C's terminating NUL).
func (m *matcher) at(p int) byte {
	if p < len(m.pat) {
		return m.pat[p]
	}
	return 0
}

func (m *matcher) classEnd(p int) int {
	c := m.pat[p]
	p++
	switch c {
	case '%':
		if p >= len(m.pat) {
			m.fail("malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if m.at(p) == '^' {
			p++
		}
		start := p
		for { // look for a ']'; the first character of the set may be one
			if p >= len(m.pat) {
				m.fail("malformed pattern (missing ']')")
			}
			c := m.pat[p]
			p++
			if c == '%' && p < len(m.pat) {
				p++ // skip escapes (e.g. '%]')
			}
			if m.at(p) == ']' {
				m.work((p - start) / 8) // reading a long set is work too
				return p + 1
			}
		}
	}
	return p
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return isLower(c) || isUpper(c) }
func isSpace(c byte) bool { return c == ' ' || ('\t' <= c && c <= '\r') }
func isCntrl(c byte) bool { return c < 32 || c == 127 }
func isPunct(c byte) bool { return c > 32 && c < 127 && !isAlpha(c) && !isDigit(c) }
func isXDigit(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// matchClass reports whether c is in the class %cl (the C locale's classes).
func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = isCntrl(c)
	case 'd':
		res = isDigit(c)
	case 'l':
		res = isLower(c)
	case 'p':
		res = isPunct(c)
	case 's':
		res = isSpace(c)
	case 'u':
		res = isUpper(c)
	case 'w':
		res = isAlpha(c) || isDigit(c)
	case 'x':
		res = isXDigit(c)
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if isUpper(cl) {
		return !res
	}
	return res
}

// matchBracketClass reports whether c is in the set pat[p:ec+1] (p at '[', ec at ']').
func (m *matcher) matchBracketClass(c byte, p, ec int) bool {
	m.work((ec - p) / 8)
	sig := true
	if m.at(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case m.pat[p] == '%':
			p++
			if matchClass(c, m.at(p)) {
				return sig
			}
		case m.at(p+1) == '-' && p+2 < ec:
			p += 2
			if m.pat[p-2] <= c && c <= m.pat[p] {
				return sig
			}
		case m.pat[p] == c:
			return sig
		}
	}
	return !sig
}

// singleMatch reports whether the subject byte at s matches the item pat[p:ep].
func (m *matcher) singleMatch(s, p, ep int) bool {
	if s >= len(m.src) {
		return false
	}
	c := m.src[s]
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, m.at(p+1))
	case '[':
		return m.matchBracketClass(c, p, ep-1)
	}
	return m.pat[p] == c
}

// match matches pat[p:] at src[s:], returning the end of the match or -1.
func (m *matcher) match(s, p int) int {
	if m.depth++; m.depth > maxMatchDepth {
		m.fail("pattern too complex")
	}
	defer func() { m.depth-- }()
	for {
		m.step()
		if p >= len(m.pat) {
			return s
		}
		switch m.pat[p] {
		case '(':
			if m.at(p+1) == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case '$':
			if p+1 == len(m.pat) {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		case '%':
			if s2, p2, ok := m.escape(s, p); ok {
				if s2 < 0 {
					return -1
				}
				s, p = s2, p2
				continue
			}
		}
		// a single-character item, maybe with a repetition suffix
		ep := m.classEnd(p)
		matched := m.singleMatch(s, p, ep)
		switch m.at(ep) {
		case '?':
			if matched {
				if res := m.match(s+1, ep+1); res >= 0 {
					return res
				}
			}
			p = ep + 1
			continue
		case '*':
			return m.maxExpand(s, p, ep)
		case '+':
			if !matched {
				return -1
			}
			return m.maxExpand(s+1, p, ep)
		case '-':
			return m.minExpand(s, p, ep)
		}
		if !matched {
			return -1
		}
		s, p = s+1, ep
	}
}

// escape matches the items %b, %f and %1-%9 at pat[p:] against src[s:], returning where
// the match goes on (s -1 when it fails); ok is false for another escape (a class such as %a).
func (m *matcher) escape(s, p int) (int, int, bool) {
	switch c := m.at(p + 1); {
	case c == 'b':
		return m.matchBalance(s, p+2), p + 4, true
	case c == 'f':
		p += 2
		if m.at(p) != '[' {
			m.fail("missing '[' after '%f' in pattern")
		}
		ep := m.classEnd(p)
		var prev, cur byte // the subject's ends read as '\0'
		if s > 0 {
			prev = m.src[s-1]
		}
		if s < len(m.src) {
			cur = m.src[s]
		}
		if m.matchBracketClass(prev, p, ep-1) || !m.matchBracketClass(cur, p, ep-1) {
			return -1, ep, true
		}
		return s, ep, true
	case isDigit(c):
		return m.matchCapture(s, c), p + 2, true
	}
	return s, p, false
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for m.singleMatch(s+i, p, ep) {
		m.step()
		i++
	}
	for ; i >= 0; i-- { // try the most repetitions first
		if res := m.match(s+i, ep+1); res >= 0 {
			return res
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if res := m.match(s, ep+1); res >= 0 {
			return res
		}
		if !m.singleMatch(s, p, ep) {
			return -1
		}
		s++
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		m.fail("too many captures")
	}
	m.capture[m.level] = capture{init: s, len: what}
	m.level++
	res := m.match(s, p)
	if res < 0 {
		m.level--
	}
	return res
}

func (m *matcher) endCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.capture[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.fail("invalid pattern capture")
	}
	m.capture[l].len = s - m.capture[l].init
	res := m.match(s, p)
	if res < 0 {
		m.capture[l].len = capUnfinished
	}
	return res
}

func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.pat) {
		m.fail("unbalanced pattern")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	b, e, cont := m.pat[p], m.pat[p+1], 1
	for s++; s < len(m.src); s++ {
		m.step()
		switch m.src[s] {
		case e:
			if cont--; cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (m *matcher) matchCapture(s int, c byte) int {
	l := int(c) - '1'
	if l < 0 || l >= m.level || m.capture[l].len == capUnfinished {
		m.fail("invalid capture index")
	}
	n := m.capture[l].len
	if n == capPosition {
		return -1 // as in C Lua, where its length is a huge unsigned number
	}
	init := m.capture[l].init
	if len(m.src)-s >= n && m.src[init:init+n] == m.src[s:s+n] {
		m.work(n / 8)
		return s + n
	}
	return -1
}

// find looks for the first match of m.pat (without its anchor) in m.src starting at init or
// later (only at init when anchored). It returns the match's bounds, or start -1.
func (m *matcher) find(init int, anchored bool) (start, end int) {
	for s := init; s <= len(m.src); s++ {
		m.level, m.depth = 0, 0
		if e := m.match(s, 0); e >= 0 {
			return s, e
		}
		if anchored {
			break
		}
	}
	return -1, -1
}

// captureValue is capture i of the last match whose bounds are s, e: a string, or a position
// (1-based) when pos is true. Capture 0 of a pattern without captures is the whole match.
func (m *matcher) captureValue(i, s, e int) (str string, position int, pos bool) {
	if i >= m.level {
		if i != 0 {
			m.fail("invalid capture index")
		}
		return m.src[s:e], 0, false
	}
	c := m.capture[i]
	switch c.len {
	case capUnfinished:
		m.fail("unfinished capture")
	case capPosition:
		return "", c.init + 1, true
	}
	return m.src[c.init : c.init+c.len], 0, false
}

// captures is how many values a match's captures give (1 when the pattern has none).
func (m *matcher) captures() int { return max(m.level, 1) }
