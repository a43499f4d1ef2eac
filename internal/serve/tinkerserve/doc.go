// Package tinkerserve serves the built-in CPU policy (internal/policy, as
// internal/backend/builtin runs it) over the subset of the Tinker training
// API that wmrl's Tinker adapter (internal/backend/tinker) uses, so that the
// adapter is exercised against a real server without a GPU: sessions,
// create_model and get_info, asample, forward_backward, optim_step,
// save_weights_for_sampler, save_weights, load_weights and retrieve_future,
// under /api/v1/, with the Tinker SDK's JSON shapes, and the calls the
// official SDK (0.16 to 0.25) makes besides (sdk.go). forward_backward
// bodies may be protobuf (Content-Type: application/x-protobuf; the
// messages of tinkerpb/tinker.proto), and sample and forward_backward
// results are protobuf when retrieve_future's Accept asks for it (proto.go);
// both encodings share one implementation of each operation.
//
// A model is one built-in policy, initialised from the user metadata of
// create_model: wmrl_seed (the policy's init seed) and wmrl_suite (the suite
// whose training tasks size its input) are required; wmrl_hidden,
// wmrl_learning_rate and wmrl_kl_coef are the policy's configuration
// (builtin.PolicyConfig; defaults when absent), which only changes the
// initial checkpoint's hash since the server's optimiser step takes its
// hyperparameters from optim_step. base_model must be
// tinker.BuiltinBaseModel.
//
// Tokens are tinker.BuiltinTokenizer's: a prompt is the bytes of "suite/id"
// (the server looks the task up in its backend.TaskSource for its feature
// vector), and a completion is program tokens shifted by 256. A multi-turn
// trajectory's sequence follows its actions with their observations' bytes
// (turns.go): a model created with user metadata wmrl_turns > 1 samples and
// trains each action from the task and the previous attempt read from it. Sampling is
// seeded: completion i of a request with seed s draws from the policy with
// seed.Derive(tag, s, i); a request without a seed is refused.
//
// forward_backward accumulates the gradient of the summed importance
// sampling (or PPO) loss −Σ_datums Σ_t ρ_t·adv_t at the model's current
// weights, where the server takes the update as on-policy (ρ = 1: the
// datums' logprobs are the ones it sampled; it reports the largest gap
// between their sum and its own logprob of the completion as the metric
// logprob_diff:max). Since the built-in policy scores a whole completion,
// the advantages of a datum must be 0 on prompt positions and equal on
// completion positions; that value a_i gives the example (A = a_i), and the
// gradient is Σ_i a_i ∇log π(τ_i). optim_step takes one Adam step (no
// clipping, no KL term) along the accumulated gradient, a zero one when
// there is none, with the request's Adam parameters. save_weights stores the
// model's policy, Adam moments and step included, as training weights
// (tinker_weights kind 'training', path tinker://<model>/weights/<name>);
// load_weights puts them into a model (another one of the same base model
// and rank, as a continued run's), dropping its accumulated gradient; it
// takes optimizer: true only, since the built-in policy cannot reset its
// Adam state alone. save_weights_for_sampler stores the same bytes as kind
// 'sampler'. Every result is a deterministic function of the model's state
// and the request.
//
// Durability: each request is applied, and its future written, in one
// Postgres transaction that holds the model's row lock (tables tinker_*,
// migration 0005), so the futures are complete when they are created and a
// server restarted on the same database loses nothing. A repeated
// (model_id, seq_id), or a repeated X-Idempotency-Key, gets the first
// request's future back and changes nothing: an optimiser step is never
// applied twice. A model request whose seq_id is not above the model's last
// one is refused (409); with Options.StrictSeq (wmrl serve --strict-seq) so
// is one that is not exactly the next, 1, 2, 3, ... per model as the SDK
// numbers them, so that a client leaving a gap (which a service processing
// a model's requests in seq_id order would wait on forever) fails at once.
// Futures are complete when created, so retrieve_future answers try_again
// or 408 only with Options.Defer (wmrl serve --defer N: the first N polls
// of each future are pending), which exercises a client's waiting.
//
// Bad requests get HTTP 400 with a JSON body {"error", "category": "user",
// "field"} naming the field.
package tinkerserve
