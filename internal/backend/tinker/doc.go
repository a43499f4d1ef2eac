// Package tinker is the policy port (backend.Policy) over the Tinker
// training API: REST and JSON under /api/v1/, as hosted Tinker and the open
// servers that implement it (SkyRL tx) serve it, and as
// internal/serve/tinkerserve serves the built-in policy. It speaks the
// subset wmrl needs, with the paths and JSON shapes of the Tinker Python
// SDK: create_session, session_heartbeat, create_model, asample,
// forward_backward, optim_step, save_weights_for_sampler, save_weights,
// load_weights and retrieve_future.
//
// A run is one Tinker model: Init creates it (a LoRA adapter of
// Config.LoRARank on Config.BaseModel) and saves its weights for sampling
// as checkpoint 0; checkpoint v is the sampler weights named "wmrl-v<v>",
// and its Location is their tinker:// path. Sample sends one asample request
// per group, and from turn 2 of a multi-turn trajectory one per trajectory,
// of its token sequence so far (Sequence: the prompt, each earlier action's
// tokens and observation); a multi-turn trajectory is one training datum of
// its whole sequence, the observations masked like the prompt. Update sends forward_backward with the batch's datums
// (BuildDatums, the RL datums of tinker-cookbook), optim_step with Adam
// (the run's learning rate), save_weights (the training weights with their
// Adam state, named like the checkpoint; their tinker:// path is the
// checkpoint's State) and save_weights_for_sampler. Continue (wmrl
// continue) gives a continued run a model of its own: create_model,
// load_weights of the old run's training weights with the optimiser state,
// save_weights_for_sampler.
//
// Every request is asynchronous: the service answers with a request id,
// and the client polls retrieve_future, again on a "try_again" answer or an
// HTTP 408, backing off up to Config.PollMax, heartbeating the Temporal
// activity (when it runs in one) and the session. Transient failures
// (connection errors, 408, 429, 5xx) are retried Config.Retries times and
// then returned as retryable errors; other answers are
// *backend.PermanentError. Messages name the backend and URL and never
// hold the key.
//
// Exactly once: before a request of Init, Update or Continue is sent, its
// key (UpdateRequest.Key, "<run>/init" or "<run>/continue", and the phase)
// is written to a Journal with the model id and seq_id; once the service
// answers, the request id is. A retried activity finds it and polls the
// same future. Every request carries its key as X-Idempotency-Key, so a
// request sent again (the worker died before journalling its id) is
// answered with the first future by a server that honours seq_id or the
// idempotency key, as tinkerserve does.
//
// Ordering: a Tinker service processes a model's requests in seq_id order,
// and the SDK numbers them 1, 2, 3, ... per model; so does this client,
// with no gap, as a pure function of the checkpoint and the call (seqBase):
// a model made by Init sends 4v+1 save_weights_for_sampler (checkpoint v,
// "wmrl-v<v>"), 4v+2 forward_backward, 4v+3 optim_step and 4v+4
// save_weights for the update from v; a continued run's model from
// checkpoint o sends load_weights at 1 (as the SDK's client restored from
// saved state does), and its checkpoint v ("wmrl-v<v>-from<o>") at
// 4(v-o)+2. A step whose batch has no weight still sends forward_backward,
// of one completion with zero advantages. create_model has no seq_id.
// Request bodies hold only fields of the SDK's request types (0.16.1 to
// 0.25.0 forbid others up to 0.22; see testdata/sdk_request_fields.json).
//
// The importance ratio: forward_backward's loss_fn_outputs (one per datum,
// its "logprobs" the policy's at the update) against the sampling logprobs
// give the mean and max of exp(logp_update − logp_sample) over the action
// tokens, UpdateStats.RatioMean and RatioMax, which the step's summary
// records (importance_ratio_mean, importance_ratio_max).
//
// Determinism: a sampling request carries one seed, Seeds[0]>>33, and
// num_samples = len(Seeds); the service must sample deterministically from
// it. The checkpoint hash is the content hash the service reports
// (tinkerserve reports the policy's hash), else a hash of the tinker://
// path (hosted Tinker reports none).
//
// Configuration: the run config's policy section would select it with
//
//	policy:
//	  backend: tinker
//	  learning_rate: 4.0e-5
//	  tinker:
//	    base_url: https://tinker.thinkingmachines.dev/services/tinker-prod  # or TINKER_BASE_URL
//	    base_model: Qwen/Qwen3-8B        # wmrl/builtin-policy for tinkerserve
//	    lora_rank: 32
//	    loss: importance_sampling        # or ppo
//	    beta1: 0.9
//	    beta2: 0.95
//	    eps: 1.0e-12
//	    max_tokens: 512
//	    temperature: 1.0
//
// and the key comes from TINKER_API_KEY or the file named by
// TINKER_API_KEY_FILE (Config.FromEnv), never from the run config. Secret
// keeps it out of logs, errors and anything serialised.
package tinker
