package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TinkerRequest is a journal entry of the Tinker policy adapter: a request
// it is about to send (RequestID empty) or has sent.
type TinkerRequest struct {
	Key       string
	ModelID   string
	SeqID     int64
	RequestID string
}

// BeginTinkerRequest records r (without its request id) unless its key is
// already journalled, and returns the journalled entry: the new one, or the
// earlier one with its request id if it was sent.
func (s *Store) BeginTinkerRequest(ctx context.Context, r TinkerRequest) (TinkerRequest, error) {
	if r.Key == "" {
		return TinkerRequest{}, errors.New("begin tinker request: empty key")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO tinker_journal (key, model_id, seq_id) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO NOTHING`, r.Key, r.ModelID, r.SeqID)
	if err != nil {
		return TinkerRequest{}, fmt.Errorf("begin tinker request %s: %w", r.Key, err)
	}
	var got TinkerRequest
	var id *string
	err = s.pool.QueryRow(ctx, `SELECT key, model_id, seq_id, request_id FROM tinker_journal WHERE key = $1`, r.Key).
		Scan(&got.Key, &got.ModelID, &got.SeqID, &id)
	if err != nil {
		return TinkerRequest{}, fmt.Errorf("begin tinker request %s: %w", r.Key, err)
	}
	if id != nil {
		got.RequestID = *id
	}
	return got, nil
}

// SetTinkerRequestID records the request id of a begun entry: a no-op if
// the same id is recorded, an ErrConflict if another one is.
func (s *Store) SetTinkerRequestID(ctx context.Context, key, requestID string) error {
	if requestID == "" {
		return fmt.Errorf("set tinker request %s: empty request id", key)
	}
	var stored *string
	err := s.pool.QueryRow(ctx, `UPDATE tinker_journal SET request_id = COALESCE(request_id, $2) WHERE key = $1
		RETURNING request_id`, key, requestID).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("set tinker request %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("set tinker request %s: %w", key, err)
	}
	if *stored != requestID {
		return fmt.Errorf("set tinker request %s: request %s recorded, not %s: %w", key, *stored, requestID, ErrConflict)
	}
	return nil
}
