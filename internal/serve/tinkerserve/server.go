package tinkerserve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/seed"
)

// Options configure a Server.
type Options struct {
	// APIKey, when set, is required in every request's X-API-Key.
	APIKey string
	// Log gets one line per failed request (never a key); nil discards.
	Log *slog.Logger
	// SuiteSeed is the suite that sizes the input of a model whose
	// create_model names none (user_metadata.wmrl_suite), as the SDK's
	// create_lora_training_client without metadata does.
	SuiteSeed uint64
	// Defer is how many polls of each future are answered as pending
	// (alternately HTTP 408 and try_again) before its result, so that a
	// client's waiting is exercised; 0 answers at once.
	Defer int
	// StrictSeq makes the server take a model's requests only in the
	// order the Tinker SDK numbers them, seq_id 1, 2, 3, ... with no gap: a
	// request without a seq_id, or whose seq_id is not the model's last
	// plus one, is refused (409, field seq_id), as a service that processes
	// a model's requests in seq_id order would wait for the missing one
	// forever. A repeated seq_id of the same request still gets the first
	// future; of another request, 409.
	StrictSeq bool
	// UpdateTime is the service time of one update, spent in each
	// optim_step (the step that applies forward_backward's gradient) while
	// it holds the model's lock, so a model's updates queue as on one GPU:
	// it emulates a GPU's time on a machine without one (wmrl serve
	// --update-time). 0 spends none. A repeated optim_step (the same
	// seq_id or idempotency key) gets its first future and waits no more.
	UpdateTime time.Duration
}

// Server is the http.Handler of the built-in Tinker server. It keeps all
// state in Postgres; several Servers may share a database.
type Server struct {
	db    *pgxpool.Pool
	tasks backend.TaskSource
	opts  Options

	mu    sync.Mutex
	cache []cached // decoded policies, most recent last
	base  map[int]*policy.Policy
	polls map[int64]int // polls answered as pending, per future (Defer)
}

type cached struct {
	hash string
	p    *policy.Policy
}

// New returns a server on db (migrated) that finds tasks in tasks.
func New(db *pgxpool.Pool, tasks backend.TaskSource, opts Options) *Server {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{db: db, tasks: tasks, opts: opts, base: map[int]*policy.Policy{}, polls: map[int64]int{}}
}

// maxRequest bounds a request body.
const maxRequest = 64 << 20

// httpError is an error answer.
type httpError struct {
	status int
	field  string
	msg    string
	// queueState, when set, goes into the body as queue_state (a 408).
	queueState string
}

func (e *httpError) Error() string { return e.field + ": " + e.msg }

func bad(field, format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, field: field, msg: fmt.Sprintf(format, args...)}
}

func notFound(field, format string, args ...any) *httpError {
	return &httpError{status: http.StatusNotFound, field: field, msg: fmt.Sprintf(format, args...)}
}

// handler is one endpoint: it gets the request body and the idempotency
// key and returns the answer (JSON-encoded) or an error.
type handler func(context.Context, []byte, string) (any, error)

// ServeHTTP routes /api/v1/<endpoint>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == PathHealthz {
		// Open, as a load balancer's probe.
		s.reply(w, r, map[string]string{"status": "ok"}, nil)
		return
	}
	if s.opts.APIKey != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(tinker.HeaderAPIKey)), []byte(s.opts.APIKey)) != 1 {
		s.reply(w, r, nil, &httpError{status: http.StatusUnauthorized, field: "X-API-Key", msg: "missing or wrong API key"})
		return
	}
	// Endpoints the SDK reads with GET (and client/config, which some
	// versions POST).
	get := map[string]handler{
		PathServerCapabilities:  s.capabilities,
		PathClientConfig:        s.clientConfig,
		PathClientDynamicConfig: s.clientDynamicConfig,
	}
	post := map[string]handler{
		tinker.PathCreateSession:         s.createSession,
		tinker.PathSessionHeartbeat:      s.sessionHeartbeat,
		tinker.PathCreateModel:           s.createModel,
		tinker.PathGetInfo:               s.getInfo,
		tinker.PathAsample:               s.asample,
		tinker.PathForwardBackward:       s.forwardBackward,
		tinker.PathOptimStep:             s.optimStep,
		tinker.PathSaveWeightsForSampler: s.saveForSampler,
		tinker.PathSaveWeights:           s.saveWeights,
		tinker.PathLoadWeights:           s.loadWeights,
		tinker.PathRetrieveFuture:        s.retrieveFuture,
		PathClientConfig:                 s.clientConfig,
		PathClientDynamicConfig:          s.clientDynamicConfig,
		PathCreateSamplingSession:        s.createSamplingSession,
		PathWeightsInfo:                  s.weightsInfo,
		PathTelemetry:                    s.telemetry,
		PathUnloadModel:                  s.unloadModel,
	}
	var h handler
	switch r.Method {
	case http.MethodGet:
		h = get[r.URL.Path]
	case http.MethodPost:
		h = post[r.URL.Path]
	}
	if h == nil {
		_, inGet := get[r.URL.Path]
		_, inPost := post[r.URL.Path]
		switch {
		case inGet && inPost:
			w.Header().Set("Allow", "GET, POST")
		case inGet:
			w.Header().Set("Allow", http.MethodGet)
		case inPost:
			w.Header().Set("Allow", http.MethodPost)
		default:
			s.reply(w, r, nil, notFound("path", "no endpoint %s", r.URL.Path))
			return
		}
		s.reply(w, r, nil, &httpError{status: http.StatusMethodNotAllowed, msg: r.Method + " " + r.URL.Path + ": use " + w.Header().Get("Allow")})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil {
		s.reply(w, r, nil, bad("body", "read: %v", err))
		return
	}
	if len(body) > maxRequest {
		s.reply(w, r, nil, &httpError{status: http.StatusRequestEntityTooLarge, field: "body", msg: "too large"})
		return
	}
	if r.Method == http.MethodPost && isProtobuf(r.Header.Get("Content-Type")) {
		// The SDK (≥ 0.24) sends forward_backward as protobuf; every
		// other body is JSON.
		if r.URL.Path != tinker.PathForwardBackward {
			s.reply(w, r, nil, &httpError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
				msg: "application/x-protobuf: this server takes protobuf bodies for forward_backward only; send JSON"})
			return
		}
		if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
			s.reply(w, r, nil, &httpError{status: http.StatusUnsupportedMediaType, field: "Content-Encoding",
				msg: enc + ": this server takes uncompressed bodies (its client/config says proto_compress_fwdbwd: false)"})
			return
		}
		h = s.forwardBackwardProto
	}
	out, err := h(r.Context(), body, r.Header.Get(tinker.HeaderIdempotencyKey))
	s.reply(w, r, out, err)
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, out any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			he = &httpError{status: http.StatusInternalServerError, msg: err.Error()}
		}
		s.opts.Log.Warn("tinker request failed", "path", r.URL.Path, "status", he.status, "field", he.field, "error", he.msg)
		category := "user"
		if he.status >= 500 {
			category = "server"
		}
		w.WriteHeader(he.status)
		_ = json.NewEncoder(w).Encode(tinker.ErrorResponse{Error: he.msg, Category: category, Field: he.field, QueueState: he.queueState})
		return
	}
	if f, ok := out.(futureResult); ok {
		// A future's result: protobuf when the request accepts it and
		// the result has a protobuf form (sample, forward_backward),
		// else its JSON.
		if acceptsProtobuf(r) {
			m, err := protoResult(f)
			var b []byte
			if err == nil && m != nil {
				b, err = proto.Marshal(m)
			}
			if err != nil {
				s.reply(w, r, nil, fmt.Errorf("future result as protobuf: %w", err))
				return
			}
			if m != nil {
				w.Header().Set("Content-Type", contentTypeProtobuf)
				_, _ = w.Write(b)
				return
			}
		}
		_, _ = w.Write(f.raw)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// decode unmarshals a request body, naming the field of a type error.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return bad(te.Field, "want %s, got JSON %s", te.Type, te.Value)
		}
		return bad("body", "not JSON: %v", err)
	}
	return nil
}

func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (s *Server) createSession(ctx context.Context, body []byte, _ string) (any, error) {
	var req tinker.CreateSessionRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	tags, _ := json.Marshal(req.Tags)
	if req.Tags == nil {
		tags = []byte("[]")
	}
	id := newID("session-")
	if _, err := s.db.Exec(ctx, `INSERT INTO tinker_sessions (session_id, tags) VALUES ($1, $2)`, id, tags); err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	return tinker.CreateSessionResponse{SessionID: id, Type: "create_session"}, nil
}

func (s *Server) sessionHeartbeat(ctx context.Context, body []byte, _ string) (any, error) {
	var req tinker.SessionHeartbeatRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	tag, err := s.db.Exec(ctx, `UPDATE tinker_sessions SET heartbeats = heartbeats + 1, last_heartbeat = now() WHERE session_id = $1`, req.SessionID)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, notFound("session_id", "no session %q", req.SessionID)
	}
	return map[string]string{"type": "session_heartbeat"}, nil
}

// metaString reads a user_metadata value given as a string or a number.
func metaString(meta map[string]any, k string) (string, bool) {
	switch v := meta[k].(type) {
	case string:
		return v, true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	return "", false
}

func (s *Server) createModel(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.CreateModelRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	switch {
	case req.BaseModel != tinker.BuiltinBaseModel:
		return nil, bad("base_model", "%q: this server has only %q", req.BaseModel, tinker.BuiltinBaseModel)
	case req.LoraConfig != nil && req.LoraConfig.Rank < 1:
		return nil, bad("lora_config.rank", "%d: want >= 1", req.LoraConfig.Rank)
	case req.SessionID == "":
		return nil, bad("session_id", "empty")
	}
	u := func(k string, def uint64) (uint64, error) {
		v, ok := metaString(req.UserMetadata, k)
		if !ok {
			return def, nil
		}
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, bad("user_metadata."+k, "%q: want an unsigned integer", v)
		}
		return x, nil
	}
	f := func(k string) (float64, error) {
		v, ok := metaString(req.UserMetadata, k)
		if !ok || v == "" {
			return 0, nil
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, bad("user_metadata."+k, "%q: want a finite number", v)
		}
		return x, nil
	}
	initSeed, err := u("wmrl_seed", 0)
	if err != nil {
		return nil, err
	}
	suiteSeed, err := u("wmrl_suite", s.opts.SuiteSeed)
	if err != nil {
		return nil, err
	}
	var set backend.PolicySettings
	if _, ok := metaString(req.UserMetadata, "wmrl_hidden"); ok {
		h, err := u("wmrl_hidden", 0)
		if err != nil {
			return nil, err
		}
		set.Hidden = int(min(h, 1<<20))
	}
	if _, ok := metaString(req.UserMetadata, "wmrl_turns"); ok {
		// A multi-turn run's model: its policy's input has room for the
		// previous attempt (turns.go).
		k, err := u("wmrl_turns", 0)
		if err != nil {
			return nil, err
		}
		if k > 1<<10 {
			return nil, bad("user_metadata.wmrl_turns", "%d: want at most %d", k, 1<<10)
		}
		set.Turns = int(k)
	}
	if set.LearningRate, err = f("wmrl_learning_rate"); err != nil {
		return nil, err
	}
	if set.KLCoef, err = f("wmrl_kl_coef"); err != nil {
		return nil, err
	}
	rank := 0
	if req.LoraConfig != nil {
		rank = req.LoraConfig.Rank
	}
	if idem != "" {
		if out, ok, err := s.futureByKey(ctx, s.db, idem); err != nil || ok {
			return out, err
		}
	}
	train, err := s.tasks.Tasks(ctx, suiteSeed, backend.Train)
	if err != nil {
		if backend.IsPermanent(err) {
			return nil, bad("user_metadata.wmrl_suite", "%v", err)
		}
		return nil, err
	}
	if len(train) == 0 {
		return nil, bad("user_metadata.wmrl_suite", "suite %d has no training tasks", suiteSeed)
	}
	def := policy.DefaultConfig(policy.ProgramGrammar{}, len(train[0].Features))
	if set.Hidden == 0 {
		set.Hidden = def.Hidden
	}
	if set.LearningRate == 0 {
		set.LearningRate = def.LearningRate
	}
	pol, err := policy.Init(builtin.PolicyConfig(set, builtin.CardDim(set, len(train[0].Features))), policy.ProgramGrammar{}, initSeed)
	if err != nil {
		return nil, bad("user_metadata", "%v", err)
	}
	meta, _ := json.Marshal(req.UserMetadata)
	if req.UserMetadata == nil {
		meta = []byte("{}")
	}
	model := newID("model-")
	var out any
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM tinker_sessions WHERE session_id = $1`, req.SessionID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notFound("session_id", "no session %q", req.SessionID)
		}
		// A model_seq_id the session already used gets that model's future.
		var existing string
		err := tx.QueryRow(ctx, `SELECT model_id FROM tinker_models WHERE session_id = $1 AND model_seq_id = $2`, req.SessionID, req.ModelSeqID).Scan(&existing)
		if err == nil {
			var id int64
			if err := tx.QueryRow(ctx, `SELECT request_id FROM tinker_futures WHERE kind = 'create_model' AND model_id = $1`, existing).Scan(&id); err != nil {
				return err
			}
			out = tinker.FutureResponse{RequestID: strconv.FormatInt(id, 10), ModelID: existing}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tinker_models (model_id, session_id, model_seq_id, base_model, lora_rank, user_metadata, policy)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, model, req.SessionID, req.ModelSeqID, req.BaseModel, rank, meta, pol.Encode()); err != nil {
			return err
		}
		id, err := insertFuture(ctx, tx, "create_model", model, nil, idem, tinker.CreateModelResponse{ModelID: model, Type: "create_model"})
		if err != nil {
			return err
		}
		out = tinker.FutureResponse{RequestID: id, ModelID: model}
		return nil
	})
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) && idem != "" {
			// Lost a race for the idempotency key: answer with the winner.
			if out, ok, err2 := s.futureByKey(ctx, s.db, idem); err2 == nil && ok {
				return out, nil
			}
		}
		return nil, err
	}
	return out, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// futureByKey returns the future of an idempotency key, if there is one.
func (s *Server) futureByKey(ctx context.Context, q querier, key string) (any, bool, error) {
	var id int64
	var model *string
	err := q.QueryRow(ctx, `SELECT request_id, model_id FROM tinker_futures WHERE idempotency_key = $1`, key).Scan(&id, &model)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up idempotency key: %w", err)
	}
	fr := tinker.FutureResponse{RequestID: strconv.FormatInt(id, 10)}
	if model != nil {
		fr.ModelID = *model
	}
	return fr, true, nil
}

func insertFuture(ctx context.Context, tx pgx.Tx, kind, model string, seq *int64, idem string, result any) (string, error) {
	raw, err := json.Marshal(result)
	if err != nil {
		return "", err
	}
	var m, k *string
	if model != "" {
		m = &model
	}
	if idem != "" {
		k = &idem
	}
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO tinker_futures (kind, model_id, seq_id, idempotency_key, result)
		VALUES ($1, $2, $3, $4, $5) RETURNING request_id`, kind, m, seq, k, raw).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("insert future: %w", err)
	}
	return strconv.FormatInt(id, 10), nil
}

func (s *Server) getInfo(ctx context.Context, body []byte, _ string) (any, error) {
	var req tinker.GetInfoRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	var base string
	var rank int
	err := s.db.QueryRow(ctx, `SELECT base_model, lora_rank FROM tinker_models WHERE model_id = $1`, req.ModelID).Scan(&base, &rank)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("model_id", "no model %q", req.ModelID)
	}
	if err != nil {
		return nil, fmt.Errorf("get info: %w", err)
	}
	// The fields of wmrl's client (model_data.base_model, lora_config) and
	// of the SDK's GetInfoResponse (model_name, is_lora, lora_rank).
	return map[string]any{"model_id": req.ModelID, "type": "get_info", "is_lora": true, "lora_rank": rank, "model_name": base,
		"model_data": map[string]any{"base_model": base, "lora_config": map[string]int{"rank": rank}, "model_name": base, "arch": "wmrl-builtin-policy"}}, nil
}

func (s *Server) retrieveFuture(ctx context.Context, body []byte, _ string) (any, error) {
	var req tinker.RetrieveFutureRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(req.RequestID, 10, 64)
	if err != nil {
		return nil, bad("request_id", "%q: not a request id of this server", req.RequestID)
	}
	var raw []byte
	var kind string
	err = s.db.QueryRow(ctx, `SELECT kind, result FROM tinker_futures WHERE request_id = $1`, id).Scan(&kind, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("request_id", "no future %s", req.RequestID)
	}
	if err != nil {
		return nil, fmt.Errorf("retrieve future: %w", err)
	}
	if s.opts.Defer > 0 {
		s.mu.Lock()
		n := s.polls[id]
		if n < s.opts.Defer {
			s.polls[id] = n + 1
		}
		s.mu.Unlock()
		if n < s.opts.Defer {
			// Pending: the SDK polls again on a 408 and on try_again.
			if n%2 == 0 {
				return nil, &httpError{status: http.StatusRequestTimeout, field: "request_id", msg: "pending", queueState: "active"}
			}
			return tinker.TryAgainResponse{Type: tinker.TypeTryAgain, RequestID: req.RequestID, QueueState: "active"}, nil
		}
	}
	return futureResult{kind: kind, raw: raw}, nil
}

// policyOf decodes policy bytes, through a small cache keyed by hash.
func (s *Server) policyOf(data []byte) (*policy.Policy, error) {
	if len(data) < 32 {
		return nil, errors.New("stored policy too short")
	}
	h := hex.EncodeToString(data[len(data)-32:])
	s.mu.Lock()
	for _, c := range s.cache {
		if c.hash == h {
			s.mu.Unlock()
			return c.p, nil
		}
	}
	s.mu.Unlock()
	p, err := policy.Decode(data, policy.ProgramGrammar{})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cache = append(s.cache, cached{hash: h, p: p})
	if len(s.cache) > 8 {
		s.cache = s.cache[1:]
	}
	s.mu.Unlock()
	return p, nil
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

// samplerPath is the tinker:// path of saved sampler weights.
func samplerPath(model, name string) string { return "tinker://" + model + "/sampler_weights/" + name }

// trainingPath is the tinker:// path of saved training weights.
func trainingPath(model, name string) string { return "tinker://" + model + "/weights/" + name }

// parseTrainingPath accepts tinker://model/weights/name.
func parseTrainingPath(p string) (model, name string, ok bool) {
	rest, ok := strings.CutPrefix(p, "tinker://")
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[1] != "weights" {
		return "", "", false
	}
	return parts[0], parts[2], parts[0] != "" && namePattern.MatchString(parts[2])
}

// parseSamplerPath accepts tinker://model/sampler_weights/name and
// tinker://model/name.
func parseSamplerPath(p string) (model, name string, ok bool) {
	rest, ok := strings.CutPrefix(p, "tinker://")
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[1] == "sampler_weights":
		return parts[0], parts[2], parts[0] != "" && namePattern.MatchString(parts[2])
	case len(parts) == 2:
		return parts[0], parts[1], parts[0] != "" && namePattern.MatchString(parts[1])
	}
	return "", "", false
}

func encodeGrad(g []float64) []byte {
	b := make([]byte, 0, 8*len(g))
	for _, x := range g {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func decodeGrad(b []byte, n int) ([]float64, error) {
	if len(b) == 0 {
		return make([]float64, n), nil
	}
	if len(b) != 8*n {
		return nil, fmt.Errorf("stored gradient has %d bytes, want %d", len(b), 8*n)
	}
	g := make([]float64, n)
	for i := range g {
		g[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return g, nil
}

// sampleTag separates the server's per-completion seeds.
var sampleTag = seed.String("wmrl/tinkerserve/sample")
