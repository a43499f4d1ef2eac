#!/usr/bin/env python3
"""Drives `wmrl serve --services tinker` with the official Tinker SDK.

    PYTHONPATH=<tinker checkout>/src:... TINKER_BASE_URL=http://HOST:PORT drive.py

The SDK is imported from a checkout outside this repository (none of its
code is here); this script uses its public interface only and prints one
line per call, "ok" or "FAIL", then "N/14 passed". See README.md.
"""
import os
import sys
import traceback

import tinker
from tinker import types

BASE = os.environ["TINKER_BASE_URL"]
SUITE = os.environ.get("WMRL_SUITE", "20260829")
TASKS = ["reg-linear-000", "clf-linear-001"]
passed, total = 0, 0
state = {}


def step(name):
    def wrap(fn):
        global passed, total
        total += 1
        try:
            detail = fn()
            passed += 1
            print(f"ok    {total:2d} {name}: {detail}", flush=True)
        except Exception as e:  # report and go on
            print(f"FAIL  {total:2d} {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=3, file=sys.stderr)
        return fn

    return wrap


def prompt(task):
    return types.ModelInput.from_ints(list(f"{SUITE}/{task}".encode()))


def params(seed):
    return types.SamplingParams(seed=seed)


def datum(task, seq, adv):
    """An RL datum of a sampled completion: the prompt and the completion
    (but its last token) in, the next tokens as targets, the sampler's
    logprobs and the advantage on the completion's positions."""
    p = list(f"{SUITE}/{task}".encode())
    toks, lps = list(seq.tokens), list(seq.logprobs)
    full = p + toks
    n = len(full) - 1
    logprobs = [0.0] * (len(p) - 1) + lps
    advantages = [0.0] * (len(p) - 1) + [float(adv)] * len(toks)
    return types.Datum(
        model_input=types.ModelInput.from_ints(full[:n]),
        loss_fn_inputs={
            "target_tokens": types.TensorData(data=full[1:], dtype="int64", shape=[n]),
            "logprobs": types.TensorData(data=logprobs, dtype="float32", shape=[n]),
            "advantages": types.TensorData(data=advantages, dtype="float32", shape=[n]),
        },
    )


service = tinker.ServiceClient(base_url=BASE)


@step("get_server_capabilities")
def _():
    caps = service.get_server_capabilities()
    return [m.model_name for m in caps.supported_models]


@step("create_lora_training_client")
def _():
    state["tc"] = service.create_lora_training_client(
        base_model="wmrl/builtin-policy", rank=8, user_metadata={"wmrl_seed": "7", "wmrl_suite": SUITE}
    )
    return state["tc"].model_id


@step("get_info")
def _():
    info = state["tc"].get_info()
    return f"{info.model_data.model_name} is_lora={info.is_lora} lora_rank={info.lora_rank}"


@step("sample from the base model")
def _():
    sc = service.create_sampling_client(base_model="wmrl/builtin-policy")
    r = sc.sample(prompt=prompt(TASKS[0]), num_samples=2, sampling_params=params(1)).result()
    return [len(s.tokens) for s in r.sequences]


@step("save_weights_and_get_sampling_client")
def _():
    state["sc"] = state["tc"].save_weights_and_get_sampling_client()
    return type(state["sc"]).__name__


@step("sample on two tasks")
def _():
    state["groups"] = []
    for i, task in enumerate(TASKS):
        r = state["sc"].sample(prompt=prompt(task), num_samples=2, sampling_params=params(10 + i)).result()
        state["groups"].append((task, r.sequences))
    return [[s.stop_reason for s in g] for _, g in state["groups"]]


@step("forward_backward (importance_sampling, RL datums)")
def _():
    data = [datum(t, s, a) for t, seqs in state["groups"] for s, a in zip(seqs, [1.0, -1.0])]
    state["data"] = data
    out = state["tc"].forward_backward(data, "importance_sampling").result()
    assert len(out.loss_fn_outputs) == len(data), f"{len(out.loss_fn_outputs)} loss outputs for {len(data)} datums"
    lp = out.loss_fn_outputs[0]["logprobs"]
    return f"metrics={sorted(out.metrics)} logprobs[0] {lp.dtype} len {len(lp.tolist())}"


@step("optim_step")
def _():
    out = state["tc"].optim_step(types.AdamParams(learning_rate=1e-3)).result()
    return f"metrics={out.metrics}"


@step("forward_backward (cross_entropy) is refused")
def _():
    try:
        state["tc"].forward_backward(state["data"], "cross_entropy").result()
    except Exception as e:
        msg = str(e)
        assert "loss_fn" in msg, msg
        return f"{type(e).__name__}: {msg[:100]}"
    raise AssertionError("cross_entropy was taken")


@step("save_state")
def _():
    state["ckpt"] = state["tc"].save_state("ckpt-1").result().path
    return state["ckpt"]


@step("save_weights_for_sampler")
def _():
    state["sampler"] = state["tc"].save_weights_for_sampler("sampler-2").result().path
    return state["sampler"]


@step("sample from the saved sampler weights")
def _():
    sc = service.create_sampling_client(model_path=state["sampler"])
    r = sc.sample(prompt=prompt(TASKS[1]), num_samples=2, sampling_params=params(20)).result()
    return [len(s.tokens) for s in r.sequences]


@step("load_state_with_optimizer")
def _():
    state["tc"].load_state_with_optimizer(state["ckpt"]).result()
    return state["ckpt"]


@step("create_training_client_from_state_with_optimizer, then sample")
def _():
    tc2 = service.create_training_client_from_state_with_optimizer(state["ckpt"])
    sc = tc2.save_weights_and_get_sampling_client()
    r = sc.sample(prompt=prompt(TASKS[0]), num_samples=1, sampling_params=params(30)).result()
    return f"{tc2.model_id}: {[len(s.tokens) for s in r.sequences]}"


print(f"tinker {tinker.__version__}: {passed}/{total} passed", flush=True)
sys.exit(0 if passed == total else 1)
