"""Helpers of the model evaluations (evaluate.smk): which API baselines are enabled, where their
endpoints and keys come from, whether training (and so checkpoint evaluation) is on, and the
checkpoints and base models of the training runs."""

import re
import shlex
import shutil
import subprocess

from schemashift.train.runs import RunConfigError, resolve_run

EVAL_FILES = ("episodes.parquet", "drifts.parquet", "trajectories.jsonl.gz")
CODE["eval"] = code_digest(
    *_CLI_CORE,
    *_RECORDS,
    "schemashift/env",
    "schemashift/policies",
    "schemashift/rollout",
    "schemashift/cli/verbs/eval.py",
    "schemashift/cli/progress.py",
)


def cells_args(ruleset):
    """--scenarios and --seeds of a ruleset's evaluation cells (validated by evaluation_cells)."""
    evaluation_cells(ruleset)
    cells = config["evaluation"][ruleset]
    scenarios = cells["scenarios"]
    seeds = cells["seeds"]
    scenarios = scenarios if isinstance(scenarios, str) else ",".join(scenarios)
    seeds = ",".join(map(str, seeds)) if isinstance(seeds, list) else str(seeds)
    return f"--scenarios {scenarios} --seeds {seeds} --samples {config['samples']}"


# --- API baselines ------------------------------------------------------------------------------


def _set(name):
    return bool(name) and bool(os.environ.get(name, "").strip())


def api_models():
    """The enabled API models by name (see `models` in the config schema)."""
    enabled = {}
    for name, model in config["models"].items():
        if not model["policy"].startswith("openai:"):
            continue  # a local model: evaluated as the step 0 of the runs that train it
        switch = model.get("enabled", "auto")
        key, url = model.get("key_env"), model.get("base_url_env")
        if switch == "auto":
            on = _set(key) or _set(url) or (key is None and url is None)
        else:
            on = switch is True
            if on and key and not _set(key) and not _set(url):
                raise ValueError(
                    f"config: models.{name} is enabled but its key variable {key} is not set"
                )
        if on:
            api_base_url(name)  # a bad endpoint fails here, before any job
            enabled[name] = model
    return enabled


def api_base_url(name):
    """The configured endpoint, or the one its base_url_env names; never one with credentials
    in it, which would show in the job's command line."""
    model = config["models"][name]
    override = model.get("base_url_env")
    if not _set(override):
        return model["base_url"]
    url = os.environ[override].strip()
    if not re.fullmatch(r"https?://[^/@\s]+(/\S*)?", url):
        raise ValueError(
            f"config: models.{name}: {override} must be an http(s) URL without credentials "
            "(keys go in the key variable)"
        )
    return url


def api_options(name):
    """--base-url, --api-key-env (the variable's name, never its value: only when it is set, a
    keyless local server otherwise) and --max-concurrency of an API model's evaluation.
    """
    model = config["models"][name]
    options = [f"--base-url {shlex.quote(api_base_url(name))}"]
    if _set(model.get("key_env")):
        options.append(f"--api-key-env {model['key_env']}")
    options.append(f"--max-concurrency {model.get('max_concurrency', 4)}")
    return " ".join(options)


def api_keyless_prefix(name):
    """A keyless endpoint must not get OpenAI's key, which the openai: policy sends by default."""
    return (
        "" if _set(config["models"][name].get("key_env")) else "env -u OPENAI_API_KEY "
    )


API_MODELS = api_models()
# Remote executors hand these to the jobs; their values never appear in a command or a log.
workflow.register_envvars(
    *sorted({m["key_env"] for m in API_MODELS.values() if _set(m.get("key_env"))})
)


def api_targets():
    return [
        f"{RESULTS}/eval/api/{name}/{ruleset}/{file}"
        for name in API_MODELS
        for ruleset in config["rulesets"]
        for file in EVAL_FILES
    ]


# --- the base models and the checkpoints of training runs ----------------------------------------


def gpu_visible():
    """A GPU this machine can use: CUDA_VISIBLE_DEVICES names one, or nvidia-smi lists one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return visible.strip() not in ("", "-1", "NoDevFiles")
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return listing.returncode == 0 and "GPU " in listing.stdout


def train_enabled():
    switch = config["train"]["enabled"]
    if switch == "auto":
        # Jobs (a cluster job re-reads this file) never need the default targets.
        return workflow.is_main_process and gpu_visible()
    return switch is True


def train_run(run):
    """The resolved training run (schemashift.train.runs: defaults < train.defaults < run)."""
    try:
        return resolve_run(config, run)
    except RunConfigError as exc:
        raise ValueError(f"config: {exc}") from None


def train_runs():
    """Names of the enabled training runs (`enabled: false` keeps an optional run out)."""
    return [
        run
        for run, spec in config["train"]["runs"].items()
        if spec.get("enabled", True)
    ]


def run_config(run):
    """The config a train job reads: the shared defaults and this run alone."""
    train_run(run)
    base = config["train"]["runs"][run]["base_model"]
    models = {base: config["models"][base]} if base in config["models"] else {}
    return {
        "models": models,
        "train": {
            "defaults": config["train"]["defaults"],
            "runs": {run: config["train"]["runs"][run]},
        },
    }


def checkpoint_steps(run):
    """The steps a run saves a checkpoint at: every `save_steps`, and `max_steps`."""
    return train_run(run).save_steps()


def model_slug(model):
    """A base model id or path as one folder name: Qwen/Qwen2.5-1.5B-Instruct -> Qwen--Qwen2.5-1.5B-Instruct."""
    return re.sub(r"[^A-Za-z0-9._-]+", "--", model).strip("-.") or "model"


def base_models():
    """Slug -> base model of every training run (one step-0 evaluation each)."""
    bases = {}
    for run in train_runs():
        model = train_run(run).base_model
        other = bases.setdefault(model_slug(model), model)
        if other != model:
            raise ValueError(
                f"config: base models {other!r} and {model!r} share the folder {model_slug(model)!r}"
            )
    return bases


def checkpoint_dir(run, step):
    return f"{RESULTS}/train/{run}/checkpoint-{step}"


def train_done(run):
    """The train rule's completion record; checkpoints are not outputs, so a rerun resumes."""
    return f"{RESULTS}/train/{run}/train.done.json"


def evaluated_model(subject):
    """(policy spec, input or None, provenance options) of an evaluation subject: base/<slug>
    (step 0 of every run that starts from it) or <run>/step-<n>, whose input is its run's
    completion record (the checkpoints themselves are not outputs, so that a rerun resumes).
    """
    head, tail = subject.split("/")
    if head == "base":
        bases = base_models()
        if tail not in bases:
            raise ValueError(
                f"no training run has the base model folder {tail!r}; known: {sorted(bases)}"
            )
        return f"hf:{bases[tail]}", None, "--checkpoint-step 0"
    step = int(tail.removeprefix("step-"))
    if step not in checkpoint_steps(head):
        raise ValueError(
            f"train run {head!r} saves no checkpoint {step}; its checkpoints: {checkpoint_steps(head)}"
        )
    adapter = checkpoint_dir(head, step)
    return (
        f"hf:{train_run(head).base_model}@{adapter}",
        train_done(head),
        f"--train-run {head} --checkpoint-step {step}",
    )


def model_targets():
    subjects = [f"base/{slug}" for slug in base_models()]
    subjects += [
        f"{run}/step-{step}" for run in train_runs() for step in checkpoint_steps(run)
    ]
    return [
        f"{RESULTS}/eval/{subject}/{ruleset}/{file}"
        for subject in subjects
        for ruleset in config["rulesets"]
        for file in EVAL_FILES
    ]


def evaluation_targets():
    """The API baselines always; the base models and checkpoints where training is enabled."""
    return api_targets() + (model_targets() if train_enabled() else [])


# --- what the aggregation expects and reads -----------------------------------------------------


def model_cells():
    """Expected cells of the model evaluations (for the manifest's coverage): every enabled API
    baseline, and, unless training is disabled, each run's untrained base model (step 0) and its
    checkpoints, all on every ruleset's evaluation cells. A configured run that has not trained
    here (auto without a GPU) thus shows as missing in the report, never as absent or 0.
    """
    subjects = [(API_MODELS[name]["policy"], None, None) for name in API_MODELS]
    if config["train"]["enabled"] is not False:
        for slug, model in base_models().items():
            subjects.append((f"hf:{model}", None, 0))
        for run in train_runs():
            for step in checkpoint_steps(run):
                policy = evaluated_model(f"{run}/step-{step}")[0]
                subjects.append((policy, run, step))
    cells = [
        (ruleset, policy, run, step, scenario, seed)
        for policy, run, step in subjects
        for ruleset in config["rulesets"]
        for scenario, seed in evaluation_cells(ruleset)
    ]
    return list(dict.fromkeys(cells))


def evaluation_inputs():
    """Model evaluation results the aggregation reads: those this config makes, and any others
    already under results/eval (from an earlier config or run)."""
    made = [
        target for target in evaluation_targets() if target.endswith("episodes.parquet")
    ]
    found = [str(path) for path in Path(RESULTS, "eval").glob("**/episodes.parquet")]
    return sorted(set(made) | set(found))


def training_inputs():
    """Training metrics the aggregation reads: the enabled runs' where training is on, and any
    that exist."""
    made = (
        [f"{RESULTS}/train/{run}/metrics.parquet" for run in train_runs()]
        if train_enabled()
        else []
    )
    found = [str(path) for path in Path(RESULTS, "train").glob("*/metrics.parquet")]
    return sorted(set(made) | set(found))
