package turns

import (
	"fmt"
	"strconv"
	"strings"
)

// Parsed is what ParseObservation reads back from an observation: the
// status and, when the answer was graded, its score bucket.
type Parsed struct {
	Status string
	Graded bool
	Bucket int
}

// ParseObservation reads the status and score bucket back from a text
// Render made (its first three lines), as a policy that sees only the
// observation's tokens (the built-in policy served over the Tinker API)
// conditions on them.
func ParseObservation(text string) (Parsed, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] != Header {
		return Parsed{}, fmt.Errorf("observation: want %q, a status and a score bucket line", Header)
	}
	status, ok := strings.CutPrefix(lines[1], "status: ")
	if !ok || status == "" {
		return Parsed{}, fmt.Errorf("observation line 2 %q: want \"status: <status>\"", lines[1])
	}
	b, ok := strings.CutPrefix(lines[2], "score bucket: ")
	if !ok {
		return Parsed{}, fmt.Errorf("observation line 3 %q: want \"score bucket: <k>/%d\" or \"score bucket: none\"", lines[2], Buckets-1)
	}
	p := Parsed{Status: status}
	if b == "none" {
		return p, nil
	}
	k, ok := strings.CutSuffix(b, fmt.Sprintf("/%d", Buckets-1))
	n, err := strconv.Atoi(k)
	if !ok || err != nil || n < 0 || n >= Buckets {
		return Parsed{}, fmt.Errorf("observation line 3 %q: want a bucket 0/%d to %d/%d or none", lines[2], Buckets-1, Buckets-1, Buckets-1)
	}
	p.Graded, p.Bucket = true, n
	return p, nil
}
