package tinker

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/prompt"
	"github.com/wmrl/wmrl/internal/tokenizer"
)

// A language model's prompt is the rendered template in its token ids,
// and its completion's text is the solution in it.
func TestTextTokenizer(t *testing.T) {
	tmpl, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	tt := TextTokenizer{Tok: tokenizer.Bytes{}, Template: tmpl, Language: "python"}
	ids, err := tt.Prompt(backend.Task{Suite: 1, ID: "wine", Prompt: "Predict the wine's class."})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := tokenizer.Bytes{}.Decode(ids)
	if !strings.Contains(text, "Predict the wine's class.") || !strings.Contains(text, "```python") {
		t.Errorf("prompt %q", text)
	}
	completion, _ := tokenizer.Bytes{}.Encode("Here it is:\n```python\nprint('hi')\n```\n")
	if sol, err := tt.Decode(completion); err != nil || sol != "print('hi')" {
		t.Errorf("Decode = %q, %v", sol, err)
	}
	refusal, _ := tokenizer.Bytes{}.Encode("I cannot do that.")
	if sol, err := tt.Decode(refusal); err != nil || sol != "" {
		t.Errorf("Decode of a refusal = %q, %v, want the empty (malformed) solution", sol, err)
	}
	if _, err := tt.Decode([]int{300}); err == nil {
		t.Error("an id outside the vocabulary decoded")
	}
}

// The model to train comes from the run (policy.tinker.base_model) over the
// worker's default; with neither, Init fails for good naming the field,
// before any request.
func TestBaseModelFromRunOrWorker(t *testing.T) {
	var created []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			BaseModel string `json:"base_model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		switch r.URL.Path {
		case PathCreateSession:
			_ = json.NewEncoder(w).Encode(CreateSessionResponse{SessionID: "s1"})
			return
		case PathCreateModel:
			created = append(created, body.BaseModel)
		}
		w.WriteHeader(http.StatusBadRequest) // stop there
	}))
	defer srv.Close()
	p, err := New(Config{BaseURL: srv.URL, Retries: 1}, fixedTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Init(t.Context(), backend.InitRequest{Run: "a"})
	if err == nil || !backend.IsPermanent(err) || !strings.Contains(err.Error(), "policy.tinker.base_model: empty") || len(created) != 0 {
		t.Fatalf("Init without a base model: %v (created %v)", err, created)
	}
	_, _ = p.Init(t.Context(), backend.InitRequest{Run: "b", Settings: backend.PolicySettings{Model: backend.ModelSettings{BaseModel: "Qwen/Qwen3-4B"}}})
	q, err := New(Config{BaseURL: srv.URL, BaseModel: "worker-model", Retries: 1}, fixedTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = q.Init(t.Context(), backend.InitRequest{Run: "c"})
	_, _ = q.Init(t.Context(), backend.InitRequest{Run: "d", Settings: backend.PolicySettings{Model: backend.ModelSettings{BaseModel: "run-model"}}})
	if want := []string{"Qwen/Qwen3-4B", "worker-model", "run-model"}; !slices.Equal(created, want) {
		t.Errorf("create_model base models %v, want %v", created, want)
	}
}
