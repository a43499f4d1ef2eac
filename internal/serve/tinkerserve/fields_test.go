package tinkerserve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// sdkFields is testdata/sdk_request_fields.json of the client's package:
// the fields of the Tinker SDK's request types at 0.16.1, 0.19.0 and
// 0.25.0, and which path takes which type.
type sdkFields struct {
	Paths map[string]string `json:"paths"`
	Types map[string]map[string]struct {
		Type     string `json:"type"`
		Required bool   `json:"required"`
	} `json:"types"`
}

func loadSDKFields(t *testing.T) sdkFields {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "backend", "tinker", "testdata", "sdk_request_fields.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f sdkFields
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// check reports the first field of v (at path at) that the SDK's type typ
// lacks, or a required one v lacks.
func (f sdkFields) check(typ string, v any, at string) error {
	switch {
	case strings.HasPrefix(typ, "[]"):
		xs, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want a list", at)
		}
		for i, x := range xs {
			if err := f.check(typ[2:], x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return nil
	case strings.HasPrefix(typ, "{}"):
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object", at)
		}
		for k, x := range m {
			if err := f.check(typ[2:], x, at+"."+k); err != nil {
				return err
			}
		}
		return nil
	}
	fields, ok := f.Types[typ]
	if !ok {
		return fmt.Errorf("%s: no SDK type %s", at, typ)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want an object (%s)", at, typ)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fd, ok := fields[k]
		if !ok {
			return fmt.Errorf("%s.%s: the SDK's %s has no such field", at, k, typ)
		}
		if fd.Type != "" && m[k] != nil {
			if err := f.check(fd.Type, m[k], at+"."+k); err != nil {
				return err
			}
		}
	}
	for k, fd := range fields {
		if _, ok := m[k]; fd.Required && !ok {
			return fmt.Errorf("%s.%s: required by the SDK's %s, missing", at, k, typ)
		}
	}
	return nil
}

// bodyChecker records the request bodies a handler gets, by path.
type bodyChecker struct {
	mu     sync.Mutex
	bodies map[string][][]byte
}

func (c *bodyChecker) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		if c.bodies == nil {
			c.bodies = map[string][][]byte{}
		}
		c.bodies[r.URL.Path] = append(c.bodies[r.URL.Path], body)
		c.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// verify checks every recorded body against the SDK's request types and
// that every path in want was called.
func (c *bodyChecker) verify(t *testing.T, want ...string) {
	t.Helper()
	f := loadSDKFields(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range want {
		if len(c.bodies[p]) == 0 {
			t.Errorf("no %s request was sent", p)
		}
	}
	n := 0
	for p, bs := range c.bodies {
		typ, ok := f.Paths[p]
		if !ok {
			t.Errorf("%s: a path the SDK does not post to", p)
			continue
		}
		for _, b := range bs {
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if err := f.check(typ, v, typ); err != nil {
				t.Errorf("%s body %s: %v", p, b, err)
			}
			n++
		}
	}
	t.Logf("%d request bodies match the SDK's request types", n)
}
