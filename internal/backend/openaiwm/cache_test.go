package openaiwm

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/testenv"
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Both caches: a miss, then the first answer stored wins, per (model,
// request); ungraded answers are kept as ungraded.
func TestCaches(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testCacheContract(t, &Memory{}) })
	t.Run("postgres", func(t *testing.T) {
		s := testenv.FreshStore(t)
		testCacheContract(t, StoreCache{Store: s})
		ctx := t.Context()
		for _, tt := range []struct {
			name        string
			model, hash string
			e           Entry
			want        string
		}{
			{"empty model", "", hash("x"), Entry{}, "empty model"},
			{"bad hash", "m", "ABC", Entry{}, "not a lowercase hex SHA-256"},
			{"score out of range", "m", hash("y"), Entry{Prediction: backend.Prediction{Graded: true, Score: 1.5}}, "outside [0,1]"},
			{"negative tokens", "m", hash("z"), Entry{PromptTokens: -1}, "negative token count"},
		} {
			if _, err := (StoreCache{Store: s}).Add(ctx, tt.model, tt.hash, tt.e); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: Add = %v, want an error saying %q", tt.name, err, tt.want)
			}
		}
	})
}

func testCacheContract(t *testing.T, c Cache) {
	ctx := t.Context()
	k := hash("request")
	if _, ok, err := c.Get(ctx, "m", k); ok || err != nil {
		t.Fatalf("Get on an empty cache = %v, %v", ok, err)
	}
	first := Entry{Prediction: backend.Prediction{Graded: true, Score: 0.625, Tokens: 12}, PromptTokens: 10, CompletionTokens: 2}
	got, err := c.Add(ctx, "m", k, first)
	if err != nil || got != first {
		t.Fatalf("Add = %+v, %v; want %+v", got, err, first)
	}
	second := Entry{Prediction: backend.Prediction{Graded: true, Score: 0.1, Tokens: 2}, PromptTokens: 1, CompletionTokens: 1}
	if got, err := c.Add(ctx, "m", k, second); err != nil || got != first {
		t.Errorf("second Add = %+v, %v; want the first answer %+v", got, err, first)
	}
	if got, ok, err := c.Get(ctx, "m", k); !ok || err != nil || got != first {
		t.Errorf("Get = %+v, %v, %v; want %+v", got, ok, err, first)
	}
	// Another model, same request: another entry.
	if _, ok, _ := c.Get(ctx, "other", k); ok {
		t.Error("an answer of model m served for model other")
	}
	un := Entry{Prediction: backend.Prediction{Tokens: 7}, PromptTokens: 4, CompletionTokens: 3}
	if got, err := c.Add(ctx, "other", k, un); err != nil || got != un {
		t.Errorf("Add ungraded = %+v, %v", got, err)
	}
	if got, ok, err := c.Get(ctx, "other", k); !ok || err != nil || got != un {
		t.Errorf("Get ungraded = %+v, %v, %v; want %+v", got, ok, err, un)
	}
	// A turn's answer keeps its predicted outcome, so that the cached
	// answer gives the same observation.
	outcome := Entry{Prediction: backend.Prediction{Graded: true, Score: 0.1, Status: "runtime_error",
		Feedback: "Traceback (most recent call last):\nKeyError: 'y'", Tokens: 30}, PromptTokens: 20, CompletionTokens: 10}
	kt := hash("turn request")
	if got, err := c.Add(ctx, "m", kt, outcome); err != nil || got != outcome {
		t.Errorf("Add outcome = %+v, %v", got, err)
	}
	if got, ok, err := c.Get(ctx, "m", kt); !ok || err != nil || got != outcome {
		t.Errorf("Get outcome = %+v, %v, %v; want %+v", got, ok, err, outcome)
	}
}
