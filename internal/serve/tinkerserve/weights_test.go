package tinkerserve_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/testenv"
)

// futures counts the server's futures of a kind.
func (e *env) futures(t *testing.T, kind string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM tinker_futures WHERE kind = $1`, kind).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// save_weights and load_weights through the client: the saved training
// state loads into another model, which then holds the same policy (same
// content hash, Adam state included), and a model that loaded it trains on
// exactly as the one that saved it. A save retried with its journal entry
// polls the first future; one sent again without it (the worker died
// before journalling the id) gets the first future from the server.
func TestSaveLoadWeights(t *testing.T) {
	var bodies bodyChecker
	e := newEnv(t, bodies.wrap, tinkerserve.Options{StrictSeq: true})
	ctx := t.Context()
	j := &tinker.MemJournal{}
	p := e.client(t, j, "")
	task := trainTask(t)
	ck0 := initRun(t, p)
	comps, err := p.Sample(ctx, backend.SampleRequest{Checkpoint: ck0, Task: task, Seeds: seeds, Key: "g0"})
	if err != nil {
		t.Fatal(err)
	}
	ck1, _, err := p.Update(ctx, updateRequest(ck0, batchOf(task, comps)))
	if err != nil {
		t.Fatal(err)
	}
	model, _ := tinker.ModelOf(ck1.Location)
	if want := "tinker://" + model + "/weights/wmrl-v000001"; ck1.State != want {
		t.Fatalf("checkpoint 1 state %q, want %q", ck1.State, want)
	}
	if ck0.State != "" {
		t.Fatalf("checkpoint 0 state %q, want none (no update made it)", ck0.State)
	}

	// A second update moves the model past checkpoint 1.
	comps1, err := p.Sample(ctx, backend.SampleRequest{Checkpoint: ck1, Task: task, Seeds: seeds, Key: "g1"})
	if err != nil {
		t.Fatal(err)
	}
	req1 := updateRequest(ck1, batchOf(task, comps1))
	ck2, _, err := p.Update(ctx, req1)
	if err != nil {
		t.Fatal(err)
	}

	// Save again by hand: the journalled key polls the same future; the
	// same seq_id without the journal gets the first future too.
	saves := e.futures(t, "save_weights")
	seq := int64(10) // the model's next: two updates took 1 ... 9
	first, err := p.SaveWeights(ctx, "manual/save", model, seq, "manual")
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.SaveWeights(ctx, "manual/save", model, seq, "manual")
	if err != nil || again != first {
		t.Fatalf("retried save: %+v %v, first %+v", again, err, first)
	}
	fresh, err := e.client(t, &tinker.MemJournal{}, "").SaveWeights(ctx, "manual/save", model, seq, "manual")
	if err != nil || fresh != first {
		t.Fatalf("save sent again without the journal: %+v %v, first %+v", fresh, err, first)
	}
	if n := e.futures(t, "save_weights"); n != saves+1 {
		t.Fatalf("%d save_weights futures after three saves of one request, want %d", n, saves+1)
	}
	if first.ContentHash != ck2.Hash {
		t.Fatalf("training weights of checkpoint 2 hash to %s, its sampler weights to %s", first.ContentHash, ck2.Hash)
	}

	// Continue from checkpoint 1 in a new model: same hash, and the same
	// update gives the same checkpoint 2 as the model that made it.
	q := e.client(t, tinker.PostgresJournal{Store: e.store}, "")
	cont := backend.ContinueRequest{Run: "run-b", From: "run-a", Checkpoint: ck1, Suite: testenv.SuiteSeed, Seed: initSeed, Settings: settings}
	c1, err := q.Continue(ctx, cont)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := tinker.ModelOf(c1.Location)
	if c1.Version != 1 || c1.Hash != ck1.Hash || c1.State != ck1.State || m2 == model {
		t.Fatalf("continued checkpoint %+v, from %+v", c1, ck1)
	}
	if again, err := q.Continue(ctx, cont); err != nil || again != c1 {
		t.Fatalf("Continue again: %+v %v, first %+v", again, err, c1)
	}
	comps1b, err := q.Sample(ctx, backend.SampleRequest{Checkpoint: c1, Task: task, Seeds: seeds, Key: "g1b"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(comps1b, comps1) {
		t.Fatal("the continued checkpoint samples other completions than the original")
	}
	c2, _, err := q.Update(ctx, updateRequestOf("run-b", c1, batchOf(task, comps1b)))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Hash != ck2.Hash {
		t.Fatalf("continued update: checkpoint 2 %s, uninterrupted %s", c2.Hash, ck2.Hash)
	}
	var models int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM tinker_models`).Scan(&models); err != nil || models != 2 {
		t.Fatalf("%d models (%v), want 2 (Continue retried created another)", models, err)
	}
	if n := e.futures(t, "load_weights"); n != 1 {
		t.Fatalf("%d load_weights futures, want 1", n)
	}

	// A checkpoint without training weights cannot be continued.
	_, err = q.Continue(ctx, backend.ContinueRequest{Run: "run-c", From: "run-a", Checkpoint: backend.Checkpoint{Version: 1, Hash: ck1.Hash, Location: ck1.Location}})
	if err == nil || !backend.IsPermanent(err) || !strings.Contains(err.Error(), "saved no training weights") {
		t.Fatalf("continue without a state: %v", err)
	}
	// Each model's requests, in the order the server took them, are
	// numbered 1, 2, 3, ...: run-a's Init (1), two updates (2-9) and the
	// manual save (10); run-b's load (1), checkpoint 1 (2), update (3-6).
	for m, want := range map[string]string{model: "1 2 3 4 5 6 7 8 9 10", m2: "1 2 3 4 5 6"} {
		var got []string
		rows, err := e.pool.Query(ctx, `SELECT kind, seq_id FROM tinker_futures WHERE model_id = $1 AND seq_id IS NOT NULL ORDER BY request_id`, m)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for rows.Next() {
			var k string
			var n int64
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			got, kinds = append(got, strconv.FormatInt(n, 10)), append(kinds, k)
		}
		rows.Close()
		if strings.Join(got, " ") != want {
			t.Errorf("model %s took seq_ids %v (%v), want %s", m, got, kinds, want)
		}
	}
	// Every body sent has only fields of the SDK's request types.
	bodies.verify(t, tinker.PathCreateSession, tinker.PathCreateModel, tinker.PathAsample, tinker.PathForwardBackward,
		tinker.PathOptimStep, tinker.PathSaveWeights, tinker.PathSaveWeightsForSampler, tinker.PathLoadWeights, tinker.PathRetrieveFuture)
}

func TestLoadWeightsBadRequests(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	// Init took seq_id 1; a refused request does not advance the model's
	// sequence, so each bad one below is sent at the next, 3.
	ctx := t.Context()
	p := e.client(t, &tinker.MemJournal{}, "")
	ck := initRun(t, p)
	model, _ := tinker.ModelOf(ck.Location)
	saved, err := p.SaveWeights(ctx, "s", model, 2, "w")
	if err != nil {
		t.Fatal(err)
	}
	seq := int64(3)
	for _, tt := range []struct {
		give   tinker.LoadWeightsRequest
		status int
		field  string
	}{
		{tinker.LoadWeightsRequest{ModelID: model, Path: ck.Location, Optimizer: true, SeqID: &seq}, 400, "path"}, // sampler weights
		{tinker.LoadWeightsRequest{ModelID: model, Path: saved.Path, SeqID: &seq}, 400, "optimizer"},
		{tinker.LoadWeightsRequest{ModelID: model, Path: "tinker://" + model + "/weights/nope", Optimizer: true, SeqID: &seq}, 404, "path"},
		{tinker.LoadWeightsRequest{ModelID: "model-none", Path: saved.Path, Optimizer: true, SeqID: &seq}, 404, "model_id"},
	} {
		resp, err := e.srv.Client().Post(e.srv.URL+tinker.PathLoadWeights, "application/json", strings.NewReader(must(tt.give)))
		if err != nil {
			t.Fatal(err)
		}
		var body tinker.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || body.Field != tt.field {
			t.Errorf("%+v: HTTP %d %+v, want %d on field %s", tt.give, resp.StatusCode, body, tt.status, tt.field)
		}
	}
	// save_weights of a taken name with a new seq_id: 409.
	seq3 := int64(3)
	resp, err := e.srv.Client().Post(e.srv.URL+tinker.PathSaveWeights, "application/json",
		strings.NewReader(must(tinker.SaveWeightsRequest{ModelID: model, Path: "w", SeqID: &seq3})))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("save_weights of a taken name: HTTP %d, want 409", resp.StatusCode)
	}
}
