package dockerrun

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
