package tinkerserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/policy"
)

// The endpoints the official SDK calls besides the training calls of
// internal/backend/tinker.
const (
	PathHealthz               = "/api/v1/healthz"
	PathServerCapabilities    = "/api/v1/get_server_capabilities"
	PathClientConfig          = "/api/v1/client/config"
	PathClientDynamicConfig   = "/api/v1/client/dynamic_config"
	PathCreateSamplingSession = "/api/v1/create_sampling_session"
	PathWeightsInfo           = "/api/v1/weights_info"
	PathTelemetry             = "/api/v1/telemetry"
	PathUnloadModel           = "/api/v1/unload_model"
)

// clientConfig answers the SDK's start-up flags (client/config, SDK ≥
// 0.19): the httpx transport (not pyqwest), protobuf forward_backward
// bodies (SDK ≥ 0.24 always sends them, 0.19 when proto_write_fwdbwd is
// true), uncompressed (no zstd), and create_training_client_from_state as
// one load_weights that creates the model (session_id + model_seq_id).
// Every other flag keeps the SDK's default.
func (s *Server) clientConfig(context.Context, []byte, string) (any, error) {
	return map[string]any{
		"use_pyqwest_transport":         false,
		"proto_compress_fwdbwd":         false,
		"proto_write_fwdbwd":            true,
		"create_model_via_load_weights": true,
		"pjwt_auth_enabled":             false,
	}, nil
}

func (s *Server) clientDynamicConfig(context.Context, []byte, string) (any, error) {
	return map[string]any{"refresh_interval_sec": 300}, nil
}

// capabilities lists the one base model (get_server_capabilities).
func (s *Server) capabilities(context.Context, []byte, string) (any, error) {
	return map[string]any{"supported_models": []map[string]any{{"model_name": tinker.BuiltinBaseModel, "max_context_length": maxContext}}}, nil
}

// maxContext is the longest model input the server takes: a prompt of up
// to a few hundred bytes and a program.
const maxContext = 4096

// telemetry accepts the SDK's telemetry batches and drops them.
func (s *Server) telemetry(context.Context, []byte, string) (any, error) {
	return map[string]string{"status": "accepted"}, nil
}

func (s *Server) unloadModel(ctx context.Context, body []byte, idem string) (any, error) {
	var req struct {
		ModelID string `json:"model_id"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return s.modelOp(ctx, "unload_model", req.ModelID, nil, idem, func(pgx.Tx, *modelState) (any, error) {
		return map[string]string{"model_id": req.ModelID, "type": "unload_model"}, nil
	})
}

// weightsInfo describes saved weights (weights_info {tinker_path}), as
// create_training_client_from_state asks before creating the model.
func (s *Server) weightsInfo(ctx context.Context, body []byte, _ string) (any, error) {
	var req struct {
		TinkerPath string `json:"tinker_path"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	model, kind, name, ok := parseAnyPath(req.TinkerPath)
	if !ok {
		return nil, bad("tinker_path", "%q: want tinker://<model>/weights/<name> or tinker://<model>/sampler_weights/<name>", req.TinkerPath)
	}
	var base string
	var rank int
	err := s.db.QueryRow(ctx, `SELECT m.base_model, m.lora_rank FROM tinker_weights w JOIN tinker_models m USING (model_id)
		WHERE w.model_id = $1 AND w.kind = $2 AND w.name = $3`, model, kind, name).Scan(&base, &rank)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("tinker_path", "no weights %s", req.TinkerPath)
	}
	if err != nil {
		return nil, fmt.Errorf("weights info: %w", err)
	}
	return map[string]any{"base_model": base, "is_lora": true, "lora_rank": rank}, nil
}

// parseAnyPath accepts a training or a sampler path.
func parseAnyPath(p string) (model, kind, name string, ok bool) {
	if m, n, ok := parseTrainingPath(p); ok {
		return m, "training", n, true
	}
	if m, n, ok := parseSamplerPath(p); ok {
		return m, "sampler", n, true
	}
	return "", "", "", false
}

// samplingSession is what a sampling session samples from: saved sampler
// weights, or the base model.
type samplingSession struct {
	ModelPath string `json:"model_path,omitempty"`
	BaseModel string `json:"base_model,omitempty"`
}

// A sampling session is kept as a row of tinker_futures of kind
// sampling_session under the idempotency key samplingKey(id), its id
// derived from (session, sampling_session_seq_id) as the SDK derives a
// model's: a repeated create_sampling_session gets the same session.
const samplingKind = "sampling_session"

func samplingKey(id string) string { return "wmrl/sampling_session/" + id }

func samplingID(session string, seq int64) string {
	return session + ":sample:" + strconv.FormatInt(seq, 10)
}

// putSamplingSession records a sampling session (idempotent).
func putSamplingSession(ctx context.Context, tx pgx.Tx, id string, ss samplingSession) error {
	raw, err := json.Marshal(ss)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO tinker_futures (kind, idempotency_key, result) VALUES ($1, $2, $3)
		ON CONFLICT (idempotency_key) DO NOTHING`, samplingKind, samplingKey(id), raw)
	return err
}

// getSamplingSession looks a sampling session up.
func (s *Server) getSamplingSession(ctx context.Context, id string) (samplingSession, *httpError) {
	var raw []byte
	err := s.db.QueryRow(ctx, `SELECT result FROM tinker_futures WHERE kind = $1 AND idempotency_key = $2`, samplingKind, samplingKey(id)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return samplingSession{}, notFound("sampling_session_id", "no sampling session %q", id)
	}
	if err != nil {
		return samplingSession{}, &httpError{status: 500, msg: fmt.Sprintf("sampling session: %v", err)}
	}
	var ss samplingSession
	if err := json.Unmarshal(raw, &ss); err != nil {
		return samplingSession{}, &httpError{status: 500, msg: fmt.Sprintf("sampling session %s: %v", id, err)}
	}
	return ss, nil
}

// createSamplingSession opens a sampling session on saved sampler weights
// or the base model (create_sampling_session).
func (s *Server) createSamplingSession(ctx context.Context, body []byte, _ string) (any, error) {
	var req struct {
		SessionID            string  `json:"session_id"`
		SamplingSessionSeqID *int64  `json:"sampling_session_seq_id"`
		BaseModel            *string `json:"base_model"`
		ModelPath            *string `json:"model_path"`
		Type                 string  `json:"type"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	switch {
	case req.SessionID == "":
		return nil, bad("session_id", "required")
	case req.SamplingSessionSeqID == nil:
		return nil, bad("sampling_session_seq_id", "required")
	}
	var ss samplingSession
	switch {
	case req.ModelPath != nil && *req.ModelPath != "":
		model, name, ok := parseSamplerPath(*req.ModelPath)
		if !ok {
			return nil, bad("model_path", "%q: want tinker://<model>/sampler_weights/<name>", *req.ModelPath)
		}
		var base string
		err := s.db.QueryRow(ctx, `SELECT m.base_model FROM tinker_weights w JOIN tinker_models m USING (model_id)
			WHERE w.model_id = $1 AND w.kind = 'sampler' AND w.name = $2`, model, name).Scan(&base)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, notFound("model_path", "no sampler weights %s", *req.ModelPath)
		}
		if err != nil {
			return nil, fmt.Errorf("sampling session: %w", err)
		}
		if req.BaseModel != nil && *req.BaseModel != "" && *req.BaseModel != base {
			return nil, bad("base_model", "%q: %s are weights of %q", *req.BaseModel, *req.ModelPath, base)
		}
		ss.ModelPath = *req.ModelPath
	case req.BaseModel != nil && *req.BaseModel != "":
		if herr := checkBaseModel(*req.BaseModel); herr != nil {
			return nil, herr
		}
		ss.BaseModel = *req.BaseModel
	default:
		return nil, bad("model_path", "a sampling session needs model_path or base_model")
	}
	id := samplingID(req.SessionID, *req.SamplingSessionSeqID)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM tinker_sessions WHERE session_id = $1`, req.SessionID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notFound("session_id", "no session %q", req.SessionID)
		}
		if old, herr := s.getSamplingSession(ctx, id); herr == nil && old != ss {
			return &httpError{status: 409, field: "sampling_session_seq_id", msg: fmt.Sprintf("%d: session %s already has sampling session %s on other weights", *req.SamplingSessionSeqID, req.SessionID, id)}
		}
		return putSamplingSession(ctx, tx, id, ss)
	})
	if err != nil {
		return nil, err
	}
	return map[string]string{"sampling_session_id": id, "type": "create_sampling_session"}, nil
}

// basePolicy is the base model's policy for a card size: the built-in
// policy's default configuration at init seed 0, the adapter before any
// training.
func (s *Server) basePolicy(cardDim int) (*policy.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.base[cardDim]; ok {
		return p, nil
	}
	def := policy.DefaultConfig(policy.ProgramGrammar{}, cardDim)
	p, err := policy.Init(builtin.PolicyConfig(defaultSettings(def), cardDim), policy.ProgramGrammar{}, 0)
	if err != nil {
		return nil, err
	}
	s.base[cardDim] = p
	return p, nil
}

// defaultSettings are the settings of a model whose user metadata names
// none: the policy's defaults.
func defaultSettings(def policy.Config) (set backend.PolicySettings) {
	set.Hidden, set.LearningRate, set.KLCoef = def.Hidden, def.LearningRate, def.KLCoef
	return set
}

// optionalFloat reads an optional JSON number.
func optionalFloat(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}
