// Package openaiwm is a world model (backend.WorldModel) served by a
// language model over the OpenAI chat-completions protocol: vLLM, SGLang,
// the OpenAI API or any compatible server, reached through the official Go
// client (github.com/openai/openai-go/v3) at Config.BaseURL.
//
// Each item is one chat completion. The task (its Prompt, or its suite and
// id for the built-in suite, whose tasks have no text) and the solution, in
// a fenced block, are rendered by a text/template (DefaultTemplate) into the
// user message, which asks for a JSON answer. The answer is parsed leniently
// (Parse): reasoning blocks are dropped, the last JSON object of the text is
// read, either {"score": s} with s in [0,1] or the reward ladder's
// {"status": ..., "quality": q}. An answer that holds no score (a refusal,
// no JSON, broken JSON, an unknown status, a score out of range) is an
// ungraded prediction, never an error and never 0. An empty solution is
// scored 0 (a malformed program) without a call.
//
// A turn of a multi-turn trajectory (an item with an Action) is asked with
// DefaultTurnTemplate, what the method's world-model server gives its
// model (the task, its overview, the action, the code with numbered
// lines), and answered as that server's model answers: {"reason",
// "predictions": [{status, error_type, error_line, quality_bucket,
// env_feedback, confidence}, ...]} (ParseAnswer). The first prediction's
// status and bucket give the score on the ladder (BucketPosition) and the
// prediction's Status; its env_feedback is the Feedback the policy's next
// observation shows. A request_info item is refused.
//
// Requests are deterministic (temperature 0 by default, a fixed seed), and
// every answer is cached (Cache: in memory, or Postgres through StoreCache)
// under the model and the SHA-256 of the whole request body, so that an
// activity retried by Temporal neither pays twice nor changes its
// predictions.
//
// Errors follow package backend: a server that cannot be reached, times out
// or answers 408, 409, 429 or 5xx is retried by the client (MaxRetries, with
// backoff and the server's Retry-After) and then returned as a plain error,
// which Temporal retries; a 400, 401, 403, 404 or other 4xx is a
// *backend.PermanentError naming the run-config field to fix. The API key
// (EnvAPIKey, else EnvOpenAIKey, or Config.APIKeyFile) is a Secret: it never
// appears in an error, a log line or a formatted Config.
//
// # Refreshing (not built)
//
// A run may retrain its world model on its own anchor executions
// (world_model.refresh; docs/design.md, "On-policy world model"). The hook
// is backend.Refresher, which the built-in model implements by refitting its
// regression. This adapter does not implement it, and the run configuration
// refuses refresh with world_model.backend openai. Fine-tuning would go
// there: Refresh starting a fine-tuning job keyed by (run, step) on the
// items (the rendered prompt of each (task, solution) and its real score as
// the answer), heartbeating while it trains, and returning the tuned model's
// id as the artefact; Open returning an adapter whose Config.Model is that
// id, so that its cached answers are kept under its own name.
package openaiwm
