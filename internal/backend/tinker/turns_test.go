package tinker

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
)

// At turn t > 1 every trajectory is sampled by its own asample request:
// its token sequence so far (prompt, each earlier action and observation)
// as the prompt, num_samples 1, seed Seeds[i]>>33; completion i comes back
// as trajectory i's. A history whose action has no tokens is refused
// before anything is sent, naming the turn.
func TestSampleTurns(t *testing.T) {
	var mu sync.Mutex
	var bodies []SampleRequest
	results := map[string]SampleResponse{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case PathAsample:
			var req SampleRequest
			if err := json.Unmarshal(body, &req); err != nil {
				t.Error(err)
			}
			bodies = append(bodies, req)
			id := fmt.Sprint(len(bodies))
			// The completion names the request's seed.
			results[id] = SampleResponse{Type: "sample", Sequences: []SampledSequence{{StopReason: "stop",
				Tokens: []int{400 + int(*req.SamplingParams.Seed)}, Logprobs: []float64{-0.5}}}}
			_ = json.NewEncoder(w).Encode(FutureResponse{RequestID: id})
		case PathRetrieveFuture:
			var req RetrieveFutureRequest
			_ = json.Unmarshal(body, &req)
			_ = json.NewEncoder(w).Encode(results[req.RequestID])
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p, err := New(Config{BaseURL: srv.URL, BaseModel: "m", PollMax: time.Millisecond}, turnTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ck := backend.Checkpoint{Version: 0, Location: "tinker://m/sampler_weights/wmrl-v000000"}
	hist := [][]backend.Exchange{
		{{Tokens: []int{300}, LogProbs: []float64{-1}, Observation: "obs-1"}, {Tokens: []int{301, 302}, LogProbs: []float64{-1, -2}, Observation: "obs-2"}},
		{{Tokens: []int{303}, LogProbs: []float64{-1}, Observation: "obs-2"}, {Tokens: []int{304}, LogProbs: []float64{-3}, Observation: "obs-1"}},
	}
	seeds := []uint64{5 << 33, 7 << 33}
	comps, err := p.Sample(t.Context(), backend.SampleRequest{Checkpoint: ck, Task: backend.Task{ID: "t"}, Seeds: seeds, Key: "g/turn-3", History: hist})
	if err != nil {
		t.Fatal(err)
	}
	if len(comps) != 2 || !reflect.DeepEqual(comps[0].Tokens, []int{405}) || !reflect.DeepEqual(comps[1].Tokens, []int{407}) {
		t.Fatalf("completions %+v: want trajectory i's from seed i", comps)
	}
	sort.Slice(bodies, func(i, j int) bool { return *bodies[i].SamplingParams.Seed < *bodies[j].SamplingParams.Seed })
	want := [][]int{{1, 2, 300, 11, 12, 301, 302, 21}, {1, 2, 303, 21, 304, 11, 12}}
	for i, b := range bodies {
		toks, _ := b.Prompt.Tokens()
		if b.NumSamples != 1 || !reflect.DeepEqual(toks, want[i]) {
			t.Errorf("request %d: num_samples %d, prompt %v; want 1, %v", i, b.NumSamples, toks, want[i])
		}
	}
	if len(bodies) != 2 {
		t.Fatalf("%d asample requests, want 2", len(bodies))
	}
	hist[1][0].Tokens = nil
	_, err = p.Sample(t.Context(), backend.SampleRequest{Checkpoint: ck, Task: backend.Task{ID: "t"}, Seeds: seeds, Key: "g/turn-3", History: hist})
	if err == nil || !strings.Contains(err.Error(), "trajectory 1: turn 1: no action tokens") || len(bodies) != 2 {
		t.Fatalf("a turn without tokens: %v (%d requests in all, want the first 2)", err, len(bodies))
	}
}
