package tinker

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// textTokenizer stands in for an LLM's tokenizer.
type textTokenizer struct{}

func (textTokenizer) Prompt(t backend.Task) ([]int, error) { return []int{1, 2, 3}, nil }
func (textTokenizer) Decode(c []int) (string, error) {
	b, _ := json.Marshal(c)
	return string(b), nil
}

// Init and Sample against a server answering with the fixtures' shapes
// (SkyRL's submit answers, the SDK's future results, try_again and 408
// while a future is pending), and the create_model request as the SDK
// sends it.
func TestAgainstFixtures(t *testing.T) {
	var mu sync.Mutex
	var created []byte
	pending := map[string]int{}
	results := map[string][]byte{}
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		submit := func(result string) {
			next++
			id := string(rune('0' + next))
			results[id] = fixture(t, result)
			b := fixture(t, "skyrl_future_response.json")
			_, _ = w.Write(bytes.ReplaceAll(b, []byte(`"2"`), []byte(`"`+id+`"`)))
		}
		switch r.URL.Path {
		case PathCreateSession:
			_, _ = w.Write(fixture(t, "tinker_create_session_response.json"))
		case PathCreateModel:
			created = body
			next++
			results["1"] = fixture(t, "tinker_create_model_result.json")
			_, _ = w.Write(fixture(t, "skyrl_create_model_response.json"))
		case PathSaveWeightsForSampler:
			submit("tinker_save_weights_for_sampler_result.json")
		case PathAsample:
			submit("tinker_sample_result.json")
		case PathRetrieveFuture:
			var req RetrieveFutureRequest
			_ = json.Unmarshal(body, &req)
			pending[req.RequestID]++
			switch pending[req.RequestID] {
			case 1:
				_, _ = w.Write(fixture(t, "tinker_try_again.json"))
			case 2:
				w.WriteHeader(http.StatusRequestTimeout)
				_, _ = w.Write(fixture(t, "skyrl_retrieve_future_408.json"))
			default:
				_, _ = w.Write(results[req.RequestID])
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p, err := New(Config{BaseURL: srv.URL, BaseModel: "Qwen/Qwen3-0.6B", PollMax: time.Millisecond}, textTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ck, err := p.Init(t.Context(), backend.InitRequest{Run: "run-x", Suite: 7, Seed: 5, Settings: backend.PolicySettings{LearningRate: 1e-4}})
	if err != nil {
		t.Fatal(err)
	}
	if ck.Location != "tinker://model_1a2b3c4d/sampler_weights/wmrl-v000000" || !strings.HasPrefix(ck.Hash, "path-sha256:") || ck.Version != 0 {
		t.Fatalf("checkpoint %+v", ck)
	}
	var got, want any
	_ = json.Unmarshal(created, &got)
	_ = json.Unmarshal(fixture(t, "tinker_create_model_request.json"), &want)
	if g, _ := json.Marshal(got); !bytes.Equal(g, mustJSON(want)) {
		t.Fatalf("create_model request\n got %s\nwant %s", g, mustJSON(want))
	}
	comps, err := p.Sample(t.Context(), backend.SampleRequest{Checkpoint: ck, Seeds: []uint64{1 << 40, 2}, Key: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if len(comps) != 2 || comps[0].Text != "[9906,1917,151645]" || comps[1].LogProbs[0] != -2 {
		t.Fatalf("completions %+v", comps)
	}
	// A failed future is permanent for a user error, with its message.
	var e ErrorResponse
	if err := json.Unmarshal(fixture(t, "tinker_request_failed.json"), &e); err != nil || e.Category != "user" {
		t.Fatalf("request failed: %+v %v", e, err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// save_weights and Continue against the SDK's shapes: the save_weights
// answer decodes, and Continue (create_model, load_weights,
// save_weights_for_sampler) sends load_weights as the SDK's
// load_state_with_optimizer does, at seq_id 1 (a new model's first
// request, as the SDK numbers a restored training client's), and names
// the continued checkpoint with its origin.
func TestWeightsAgainstFixtures(t *testing.T) {
	var mu sync.Mutex
	var loaded []byte
	var paths []string
	results := map[string][]byte{}
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		paths = append(paths, r.URL.Path)
		submit := func(result []byte) {
			next++
			id := string(rune('0' + next))
			results[id] = result
			b := fixture(t, "skyrl_future_response.json")
			_, _ = w.Write(bytes.ReplaceAll(b, []byte(`"2"`), []byte(`"`+id+`"`)))
		}
		switch r.URL.Path {
		case PathCreateSession:
			_, _ = w.Write(fixture(t, "tinker_create_session_response.json"))
		case PathCreateModel:
			next++
			results["1"] = fixture(t, "tinker_create_model_result.json")
			_, _ = w.Write(fixture(t, "skyrl_create_model_response.json"))
		case PathSaveWeights:
			submit(fixture(t, "tinker_save_weights_result.json"))
		case PathLoadWeights:
			loaded = body
			submit(fixture(t, "tinker_load_weights_result.json"))
		case PathSaveWeightsForSampler:
			submit(bytes.ReplaceAll(fixture(t, "tinker_save_weights_for_sampler_result.json"), []byte("wmrl-v000000"), []byte("wmrl-v000002-from000002")))
		case PathRetrieveFuture:
			var req RetrieveFutureRequest
			_ = json.Unmarshal(body, &req)
			_, _ = w.Write(results[req.RequestID])
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p, err := New(Config{BaseURL: srv.URL, BaseModel: "Qwen/Qwen3-0.6B", PollMax: time.Millisecond}, textTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	old := backend.Checkpoint{Version: 2, Hash: "path-sha256:00", Location: "tinker://model_0ld/sampler_weights/wmrl-v000002",
		State: "tinker://model_0ld/weights/wmrl-v000002"}
	ck, err := p.Continue(t.Context(), backend.ContinueRequest{Run: "run-y", From: "run-x", Checkpoint: old, Suite: 7, Seed: 5,
		Settings: backend.PolicySettings{LearningRate: 1e-4}})
	if err != nil {
		t.Fatal(err)
	}
	if ck.Version != 2 || ck.Location != "tinker://model_1a2b3c4d/sampler_weights/wmrl-v000002-from000002" || ck.State != old.State ||
		ck.Hash != CheckpointHash(SaveWeightsForSamplerResponse{Path: ck.Location}) {
		t.Fatalf("continued checkpoint %+v", ck)
	}
	var got, want any
	_ = json.Unmarshal(loaded, &got)
	_ = json.Unmarshal(fixture(t, "tinker_load_weights_request.json"), &want)
	if g := mustJSON(got); !bytes.Equal(g, mustJSON(want)) {
		t.Fatalf("load_weights request\n got %s\nwant %s", g, mustJSON(want))
	}
	if want := []string{PathCreateSession, PathCreateModel, PathRetrieveFuture, PathLoadWeights, PathRetrieveFuture,
		PathSaveWeightsForSampler, PathRetrieveFuture}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("requests %v, want %v", paths, want)
	}
	saved, err := p.SaveWeights(t.Context(), "k", "model_1a2b3c4d", 11, "manual")
	if err != nil || saved.Path != "tinker://model_1a2b3c4d/weights/manual" || saved.ContentHash != "" {
		t.Fatalf("save_weights: %+v %v", saved, err)
	}
	if _, err := p.SaveWeights(t.Context(), "k2", "model_1a2b3c4d", 12, "other"); err == nil || !backend.IsPermanent(err) {
		t.Fatalf("save_weights answered with another name's path: %v", err)
	}
}

// Every request type, with all its fields set, marshals to fields of the
// SDK's request type only (testdata/sdk_request_fields.json, at 0.16.1,
// 0.19.0 and 0.25.0), with the SDK's required ones: the session heartbeat
// too, which the end-to-end check in tinkerserve does not reach (it is sent
// after 10 s of waiting).
func TestRequestTypesHaveSDKFields(t *testing.T) {
	var sdk struct {
		Types map[string]map[string]struct {
			Required bool `json:"required"`
		} `json:"types"`
	}
	if err := json.Unmarshal(fixture(t, "sdk_request_fields.json"), &sdk); err != nil {
		t.Fatal(err)
	}
	seq, n, seed := int64(3), 7, int64(9)
	for typ, v := range map[string]any{
		"CreateSessionRequest":         CreateSessionRequest{Tags: []string{"wmrl"}, SDKVersion: SDKVersion, Type: TypeCreateSession},
		"SessionHeartbeatRequest":      SessionHeartbeatRequest{SessionID: "s", Type: TypeSessionHeartbeat},
		"CreateModelRequest":           CreateModelRequest{SessionID: "s", BaseModel: "b", UserMetadata: map[string]any{"a": "b"}, LoraConfig: &LoraConfig{Rank: 8}, Type: TypeCreateModel},
		"LoraConfig":                   LoraConfig{Rank: 8},
		"GetInfoRequest":               GetInfoRequest{ModelID: "m", Type: TypeGetInfo},
		"ForwardBackwardRequest":       ForwardBackwardRequest{ModelID: "m", SeqID: &seq},
		"ForwardBackwardInput":         ForwardBackwardInput{LossFn: LossPPO},
		"Datum":                        Datum{},
		"ModelInput":                   ModelInput{},
		"EncodedTextChunk":             ModelInputChunk{Type: ChunkEncodedText, Tokens: []int{1}},
		"TensorData":                   TensorData{Data: []float64{1}, Dtype: "float32", Shape: []int{1}},
		"OptimStepRequest":             OptimStepRequest{ModelID: "m", SeqID: &seq, Type: TypeOptimStep},
		"AdamParams":                   AdamParams{LearningRate: 1, Beta1: 0.9, Beta2: 0.95, Eps: 1e-12},
		"SaveWeightsForSamplerRequest": SaveWeightsForSamplerRequest{ModelID: "m", Path: "p", SeqID: &seq, Type: TypeSaveWeightsForSampler},
		"SaveWeightsRequest":           SaveWeightsRequest{ModelID: "m", Path: "p", SeqID: &seq, Type: TypeSaveWeights},
		"LoadWeightsRequest":           LoadWeightsRequest{ModelID: "m", Path: "p", Optimizer: true, SeqID: &seq, Type: TypeLoadWeights},
		"SampleRequest":                SampleRequest{NumSamples: 1, ModelPath: "p", BaseModel: "b", Type: TypeSample},
		"SamplingParams":               SamplingParams{MaxTokens: &n, Seed: &seed, Temperature: 1},
		"FutureRetrieveRequest":        RetrieveFutureRequest{RequestID: "1"},
	} {
		fields, ok := sdk.Types[typ]
		if !ok {
			t.Fatalf("no SDK type %s in the list", typ)
		}
		var got map[string]any
		if err := json.Unmarshal(mustJSON(v), &got); err != nil {
			t.Fatal(err)
		}
		for k := range got {
			if _, ok := fields[k]; !ok {
				t.Errorf("%T sends %q, a field the SDK's %s lacks", v, k, typ)
			}
		}
		for k, f := range fields {
			if _, ok := got[k]; f.Required && !ok {
				t.Errorf("%T leaves out %q, which the SDK's %s requires", v, k, typ)
			}
		}
	}
}
