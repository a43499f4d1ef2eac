package tinkerserve_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve/tinkerpb"
	"github.com/wmrl/wmrl/internal/testenv"
)

// exchange posts body to path and returns the status, Content-Type and
// answer.
func exchange(t *testing.T, url, path, ctype, accept string, body []byte) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// futureOf posts a request and returns its future's id.
func futureOf(t *testing.T, url, path, ctype string, body []byte) string {
	t.Helper()
	st, _, b := exchange(t, url, path, ctype, "", body)
	var f tinker.FutureResponse
	if err := json.Unmarshal(b, &f); st != http.StatusOK || err != nil || f.RequestID == "" {
		t.Fatalf("%s: HTTP %d %s", path, st, b)
	}
	return f.RequestID
}

// result retrieves a future with the given Accept.
func result(t *testing.T, url, id, accept string) (string, []byte) {
	t.Helper()
	st, ct, b := exchange(t, url, tinker.PathRetrieveFuture, "application/json", accept, []byte(`{"request_id":"`+id+`"}`))
	if st != http.StatusOK {
		t.Fatalf("retrieve %s: HTTP %d %s", id, st, b)
	}
	return ct, b
}

// asFloat32 is xs rounded to float32, as the protobuf encoding carries
// them.
func asFloat32(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(float32(x))
	}
	return out
}

// bothFB is the same forward_backward sent as a JSON and as a protobuf
// body: the protobuf request's future, both results as JSON and the
// (equal) decoded result.
type bothFB struct {
	protoID        string
	jsonRes, pbRes []byte
	out            tinker.ForwardBackwardOutput
}

// forwardBackwardBoth sends forward_backward of datums (importance
// sampling, seq_id 1000) to model jsonModel as a JSON body and to
// pbModel as a protobuf body, and checks that both results, read as JSON,
// are the same, with an output per datum and a gradient.
func forwardBackwardBoth(t *testing.T, url, jsonModel, pbModel string, datums []tinker.Datum) bothFB {
	t.Helper()
	seq := int64(1000)
	jid := futureOf(t, url, tinker.PathForwardBackward, "application/json", []byte(must(tinker.ForwardBackwardRequest{ModelID: jsonModel, SeqID: &seq,
		ForwardBackwardInput: tinker.ForwardBackwardInput{Data: datums, LossFn: tinker.LossImportanceSampling}})))
	body, err := proto.Marshal(toProto(pbModel, 1000, tinker.LossImportanceSampling, datums))
	if err != nil {
		t.Fatal(err)
	}
	r := bothFB{protoID: futureOf(t, url, tinker.PathForwardBackward, "application/x-protobuf", body)}
	_, r.jsonRes = result(t, url, jid, "")
	_, r.pbRes = result(t, url, r.protoID, "application/json")
	var ob tinker.ForwardBackwardOutput
	if err := json.Unmarshal(r.jsonRes, &r.out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.pbRes, &ob); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.out, ob) || len(r.out.LossFnOutputs) != len(datums) || r.out.Metrics["grad_norm:mean"] == 0 {
		t.Fatalf("JSON body's result %s\nprotobuf body's %s", r.jsonRes, r.pbRes)
	}
	return r
}

// toProto encodes datums as the SDK 0.25 does (request_conv).
func toProto(model string, seq int32, lossFn string, data []tinker.Datum) *tinkerpb.ForwardBackwardRequest {
	m := &tinkerpb.ForwardBackwardRequest{ModelId: model, SeqId: seq, LossFn: lossFn}
	for _, d := range data {
		pd := &tinkerpb.Datum{LossFnInputs: map[string]*tinkerpb.Tensor{}}
		for _, c := range d.ModelInput.Chunks {
			var b []byte
			for _, x := range c.Tokens {
				b = binary.LittleEndian.AppendUint32(b, uint32(int32(x)))
			}
			pd.ModelInput = append(pd.ModelInput, &tinkerpb.Chunk{Chunk: &tinkerpb.Chunk_EncodedText{EncodedText: &tinkerpb.EncodedTextChunk{Tokens: b}}})
		}
		for k, td := range d.LossFnInputs {
			pt := &tinkerpb.Tensor{}
			var b []byte
			for _, x := range td.Data {
				if td.Dtype == "int64" {
					pt.Dtype = tinkerpb.DType_DTYPE_INT64
					b = binary.LittleEndian.AppendUint64(b, uint64(int64(x)))
				} else {
					pt.Dtype = tinkerpb.DType_DTYPE_FLOAT32
					b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
				}
			}
			pt.Encoding = &tinkerpb.Tensor_Dense{Dense: b}
			for _, s := range td.Shape {
				pt.Shape = append(pt.Shape, int64(s))
			}
			pd.LossFnInputs[k] = pt
		}
		m.Data = append(m.Data, pd)
	}
	return m
}

func float32sOf(b []byte) []float64 {
	out := make([]float64, len(b)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

// TestProtobufWire: a protobuf forward_backward body is the same request
// as its JSON (same loss outputs, metrics and gradient on two models of
// the same seed), results come as protobuf exactly when the poll's Accept
// asks for it, with the JSON answer's values, and a bad body gets a 4xx
// naming the field.
func TestProtobufWire(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{})
	ctx := t.Context()
	p := e.client(t, &tinker.MemJournal{}, "")
	var models []string
	var cks []backend.Checkpoint
	for _, run := range []string{"json", "proto"} {
		ck, err := p.Init(ctx, backend.InitRequest{Run: run, Suite: testenv.SuiteSeed, Seed: 1, Settings: settings})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := tinker.ModelOf(ck.Location)
		models, cks = append(models, m), append(cks, ck)
	}
	task := trainTask(t)
	prompt, _ := tinker.BuiltinTokenizer{}.Prompt(task)
	seed := int64(5)
	sampleID := futureOf(t, e.srv.URL, tinker.PathAsample, "application/json", []byte(must(tinker.SampleRequest{NumSamples: 3, ModelPath: cks[0].Location,
		Prompt: tinker.ModelInput{Chunks: []tinker.ModelInputChunk{{Type: "encoded_text", Tokens: prompt}}}, SamplingParams: tinker.SamplingParams{Seed: &seed, Temperature: 1}})))

	// sample: JSON without Accept, protobuf with the SDK's Accept.
	ct, js := result(t, e.srv.URL, sampleID, "")
	var sj tinker.SampleResponse
	if err := json.Unmarshal(js, &sj); err != nil || ct != "application/json" {
		t.Fatalf("sample as JSON: %s %s %v", ct, js, err)
	}
	ct, pb := result(t, e.srv.URL, sampleID, "application/x-protobuf")
	var sp tinkerpb.SampleResponse
	if err := proto.Unmarshal(pb, &sp); err != nil || ct != "application/x-protobuf" {
		t.Fatalf("sample as protobuf: %s %v", ct, err)
	}
	if len(sp.Sequences) != len(sj.Sequences) || len(sj.Sequences) != 3 {
		t.Fatalf("%d protobuf sequences, %d JSON", len(sp.Sequences), len(sj.Sequences))
	}
	comps := make([]backend.Completion, len(sj.Sequences))
	for i, q := range sj.Sequences {
		var toks []float64
		for j := 0; j+4 <= len(sp.Sequences[i].Tokens); j += 4 {
			toks = append(toks, float64(int32(binary.LittleEndian.Uint32(sp.Sequences[i].Tokens[j:]))))
		}
		lps := float32sOf(sp.Sequences[i].Logprobs)
		if len(toks) != len(q.Tokens) || len(lps) != len(q.Logprobs) || sp.Sequences[i].StopReason != tinkerpb.StopReason_STOP_REASON_STOP {
			t.Fatalf("sequence %d: protobuf %v %v, JSON %v %v", i, toks, lps, q.Tokens, q.Logprobs)
		}
		for j := range toks {
			if int(toks[j]) != q.Tokens[j] || math.Abs(lps[j]-q.Logprobs[j]) > 1e-6 {
				t.Fatalf("sequence %d position %d: protobuf %v %v, JSON %v %v", i, j, toks[j], lps[j], q.Tokens[j], q.Logprobs[j])
			}
		}
		// The datums' logprobs as float32, so both encodings carry the same.
		comps[i] = backend.Completion{Tokens: q.Tokens, LogProbs: asFloat32(q.Logprobs)}
	}
	datums, err := tinker.BuildDatums(tinker.BuiltinTokenizer{}, batchOf(task, comps))
	if err != nil {
		t.Fatal(err)
	}

	// forward_backward on model 0 as JSON, on model 1 as protobuf.
	fb := forwardBackwardBoth(t, e.srv.URL, models[0], models[1], datums)
	pid, a, b, ob := fb.protoID, fb.jsonRes, fb.pbRes, fb.out
	seq := int64(1000) // the models' last seq_id
	// The same result as protobuf: one batched record, per-datum offsets.
	ct, pb = result(t, e.srv.URL, pid, "application/x-protobuf, application/json;q=0.5")
	var fo tinkerpb.ForwardBackwardOutput
	if err := proto.Unmarshal(pb, &fo); err != nil || ct != "application/x-protobuf" {
		t.Fatalf("forward_backward as protobuf: %s %v", ct, err)
	}
	if !reflect.DeepEqual(fo.Metrics, ob.Metrics) || fo.LossFnOutputType != ob.LossFnOutputType || len(fo.LossFnOutputs) != 1 || fo.LossFnOutputs[0].NumDatums != int64(len(datums)) {
		t.Fatalf("protobuf result %v, JSON %s", &fo, b)
	}
	bt := fo.LossFnOutputs[0].Fields["logprobs"]
	all := float32sOf(bt.Data)
	for i, o := range ob.LossFnOutputs {
		lo := binary.LittleEndian.Uint64(bt.Offsets[8*i:]) / 4
		hi := binary.LittleEndian.Uint64(bt.Offsets[8*(i+1):]) / 4
		want := o["logprobs"].Data
		if bt.Dtype != tinkerpb.DType_DTYPE_FLOAT32 || int(hi-lo) != len(want) {
			t.Fatalf("datum %d: %d protobuf logprobs, %d JSON", i, hi-lo, len(want))
		}
		for j, x := range all[lo:hi] {
			if math.Abs(x-want[j]) > 1e-6 {
				t.Fatalf("datum %d position %d: protobuf %v, JSON %v", i, j, x, want[j])
			}
		}
	}
	for _, accept := range []string{"application/x-protobuf;q=0, application/json", "application/json", "*/*", "application/json;q=0.9, application/x-protobuf;q=0.5"} {
		if ct, _ := result(t, e.srv.URL, pid, accept); ct != "application/json" {
			t.Errorf("Accept %q: answered %s, want JSON", accept, ct)
		}
	}
	if ct, _ := result(t, e.srv.URL, pid, "application/json;q=0.1, application/x-protobuf;q=0.5"); ct != "application/x-protobuf" {
		t.Errorf("Accept preferring protobuf: answered %s, want protobuf", ct)
	}
	// A future of another kind stays JSON whatever the Accept.
	seq++
	oid := futureOf(t, e.srv.URL, tinker.PathOptimStep, "application/json", []byte(must(tinker.OptimStepRequest{ModelID: models[1], SeqID: &seq,
		AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-12}})))
	if ct, _ := result(t, e.srv.URL, oid, "application/x-protobuf"); ct != "application/json" {
		t.Fatalf("optim_step result as %s", ct)
	}

	// forward_only: the outputs, no gradient, no forward_backward counted.
	fb0, _ := e.counts(t)
	fwd := toProto(models[0], 1001, tinker.LossImportanceSampling, datums)
	fwd.ForwardOnly = true
	body, _ := proto.Marshal(fwd)
	_, f := result(t, e.srv.URL, futureOf(t, e.srv.URL, tinker.PathForwardBackward, "application/x-protobuf", body), "")
	var of tinker.ForwardBackwardOutput
	if err := json.Unmarshal(f, &of); err != nil {
		t.Fatal(err)
	}
	if _, ok := of.Metrics["grad_norm:mean"]; ok || !reflect.DeepEqual(of.LossFnOutputs, ob.LossFnOutputs) {
		t.Fatalf("forward_only result %s, forward_backward's %s", f, a)
	}
	if fb1, _ := e.counts(t); fb1 != fb0 {
		t.Fatalf("forward_only counted as a forward_backward: %d -> %d", fb0, fb1)
	}

	// Bad bodies.
	int32Adv := toProto(models[0], 1002, tinker.LossImportanceSampling, datums)
	int32Adv.Data[1].LossFnInputs["advantages"].Dtype = tinkerpb.DType_DTYPE_INT32
	badShape := toProto(models[0], 1002, tinker.LossImportanceSampling, datums)
	badShape.Data[0].LossFnInputs["logprobs"].Shape = []int64{3}
	oddTokens := toProto(models[0], 1002, tinker.LossImportanceSampling, datums)
	oddTokens.Data[2].ModelInput[0].GetEncodedText().Tokens = []byte{1, 2, 3}
	image := toProto(models[0], 1002, tinker.LossImportanceSampling, datums)
	image.Data[0].ModelInput = append(image.Data[0].ModelInput, &tinkerpb.Chunk{Chunk: &tinkerpb.Chunk_Image{Image: &tinkerpb.ImageChunk{Format: "png"}}})
	noSeq := toProto(models[0], 0, tinker.LossImportanceSampling, datums)
	config := toProto(models[0], 1002, tinker.LossImportanceSampling, datums)
	config.LossFnConfig = map[string]float64{"clip_low_threshold": 0.8}
	for _, c := range []struct {
		name  string
		m     *tinkerpb.ForwardBackwardRequest
		raw   []byte
		field string
	}{
		{"int32 advantages", int32Adv, nil, "forward_backward_input.data[1].loss_fn_inputs.advantages"},
		{"shape", badShape, nil, "forward_backward_input.data[0].loss_fn_inputs.logprobs"},
		{"tokens", oddTokens, nil, "forward_backward_input.data[2].model_input.chunks[0].tokens"},
		{"image", image, nil, "forward_backward_input.data[0].model_input.chunks[1].type"},
		{"seq_id", noSeq, nil, "seq_id"},
		{"loss_fn_config", config, nil, "forward_backward_input.loss_fn_config.clip_low_threshold"},
		{"not protobuf", nil, []byte(`{"model_id":"x"}`), "body"},
	} {
		body := c.raw
		if c.m != nil {
			body, _ = proto.Marshal(c.m)
		}
		st, _, b := exchange(t, e.srv.URL, tinker.PathForwardBackward, "application/x-protobuf", "", body)
		var er tinker.ErrorResponse
		_ = json.Unmarshal(b, &er)
		if st != http.StatusBadRequest || er.Field != c.field {
			t.Errorf("%s: HTTP %d %s, want 400 naming %s", c.name, st, b, c.field)
		}
	}
	// zstd is not taken (client/config says proto_compress_fwdbwd false),
	// nor protobuf on another endpoint.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+tinker.PathForwardBackward, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "zstd")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("zstd body: HTTP %d, want 415", resp.StatusCode)
	}
	if st, _, _ := exchange(t, e.srv.URL, tinker.PathOptimStep, "application/x-protobuf", "", body); st != http.StatusUnsupportedMediaType {
		t.Errorf("protobuf optim_step: HTTP %d, want 415", st)
	}
	if fb2, _ := e.counts(t); fb2 != fb0 {
		t.Fatalf("a bad request changed the model: %d -> %d", fb0, fb2)
	}
}
