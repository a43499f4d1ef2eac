package tinker

import (
	"encoding/json"

	"github.com/wmrl/wmrl/internal/backend"
)

// The wire types of the subset of the Tinker training API that wmrl uses:
// the JSON bodies of POST /api/v1/<endpoint>, with the field names of the
// Tinker Python SDK's types (tinker.types) and of the open servers that
// implement it (SkyRL tx's tinker API server). Fields wmrl does not use are
// left out. A request body holds only fields of the SDK's request type, at
// every SDK version from 0.16.1 to 0.25.0: those types forbid any other
// (pydantic extra="forbid" up to 0.22), and a server may validate with
// them; testdata/sdk_request_fields.json lists them and TestRequestFields
// checks every body the client sends against it. The built-in server
// (internal/serve/tinkerserve) decodes the same types.

// The endpoints.
const (
	PathCreateSession         = "/api/v1/create_session"
	PathSessionHeartbeat      = "/api/v1/session_heartbeat"
	PathCreateModel           = "/api/v1/create_model"
	PathGetInfo               = "/api/v1/get_info"
	PathAsample               = "/api/v1/asample"
	PathForwardBackward       = "/api/v1/forward_backward"
	PathOptimStep             = "/api/v1/optim_step"
	PathSaveWeightsForSampler = "/api/v1/save_weights_for_sampler"
	PathSaveWeights           = "/api/v1/save_weights"
	PathLoadWeights           = "/api/v1/load_weights"
	PathRetrieveFuture        = "/api/v1/retrieve_future"
)

// Headers.
const (
	// HeaderAPIKey carries the API key (the SDK's auth header).
	HeaderAPIKey = "X-API-Key"
	// HeaderIdempotencyKey carries the request's idempotency key (the
	// SDK's idempotency header): a server that honours it returns the first
	// future for a repeated key.
	HeaderIdempotencyKey = "X-Idempotency-Key"
)

// The loss functions wmrl can ask for.
const (
	LossImportanceSampling = backend.LossImportanceSampling
	LossPPO                = backend.LossPPO
)

// The "type" discriminators of the request types that have one (the SDK's
// Literal defaults). ForwardBackwardRequest has none.
const (
	TypeCreateSession         = "create_session"
	TypeSessionHeartbeat      = "session_heartbeat"
	TypeCreateModel           = "create_model"
	TypeGetInfo               = "get_info"
	TypeSample                = "sample"
	TypeOptimStep             = "optim_step"
	TypeSaveWeightsForSampler = "save_weights_for_sampler"
	TypeSaveWeights           = "save_weights"
	TypeLoadWeights           = "load_weights"
)

// ChunkEncodedText is the type of a chunk of token ids.
const ChunkEncodedText = "encoded_text"

// ModelInputChunk is one chunk of a model input; wmrl only sends token ids.
type ModelInputChunk struct {
	Type   string `json:"type"`
	Tokens []int  `json:"tokens"`
}

// ModelInput is a prompt or a training datum's input.
type ModelInput struct {
	Chunks []ModelInputChunk `json:"chunks"`
}

// Tokens returns the concatenated token ids of the encoded_text chunks, or
// the index of the first chunk of another type.
func (m ModelInput) Tokens() ([]int, int) {
	var out []int
	for i, c := range m.Chunks {
		if c.Type != "" && c.Type != ChunkEncodedText {
			return nil, i
		}
		out = append(out, c.Tokens...)
	}
	return out, -1
}

// TensorData is a flat tensor: Dtype "int64" or "float32".
type TensorData struct {
	Data  []float64 `json:"data"`
	Dtype string    `json:"dtype"`
	Shape []int     `json:"shape,omitempty"`
}

// Datum is one training example: the loss inputs wmrl sends are
// target_tokens (int64), logprobs and advantages (float32), each aligned
// with the model input's positions.
type Datum struct {
	ModelInput   ModelInput            `json:"model_input"`
	LossFnInputs map[string]TensorData `json:"loss_fn_inputs"`
}

// ForwardBackwardInput is a batch and its loss.
type ForwardBackwardInput struct {
	Data   []Datum `json:"data"`
	LossFn string  `json:"loss_fn"`
}

// ForwardBackwardRequest accumulates the gradient of a batch's loss. The
// SDK's type has no "type" field (and forbade one up to 0.22).
type ForwardBackwardRequest struct {
	ForwardBackwardInput ForwardBackwardInput `json:"forward_backward_input"`
	ModelID              string               `json:"model_id"`
	SeqID                *int64               `json:"seq_id,omitempty"`
}

// ForwardBackwardOutput is a forward_backward future's result.
type ForwardBackwardOutput struct {
	LossFnOutputType string                  `json:"loss_fn_output_type"`
	LossFnOutputs    []map[string]TensorData `json:"loss_fn_outputs"`
	Metrics          map[string]float64      `json:"metrics"`
}

// AdamParams are an optimiser step's hyperparameters.
type AdamParams struct {
	LearningRate float64 `json:"learning_rate"`
	Beta1        float64 `json:"beta1"`
	Beta2        float64 `json:"beta2"`
	Eps          float64 `json:"eps"`
}

// OptimStepRequest applies the accumulated gradient.
type OptimStepRequest struct {
	AdamParams AdamParams `json:"adam_params"`
	ModelID    string     `json:"model_id"`
	SeqID      *int64     `json:"seq_id,omitempty"`
	Type       string     `json:"type,omitempty"`
}

// OptimStepResponse is an optim_step future's result.
type OptimStepResponse struct {
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Type    string             `json:"type,omitempty"`
}

// CreateSessionRequest opens a client session. UserMetadata is required by
// the SDK's type (it may be null), so it is always sent.
type CreateSessionRequest struct {
	Tags         []string       `json:"tags"`
	UserMetadata map[string]any `json:"user_metadata"`
	SDKVersion   string         `json:"sdk_version"`
	Type         string         `json:"type"`
}

// CreateSessionResponse names the session.
type CreateSessionResponse struct {
	SessionID string `json:"session_id"`
	Type      string `json:"type,omitempty"`
}

// SessionHeartbeatRequest keeps a session alive.
type SessionHeartbeatRequest struct {
	SessionID string `json:"session_id"`
	Type      string `json:"type"`
}

// LoraConfig is a LoRA adapter's configuration.
type LoraConfig struct {
	Rank int `json:"rank"`
}

// CreateModelRequest creates a trainable model (a LoRA adapter on
// BaseModel).
type CreateModelRequest struct {
	SessionID    string         `json:"session_id"`
	ModelSeqID   int64          `json:"model_seq_id"`
	BaseModel    string         `json:"base_model"`
	UserMetadata map[string]any `json:"user_metadata,omitempty"`
	LoraConfig   *LoraConfig    `json:"lora_config,omitempty"`
	Type         string         `json:"type"`
}

// CreateModelResponse is a create_model future's result.
type CreateModelResponse struct {
	ModelID string `json:"model_id"`
	Type    string `json:"type,omitempty"`
}

// GetInfoRequest asks about a model.
type GetInfoRequest struct {
	ModelID string `json:"model_id"`
	Type    string `json:"type,omitempty"`
}

// ModelData describes a model.
type ModelData struct {
	BaseModel  string      `json:"base_model"`
	LoraConfig *LoraConfig `json:"lora_config,omitempty"`
	ModelName  string      `json:"model_name,omitempty"`
}

// GetInfoResponse is get_info's answer.
type GetInfoResponse struct {
	ModelID   string    `json:"model_id"`
	ModelData ModelData `json:"model_data"`
	Type      string    `json:"type,omitempty"`
}

// SaveWeightsForSamplerRequest saves the model's weights for sampling under
// a name ([A-Za-z0-9_-]+).
type SaveWeightsForSamplerRequest struct {
	ModelID string `json:"model_id"`
	Path    string `json:"path"`
	SeqID   *int64 `json:"seq_id,omitempty"`
	Type    string `json:"type,omitempty"`
}

// SaveWeightsForSamplerResponse is its future's result: Path is the
// tinker:// path to sample from. ContentHash is a wmrl extension: the
// built-in server reports the saved policy's content hash; hosted Tinker
// reports none.
type SaveWeightsForSamplerResponse struct {
	Path        string `json:"path"`
	Type        string `json:"type,omitempty"`
	ContentHash string `json:"content_hash,omitempty"`
}

// SaveWeightsRequest saves the model's training weights with their
// optimiser state (the SDK's save_state) under a name ([A-Za-z0-9_-]+).
type SaveWeightsRequest struct {
	ModelID string `json:"model_id"`
	Path    string `json:"path"`
	SeqID   *int64 `json:"seq_id,omitempty"`
	Type    string `json:"type,omitempty"`
}

// SaveWeightsResponse is its future's result: Path is the tinker:// path of
// the training weights (tinker://<model>/weights/<name>), to load_weights
// from. ContentHash is the wmrl extension of SaveWeightsForSamplerResponse.
type SaveWeightsResponse struct {
	Path        string `json:"path"`
	Type        string `json:"type,omitempty"`
	ContentHash string `json:"content_hash,omitempty"`
}

// LoadWeightsRequest loads saved training weights (a tinker:// path of
// save_weights) into a model; Optimizer loads their optimiser state too
// (the SDK's load_state_with_optimizer).
type LoadWeightsRequest struct {
	ModelID   string `json:"model_id"`
	Path      string `json:"path"`
	Optimizer bool   `json:"optimizer"`
	SeqID     *int64 `json:"seq_id,omitempty"`
	Type      string `json:"type,omitempty"`
}

// LoadWeightsResponse is its future's result: the path loaded.
type LoadWeightsResponse struct {
	Path string `json:"path,omitempty"`
	Type string `json:"type,omitempty"`
}

// SamplingParams are a sample request's parameters.
type SamplingParams struct {
	MaxTokens   *int    `json:"max_tokens,omitempty"`
	Seed        *int64  `json:"seed,omitempty"`
	Temperature float64 `json:"temperature"`
}

// SampleRequest asks for NumSamples completions of Prompt from the weights
// at ModelPath.
type SampleRequest struct {
	NumSamples     int            `json:"num_samples"`
	Prompt         ModelInput     `json:"prompt"`
	SamplingParams SamplingParams `json:"sampling_params"`
	ModelPath      string         `json:"model_path,omitempty"`
	BaseModel      string         `json:"base_model,omitempty"`
	Type           string         `json:"type"`
}

// SampledSequence is one completion.
type SampledSequence struct {
	StopReason string    `json:"stop_reason"`
	Tokens     []int     `json:"tokens"`
	Logprobs   []float64 `json:"logprobs"`
}

// SampleResponse is an asample future's result.
type SampleResponse struct {
	Sequences []SampledSequence `json:"sequences"`
	Type      string            `json:"type,omitempty"`
}

// FutureResponse is what every asynchronous endpoint answers: the id of a
// future to poll with retrieve_future.
type FutureResponse struct {
	RequestID string `json:"request_id"`
	ModelID   string `json:"model_id,omitempty"`
}

// RetrieveFutureRequest polls a future.
type RetrieveFutureRequest struct {
	RequestID string `json:"request_id"`
}

// TypeTryAgain is the type of a retrieve_future answer whose future is not
// done yet.
const TypeTryAgain = "try_again"

// TryAgainResponse says to poll again.
type TryAgainResponse struct {
	Type       string `json:"type"`
	RequestID  string `json:"request_id"`
	QueueState string `json:"queue_state"`
}

// ErrorResponse is an error body: Tinker's RequestFailedResponse (error,
// category), FastAPI's detail, and the built-in server's field.
type ErrorResponse struct {
	Error    string          `json:"error,omitempty"`
	Category string          `json:"category,omitempty"`
	Field    string          `json:"field,omitempty"`
	Detail   json.RawMessage `json:"detail,omitempty"`
	// QueueState is a 408's queue_state ("active", "paused_capacity",
	// "paused_rate_limit"), as the SDK reads it.
	QueueState string `json:"queue_state,omitempty"`
}
