package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// WMCacheEntry is a language-model world model's cached answer to one
// request: the parsed prediction (Score is meaningful when Graded; Status
// and Feedback are the outcome it predicted for a turn, "" when none) and
// the tokens the call used.
type WMCacheEntry struct {
	Graded           bool    `json:"graded"`
	Score            float64 `json:"score"`
	Status           string  `json:"status,omitempty"`
	Feedback         string  `json:"feedback,omitempty"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkWMCacheKey(model, requestSHA256 string) error {
	if model == "" {
		return errors.New("empty model")
	}
	if !sha256Hex.MatchString(requestSHA256) {
		return fmt.Errorf("request hash %q is not a lowercase hex SHA-256", requestSHA256)
	}
	return nil
}

// WorldModelAnswer returns the cached answer of model to the request whose
// body hashes to requestSHA256, or an error wrapping ErrNotFound.
func (s *Store) WorldModelAnswer(ctx context.Context, model, requestSHA256 string) (WMCacheEntry, error) {
	if err := checkWMCacheKey(model, requestSHA256); err != nil {
		return WMCacheEntry{}, fmt.Errorf("world model answer: %w", err)
	}
	var e WMCacheEntry
	var score *float64
	err := s.pool.QueryRow(ctx, `SELECT graded, score, status, feedback, prompt_tokens, completion_tokens
		FROM world_model_cache WHERE model = $1 AND request_sha256 = $2`, model, requestSHA256).
		Scan(&e.Graded, &score, &e.Status, &e.Feedback, &e.PromptTokens, &e.CompletionTokens)
	if errors.Is(err, pgx.ErrNoRows) {
		return WMCacheEntry{}, fmt.Errorf("world model answer %.12s of %s: %w", requestSHA256, model, ErrNotFound)
	}
	if err != nil {
		return WMCacheEntry{}, fmt.Errorf("world model answer %.12s of %s: %w", requestSHA256, model, err)
	}
	if score != nil {
		e.Score = *score
	}
	return e, nil
}

// AddWorldModelAnswer stores e as model's answer to the request unless an
// answer is stored already, and returns the stored answer: the first one
// wins, so callers racing on one request all use the same prediction. The
// score of a graded entry must be in [0,1]; token counts must not be
// negative.
func (s *Store) AddWorldModelAnswer(ctx context.Context, model, requestSHA256 string, e WMCacheEntry) (WMCacheEntry, error) {
	if err := checkWMCacheKey(model, requestSHA256); err != nil {
		return WMCacheEntry{}, fmt.Errorf("add world model answer: %w", err)
	}
	var score *float64
	if e.Graded {
		if !(e.Score >= 0 && e.Score <= 1) {
			return WMCacheEntry{}, fmt.Errorf("add world model answer: score %v outside [0,1]", e.Score)
		}
		score = &e.Score
	} else {
		e.Score = 0
	}
	if e.PromptTokens < 0 || e.CompletionTokens < 0 {
		return WMCacheEntry{}, fmt.Errorf("add world model answer: negative token count (%d prompt, %d completion)",
			e.PromptTokens, e.CompletionTokens)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO world_model_cache
		(model, request_sha256, graded, score, status, feedback, prompt_tokens, completion_tokens)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (model, request_sha256) DO NOTHING`,
		model, requestSHA256, e.Graded, score, e.Status, e.Feedback, e.PromptTokens, e.CompletionTokens)
	if err != nil {
		return WMCacheEntry{}, fmt.Errorf("add world model answer %.12s of %s: %w", requestSHA256, model, err)
	}
	if tag.RowsAffected() == 1 {
		return e, nil
	}
	return s.WorldModelAnswer(ctx, model, requestSHA256)
}
