package dockerrun

import "fmt"

// Capped keeps the first max bytes written to it and counts them all,
// never failing, so a flooding process can neither block nor exhaust
// memory. The zero value keeps nothing.
type Capped struct {
	head  []byte
	max   int
	total int64
}

// NewCapped keeps up to max bytes.
func NewCapped(max int) *Capped { return &Capped{max: max} }

// Write keeps what fits and always reports all of p written.
func (c *Capped) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Bytes is what was kept: the first max bytes written.
func (c *Capped) Bytes() []byte { return c.head }

// String is Bytes as a string.
func (c *Capped) String() string { return string(c.head) }

// Total counts every byte written, kept or not.
func (c *Capped) Total() int64 { return c.total }

// Truncated reports whether more was written than kept.
func (c *Capped) Truncated() bool { return c.total > int64(len(c.head)) }

// HeadTail keeps the first head and the last tail bytes written to it and
// counts them all, never failing: a flooding process can neither block
// nor exhaust memory (it holds at most head + tail bytes), and the end of
// its output (where a traceback is) is kept as well as its start. The
// tail is a ring allocated when the head is full.
type HeadTail struct {
	head         []byte
	maxHead      int
	ring         []byte // len maxTail once allocated
	maxTail      int
	next, stored int // the ring's next write position and its bytes
	total        int64
}

// NewHeadTail keeps up to head bytes of the start and tail of the end.
func NewHeadTail(head, tail int) *HeadTail {
	return &HeadTail{maxHead: max(0, head), maxTail: max(0, tail)}
}

// Write keeps what the head and the tail hold and always reports all of p
// written.
func (c *HeadTail) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.maxHead - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.maxTail == 0 {
		return n, nil
	}
	if c.ring == nil {
		c.ring = make([]byte, c.maxTail)
	}
	if len(p) >= c.maxTail {
		copy(c.ring, p[len(p)-c.maxTail:])
		c.next, c.stored = 0, c.maxTail
		return n, nil
	}
	k := copy(c.ring[c.next:], p)
	copy(c.ring, p[k:])
	c.next = (c.next + len(p)) % c.maxTail
	c.stored = min(c.maxTail, c.stored+len(p))
	return n, nil
}

// Head is the first bytes written (up to head).
func (c *HeadTail) Head() []byte { return c.head }

// Tail is the last bytes written after the head (up to tail), in order.
func (c *HeadTail) Tail() []byte {
	if c.stored < c.maxTail {
		return append([]byte(nil), c.ring[:c.stored]...)
	}
	return append(append(make([]byte, 0, c.maxTail), c.ring[c.next:]...), c.ring[:c.next]...)
}

// Total counts every byte written, kept or not.
func (c *HeadTail) Total() int64 { return c.total }

// Cut counts the bytes written between the head and the tail, kept by
// neither.
func (c *HeadTail) Cut() int64 { return c.total - int64(len(c.head)) - int64(c.stored) }

// Bytes is the head, then, when bytes were cut, a line saying how many
// (CutLine), then the tail.
func (c *HeadTail) Bytes() []byte {
	out := append([]byte(nil), c.head...)
	if cut := c.Cut(); cut > 0 {
		out = append(out, CutLine(cut)...)
	}
	return append(out, c.Tail()...)
}

// CutLine is the line HeadTail.Bytes puts where n bytes were cut.
func CutLine(n int64) string { return fmt.Sprintf("\n[... %d bytes cut ...]\n", n) }
