package openaiserve

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
)

// sdkClient is the official openai-go client of the server.
func sdkClient(srv interface{ URL() string }) openai.Client {
	return openai.NewClient(option.WithBaseURL(srv.URL()+"/v1"), option.WithAPIKey(serverKey), option.WithMaxRetries(0))
}

type urlOf string

func (u urlOf) URL() string { return string(u) }

// TestSDKChoicesAndStream drives the server with openai-go: n choices (the
// same answer each, and the same again for the same seed), a streamed
// answer read with the SDK's streaming API and accumulator equal to the
// plain one, and a prompt outside the template answered with no
// prediction.
func TestSDKChoicesAndStream(t *testing.T) {
	b, srv, _ := builtinServer(t, WithAPIKey(serverKey))
	c := sdkClient(urlOf(srv.URL))
	it := items(t, b)[2]
	text, err := openaiwm.Render(nil, it)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.WorldModel.Score(t.Context(), []backend.ScoreItem{it})
	if err != nil {
		t.Fatal(err)
	}
	params := func(prompt string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: modelName, Seed: openai.Int(5), N: openai.Int(3), Temperature: openai.Float(0),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	}
	resp, err := c.Chat.Completions.New(t.Context(), params(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 3 {
		t.Fatalf("%d choices, want 3", len(resp.Choices))
	}
	for i, ch := range resp.Choices {
		if ch.Index != int64(i) || ch.FinishReason != "stop" || openaiwm.Parse(ch.Message.Content) != want[0] {
			t.Errorf("choice %d: %+v, want the prediction %+v", i, ch, want[0])
		}
	}
	again, err := c.Chat.Completions.New(t.Context(), params(text))
	if err != nil || again.RawJSON() != resp.RawJSON() {
		t.Errorf("the same seeded request twice: %v\n%s\n%s", err, resp.RawJSON(), again.RawJSON())
	}

	// Streamed: the SDK's accumulator gives back the plain answer.
	sp := params(text)
	sp.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(t.Context(), sp)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for st.Next() {
		chunks++
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks != 3*3+1 || len(acc.Choices) != 3 || acc.Usage.TotalTokens != resp.Usage.TotalTokens {
		t.Errorf("stream: %d chunks, %d choices, usage %+v", chunks, len(acc.Choices), acc.Usage)
	}
	for i, ch := range acc.Choices {
		if ch.Message.Content != resp.Choices[i].Message.Content || ch.FinishReason != "stop" || ch.Message.Role != "assistant" {
			t.Errorf("streamed choice %d: %+v, want %q", i, ch, resp.Choices[i].Message.Content)
		}
	}

	// A prompt outside the template: a completion with no prediction.
	other, err := c.Chat.Completions.New(t.Context(), params("Write a haiku about gradient descent."))
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range other.Choices {
		if !strings.HasPrefix(ch.Message.Content, NoPrediction) || openaiwm.Parse(ch.Message.Content).Graded {
			t.Errorf("a prompt outside the template: %q, want no prediction", ch.Message.Content)
		}
	}
	st = c.Chat.Completions.NewStreaming(t.Context(), params("hello {\"score\": 1}"))
	acc = openai.ChatCompletionAccumulator{}
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil || len(acc.Choices) != 3 || openaiwm.Parse(acc.Choices[0].Message.Content).Graded ||
		!strings.HasPrefix(acc.Choices[0].Message.Content, NoPrediction) {
		t.Errorf("streamed prompt outside the template: %v %+v", err, acc.Choices)
	}
}

// TestStreamWire reads a streamed answer's bytes: server-sent events of
// chat.completion.chunk objects, ending in "data: [DONE]".
func TestStreamWire(t *testing.T) {
	b, srv, _ := builtinServer(t)
	text, err := openaiwm.Render(nil, items(t, b)[0])
	if err != nil {
		t.Fatal(err)
	}
	prompt, _ := json.Marshal(text)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model": "wmrl-builtin", "stream": true, "messages": [{"role": "user", "content": `+string(prompt)+`}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	events := strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || len(events) != 4 || events[3] != "data: [DONE]" {
		t.Fatalf("%d %s: %q", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	for i, e := range events[:3] {
		var c map[string]any
		data, ok := strings.CutPrefix(e, "data: ")
		if !ok || json.Unmarshal([]byte(data), &c) != nil || c["object"] != "chat.completion.chunk" {
			t.Errorf("event %d: %q", i, e)
			continue
		}
		ch := c["choices"].([]any)[0].(map[string]any)
		if _, ok := ch["delta"].(map[string]any); !ok || (i == 2) != (ch["finish_reason"] == "stop") {
			t.Errorf("event %d: %q", i, e)
		}
	}
}
