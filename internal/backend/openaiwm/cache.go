package openaiwm

import (
	"context"
	"errors"
	"sync"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/store"
)

// Entry is a cached answer: its parsed prediction and the tokens the call
// used.
type Entry struct {
	Prediction       backend.Prediction
	PromptTokens     int
	CompletionTokens int
}

// Cache keeps answers by (model, SHA-256 of the request body).
type Cache interface {
	// Get returns the answer stored for the request, if any.
	Get(ctx context.Context, model, requestSHA256 string) (Entry, bool, error)
	// Add stores e unless an answer is stored already, and returns the
	// stored answer (the first one wins).
	Add(ctx context.Context, model, requestSHA256 string, e Entry) (Entry, error)
}

// Memory is a Cache in this process's memory, for tests and single-worker
// runs. The zero value is ready.
type Memory struct {
	mu sync.Mutex
	m  map[[2]string]Entry
}

var _ Cache = (*Memory)(nil)

// Get returns the stored answer.
func (c *Memory) Get(ctx context.Context, model, requestSHA256 string) (Entry, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[[2]string{model, requestSHA256}]
	return e, ok, nil
}

// Add stores e unless an answer is stored, and returns the stored answer.
func (c *Memory) Add(ctx context.Context, model, requestSHA256 string, e Entry) (Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]string{model, requestSHA256}
	if old, ok := c.m[k]; ok {
		return old, nil
	}
	if c.m == nil {
		c.m = map[[2]string]Entry{}
	}
	c.m[k] = e
	return e, nil
}

// Len returns the number of stored answers.
func (c *Memory) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// StoreCache is a Cache in Postgres (the world_model_cache table), shared
// by every worker of a deployment.
type StoreCache struct {
	Store *store.Store
}

var _ Cache = StoreCache{}

// Get returns the stored answer.
func (c StoreCache) Get(ctx context.Context, model, requestSHA256 string) (Entry, bool, error) {
	e, err := c.Store.WorldModelAnswer(ctx, model, requestSHA256)
	if errors.Is(err, store.ErrNotFound) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	return entryOf(e), true, nil
}

// Add stores e unless an answer is stored, and returns the stored answer.
func (c StoreCache) Add(ctx context.Context, model, requestSHA256 string, e Entry) (Entry, error) {
	got, err := c.Store.AddWorldModelAnswer(ctx, model, requestSHA256, store.WMCacheEntry{
		Graded: e.Prediction.Graded, Score: e.Prediction.Score, Status: e.Prediction.Status,
		Feedback: e.Prediction.Feedback, PromptTokens: e.PromptTokens, CompletionTokens: e.CompletionTokens})
	if err != nil {
		return Entry{}, err
	}
	return entryOf(got), nil
}

func entryOf(e store.WMCacheEntry) Entry {
	p := backend.Prediction{Graded: e.Graded, Tokens: e.PromptTokens + e.CompletionTokens}
	if e.Graded {
		p.Score, p.Status, p.Feedback = e.Score, e.Status, e.Feedback
	}
	return Entry{Prediction: p, PromptTokens: e.PromptTokens, CompletionTokens: e.CompletionTokens}
}
