package tinkerserve

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve/tinkerpb"
)

// The protobuf wire of the official SDK (≥ 0.24): forward_backward bodies
// in tinkerpb.ForwardBackwardRequest, and forward_backward and sample
// results in tinkerpb.ForwardBackwardOutput and tinkerpb.SampleResponse
// when retrieve_future's Accept asks for them. The messages are decoded
// into, and encoded from, the JSON wire's types, so that one
// implementation of each operation serves both encodings.

// contentTypeProtobuf is the SDK's protobuf media type.
const contentTypeProtobuf = "application/x-protobuf"

// isProtobuf reports whether a Content-Type is the SDK's protobuf one.
func isProtobuf(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == contentTypeProtobuf
}

// acceptsProtobuf reports whether a request's Accept prefers protobuf:
// it lists application/x-protobuf with a q above 0 and no lower than
// JSON's (application/json, application/* or */*; ties go to protobuf, as
// the SDK's "application/x-protobuf, application/json" means). No Accept,
// or one without protobuf, is JSON.
func acceptsProtobuf(r *http.Request) bool {
	pb, js := 0.0, 0.0
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			q := 1.0
			if s, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(s, 64); err != nil {
					continue
				}
			}
			switch mt {
			case contentTypeProtobuf:
				pb = max(pb, q)
			case "application/json", "application/*", "*/*":
				js = max(js, q)
			}
		}
	}
	return pb > 0 && pb >= js
}

// forwardBackwardProto is forward_backward with a protobuf body.
func (s *Server) forwardBackwardProto(ctx context.Context, body []byte, idem string) (any, error) {
	in, err := fbRequestFromProto(body)
	if err != nil {
		return nil, err
	}
	return s.forwardBackwardOp(ctx, in, idem)
}

// fbRequestFromProto decodes a protobuf ForwardBackwardRequest.
func fbRequestFromProto(body []byte) (fbRequest, error) {
	var m tinkerpb.ForwardBackwardRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		return fbRequest{}, bad("body", "not a protobuf tinker_public.ForwardBackwardRequest: %v", err)
	}
	if m.SeqId < 1 {
		// The field is not optional on the wire; the SDK numbers a
		// model's requests from 1.
		return fbRequest{}, bad("seq_id", "%d: want 1 or more", m.SeqId)
	}
	seq := int64(m.SeqId)
	in := fbRequest{ModelID: m.ModelId, SeqID: &seq, LossFn: m.LossFn, LossFnConfig: m.LossFnConfig,
		ForwardOnly: m.ForwardOnly, Data: make([]tinker.Datum, len(m.Data))}
	for i, d := range m.Data {
		f := fmt.Sprintf("forward_backward_input.data[%d]", i)
		var chunks []tinker.ModelInputChunk
		for j, c := range d.ModelInput {
			switch x := c.Chunk.(type) {
			case *tinkerpb.Chunk_EncodedText:
				toks, err := int32s(x.EncodedText.Tokens)
				if err != nil {
					return fbRequest{}, bad(fmt.Sprintf("%s.model_input.chunks[%d].tokens", f, j), "%v", err)
				}
				chunks = append(chunks, tinker.ModelInputChunk{Type: tinker.ChunkEncodedText, Tokens: toks})
			case *tinkerpb.Chunk_Image:
				chunks = append(chunks, tinker.ModelInputChunk{Type: "image"})
			case *tinkerpb.Chunk_Dmel:
				chunks = append(chunks, tinker.ModelInputChunk{Type: "dmel"})
			default:
				return fbRequest{}, bad(fmt.Sprintf("%s.model_input.chunks[%d]", f, j), "empty chunk")
			}
		}
		inputs := make(map[string]tinker.TensorData, len(d.LossFnInputs))
		for k, t := range d.LossFnInputs {
			td, err := tensorFromProto(t)
			if err != nil {
				return fbRequest{}, bad(f+".loss_fn_inputs."+k, "%v", err)
			}
			inputs[k] = td
		}
		in.Data[i] = tinker.Datum{ModelInput: tinker.ModelInput{Chunks: chunks}, LossFnInputs: inputs}
	}
	return in, nil
}

// tensorFromProto decodes a dense float32 or int64 tensor.
func tensorFromProto(t *tinkerpb.Tensor) (tinker.TensorData, error) {
	var raw []byte
	switch x := t.Encoding.(type) {
	case *tinkerpb.Tensor_Dense:
		raw = x.Dense
	case *tinkerpb.Tensor_SparseCsr:
		return tinker.TensorData{}, fmt.Errorf("sparse_csr: the built-in policy takes dense tensors only")
	default:
		// An empty dense tensor (no values) is encoded as no field.
	}
	var out tinker.TensorData
	switch t.Dtype {
	case tinkerpb.DType_DTYPE_FLOAT32:
		if len(raw)%4 != 0 {
			return out, fmt.Errorf("dense: %d bytes is not a whole number of float32", len(raw))
		}
		out = tinker.TensorData{Dtype: "float32", Data: make([]float64, len(raw)/4)}
		for i := range out.Data {
			out.Data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	case tinkerpb.DType_DTYPE_INT64:
		if len(raw)%8 != 0 {
			return out, fmt.Errorf("dense: %d bytes is not a whole number of int64", len(raw))
		}
		out = tinker.TensorData{Dtype: "int64", Data: make([]float64, len(raw)/8)}
		for i := range out.Data {
			out.Data[i] = float64(int64(binary.LittleEndian.Uint64(raw[8*i:])))
		}
	default:
		return out, fmt.Errorf("dtype %v: want DTYPE_FLOAT32 or DTYPE_INT64 (the SDK's public dtypes)", t.Dtype)
	}
	if len(t.Shape) > 0 {
		n := int64(1)
		for _, d := range t.Shape {
			if d < 0 {
				return out, fmt.Errorf("shape %v: negative", t.Shape)
			}
			n *= d
			out.Shape = append(out.Shape, int(d))
		}
		if n != int64(len(out.Data)) {
			return out, fmt.Errorf("shape %v has %d values, dense has %d", t.Shape, n, len(out.Data))
		}
	}
	return out, nil
}

// int32s decodes little-endian int32 token ids.
func int32s(b []byte) ([]int, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of int32", len(b))
	}
	out := make([]int, len(b)/4)
	for i := range out {
		out[i] = int(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out, nil
}

// futureResult is a future's stored (JSON) result, which reply sends as
// JSON or, when the request accepts it and the kind has one, protobuf.
type futureResult struct {
	kind string
	raw  json.RawMessage
}

// protoResult encodes a future's result as its protobuf message, or
// returns nil when its kind has none.
func protoResult(f futureResult) (proto.Message, error) {
	switch f.kind {
	case "sample":
		var r tinker.SampleResponse
		if err := json.Unmarshal(f.raw, &r); err != nil {
			return nil, err
		}
		return sampleToProto(r)
	case "forward_backward", "forward":
		var r tinker.ForwardBackwardOutput
		if err := json.Unmarshal(f.raw, &r); err != nil {
			return nil, err
		}
		return fbOutputToProto(r)
	}
	return nil, nil
}

func sampleToProto(r tinker.SampleResponse) (*tinkerpb.SampleResponse, error) {
	out := &tinkerpb.SampleResponse{Sequences: make([]*tinkerpb.SampledSequence, len(r.Sequences))}
	for i, sq := range r.Sequences {
		var stop tinkerpb.StopReason
		switch sq.StopReason {
		case "stop":
			stop = tinkerpb.StopReason_STOP_REASON_STOP
		case "length":
			stop = tinkerpb.StopReason_STOP_REASON_LENGTH
		default:
			return nil, fmt.Errorf("sequence %d: stop_reason %q has no protobuf value", i, sq.StopReason)
		}
		toks := make([]byte, 0, 4*len(sq.Tokens))
		for _, t := range sq.Tokens {
			toks = binary.LittleEndian.AppendUint32(toks, uint32(int32(t)))
		}
		seq := &tinkerpb.SampledSequence{StopReason: stop, Tokens: toks}
		if sq.Logprobs != nil {
			seq.Logprobs = float32s(sq.Logprobs)
		}
		out.Sequences[i] = seq
	}
	return out, nil
}

func float32s(x []float64) []byte {
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
	}
	return b
}

// fbOutputToProto batches the per-datum loss outputs into one ArrayRecord:
// per field, every datum's values one after another and their byte
// offsets. Every datum must have the same fields, each with one dtype and
// trailing shape (the server's outputs are 1-D logprobs).
func fbOutputToProto(r tinker.ForwardBackwardOutput) (*tinkerpb.ForwardBackwardOutput, error) {
	out := &tinkerpb.ForwardBackwardOutput{LossFnOutputType: r.LossFnOutputType, Metrics: r.Metrics}
	if len(r.LossFnOutputs) == 0 {
		return out, nil
	}
	rec := &tinkerpb.ArrayRecord{TypeTag: r.LossFnOutputType, NumDatums: int64(len(r.LossFnOutputs)), Fields: map[string]*tinkerpb.BatchedTensor{}}
	for name, first := range r.LossFnOutputs[0] {
		bt := &tinkerpb.BatchedTensor{}
		trailing := trailingShape(first.Shape)
		for _, d := range trailing {
			bt.TrailingShape = append(bt.TrailingShape, int64(d))
		}
		offsets := []byte{}
		offsets = binary.LittleEndian.AppendUint64(offsets, 0)
		for i, o := range r.LossFnOutputs {
			t, ok := o[name]
			if !ok || len(o) != len(r.LossFnOutputs[0]) {
				return nil, fmt.Errorf("loss_fn_outputs[%d]: fields differ from datum 0's", i)
			}
			if t.Dtype != first.Dtype || !slices.Equal(trailingShape(t.Shape), trailing) {
				return nil, fmt.Errorf("loss_fn_outputs[%d].%s: dtype or shape differs from datum 0's", i, name)
			}
			switch t.Dtype {
			case "float32":
				bt.Dtype = tinkerpb.DType_DTYPE_FLOAT32
				bt.Data = append(bt.Data, float32s(t.Data)...)
			case "int64":
				bt.Dtype = tinkerpb.DType_DTYPE_INT64
				for _, v := range t.Data {
					bt.Data = binary.LittleEndian.AppendUint64(bt.Data, uint64(int64(v)))
				}
			default:
				return nil, fmt.Errorf("loss_fn_outputs[%d].%s: dtype %q has no protobuf value", i, name, t.Dtype)
			}
			offsets = binary.LittleEndian.AppendUint64(offsets, uint64(len(bt.Data)))
		}
		bt.Offsets = offsets
		rec.Fields[name] = bt
	}
	out.LossFnOutputs = []*tinkerpb.ArrayRecord{rec}
	return out, nil
}

// trailingShape is a shape without its leading dimension.
func trailingShape(shape []int) []int {
	if len(shape) < 2 {
		return nil
	}
	return shape[1:]
}
