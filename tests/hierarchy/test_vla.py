"""The VLA planner (hierarchy/vla/): demonstrations in HDF5, the network learning them, the planner's answers
and refusals, and the hrl-vla command line."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from hierarchy.evaluate import layout_seed as eval_layout_seed
from hierarchy.suites import load_tabletop_suite
from hierarchy.tabletop import TabletopDomain, make_env
from hierarchy.vla.data import DataConfig, layout_seed, read_dataset, write_dataset
from hierarchy.vla.train import BCConfig, train
from llm_planner.plan import PlanDone, PlanError
from llm_planner.tabletop import PlaceSubgoal, Relation, TabletopTask
from tests.launch import accelerate_launch

TASKS = (
    TabletopTask("Put the red block on the blue block.", (Relation("red_block", "blue_block"),), "single"),
    TabletopTask(
        "Stack yellow on blue, then red on yellow.",
        (Relation("yellow_block", "blue_block"), Relation("red_block", "yellow_block")),
        "multi",
    ),
)


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    out = tmp_path_factory.mktemp("vla") / "train.hdf5"
    summary = write_dataset(out, DataConfig(scenes=("blocks",), episodes=4, tasks=TASKS, image_size=64))
    return out, summary


@pytest.fixture(scope="module")
def trained(demos, tmp_path_factory):
    """A network trained to memorise the four demonstrations (real training, 150 steps)."""
    torch.manual_seed(0)
    run = tmp_path_factory.mktemp("vla_run")
    cfg = BCConfig(
        train_data=[str(demos[0])], steps=150, batch_size=8, eval_every=75, save_every=75, shift=0, augment="light"
    )
    cfg.learning_rate = 5e-3
    result = train(cfg, run, progress=False)
    return run, result


def demo_image(samples, i: int):
    """The camera image of demonstration sample ``i``, as the planner gets it."""
    from sim.tabletop.physics import CAMERAS, CameraImage

    return CameraImage(samples.rgb[i], samples.depth[i].astype(np.float32), CAMERAS["front"])


def blocks_view():
    """The blocks scene's view (names and positions) in layout 0."""
    env = make_env("blocks", backend="mujoco")
    try:
        env.reset(seed=0)
        return TabletopDomain().observe(env)
    finally:
        env.close()


def test_dataset_round_trip_and_labels_point_at_the_right_things(demos):
    path, summary = demos
    assert summary["episodes"] == 4 and summary["samples"] == 2 + 3 + 2 + 3  # a sample per goal, one "done"
    samples = read_dataset(path, split="train")
    assert len(samples) == summary["samples"]
    assert samples.rgb.shape == (10, 64, 64, 3) and samples.rgb.dtype == np.uint8
    assert samples.depth.shape == (10, 64, 64) and samples.proprio.shape == (10, 4)
    assert samples.instruction[0] == TASKS[0].text and samples.instruction[2] == TASKS[1].text
    with h5py.File(path, "r") as f:
        demo = f["data/demo_1"]
        assert [s.decode() for s in demo["subgoal"][()]] == [
            "place yellow_block on blue_block",
            "place red_block on yellow_block",
            "done",
        ]
        # the pick pixel, lifted with the stored depth through the camera's nominal model, is near the block's top
        # (the front camera was nudged by ~1 cm and ~1 degree: the labels are in the image as rendered)
        from sim.tabletop.physics import CAMERAS, CameraImage

        image = CameraImage(demo["obs/front_rgb"][0], demo["obs/front_depth"][0].astype(np.float32), CAMERAS["front"])
        u, v = demo["actions"][0, :2]
        assert np.linalg.norm(image.lift(float(u), float(v)) - demo["pick_xyz"][0]) < 0.06
        assert demo.attrs["seed"] == layout_seed("train", 0, 0, 1) and demo.attrs["split"] == "train"
        assert f["data"].attrs["format"] == 1
    assert (path.parent / "train.README.md").read_text().startswith("# Dataset card")
    seeds = {layout_seed(s, seed, sc, e) for s in ("train", "val") for seed in (0, 1) for sc in (0, 1) for e in (0, 5)}
    assert len(seeds) == 16  # distinct (split, seed, scene, episode): distinct layouts


def test_robomimics_sequence_dataset_reads_the_demonstrations(demos):
    """The files are robomimic's layout: its own loader reads the images, proprioception and actions of the
    split's filter key (skipped unless robomimic is installed: `pip install --no-deps robomimic==0.3.0 termcolor
    six`; its other modules need torchvision, which this one does not)."""
    dataset = pytest.importorskip("robomimic.utils.dataset", reason="robomimic is not installed")
    obs_utils = pytest.importorskip("robomimic.utils.obs_utils")

    obs_utils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": ["proprio"], "rgb": ["front_rgb"]}})
    ds = dataset.SequenceDataset(hdf5_path=str(demos[0]), obs_keys=("proprio", "front_rgb"), dataset_keys=("actions",),
                                 load_next_obs=False, frame_stack=1, seq_length=1, pad_frame_stack=True,
                                 pad_seq_length=True, get_pad_mask=False, goal_mode=None, hdf5_cache_mode=None,
                                 hdf5_use_swmr=True, hdf5_normalize_obs=False, filter_by_attribute="train")  # fmt: skip
    ours = read_dataset(demos[0])
    assert len(ds) == len(ours) == demos[1]["samples"]
    first = ds[0]
    assert first["obs"]["front_rgb"].shape == (1, *ours.rgb.shape[1:]) and first["obs"]["proprio"].shape == (1, 4)
    np.testing.assert_array_equal(first["obs"]["front_rgb"][0], ours.rgb[0])
    np.testing.assert_allclose(first["actions"][0], ours.actions[0])


def test_reading_refuses_what_is_not_a_dataset(tmp_path, demos):
    with pytest.raises(FileNotFoundError, match="hrl-vla stage=data"):
        read_dataset(tmp_path / "missing.hdf5")
    other = tmp_path / "other.hdf5"
    with h5py.File(other, "w") as f:
        f.create_group("data")
    with pytest.raises(ValueError, match="not a VLA dataset"):
        read_dataset(other)
    with pytest.raises(ValueError, match="no split 'val'"):
        read_dataset(demos[0], split="val")
    with pytest.raises(ValueError, match="split must be 'train' or 'val'"):
        DataConfig(split="test").check()
    with pytest.raises(ValueError, match="multiple of 16"):
        DataConfig(image_size=100).check()


def test_the_network_learns_its_demonstrations(trained):
    run, result = trained
    assert result["train"]["step_accuracy"] >= 0.9, result
    assert torch.load(run / "model.pt", weights_only=False)["net"]["attention"] is True  # the default now
    log = (run / "train_log.csv").read_text().splitlines()
    first, last = float(log[1].split(",")[1]), float(log[-1].split(",")[1])
    assert last < first / 3, log
    assert (run / "model.pt").is_file() and (run / "checkpoints" / "last.pt").is_file()
    assert (run / "curves.png").stat().st_size > 1000


def test_resume_keeps_the_network_the_run_started_with(demos, tmp_path):
    """A run started without the attention block resumes without it, whatever the config's default now is."""
    data = [str(demos[0])]
    small = dict(train_data=data, batch_size=4, eval_every=5, save_every=5, shift=0)
    train(BCConfig(steps=5, attention=False, **small), tmp_path, progress=False)
    train(BCConfig(steps=10, attention=True, resume=True, **small), tmp_path, progress=False)
    state = torch.load(tmp_path / "model.pt", weights_only=False)
    assert state["net"]["attention"] is False
    assert not any(k.startswith("attend.") for k in state["state_dict"])


def test_models_from_before_the_attention_block_still_load(demos, tmp_path):
    """A model.pt written before the attention block existed (no `attention` in its network config) loads as
    the network it was, and plans."""
    from hierarchy.vla.planner import VLAPlanner

    small = dict(train_data=[str(demos[0])], batch_size=4, eval_every=5, save_every=5, shift=0)
    train(BCConfig(steps=5, attention=False, **small), tmp_path, progress=False)
    state = torch.load(tmp_path / "model.pt", weights_only=False)
    for key in ("attention", "heads"):
        del state["net"][key]
    torch.save(state, tmp_path / "old.pt")
    planner = VLAPlanner(model=str(tmp_path / "old.pt"))
    assert planner.net.attend is None
    samples = read_dataset(demos[0])
    try:
        plan = planner.plan_image(samples.instruction[0], demo_image(samples, 0), samples.proprio[0], blocks_view())
        assert plan.subgoals[0].kind == "place"
    except (PlanDone, PlanError):
        pass  # five steps of training may point at nothing or say done; what matters is that it runs


def test_a_model_trained_on_contextual_states_plans_with_them(demos, tmp_path):
    """text_encoder=gemma3_states: the words are Gemma 3 270M's last layer per token, which depends on the words
    before (the input embeddings do not); model.pt says which encoder, the planner loads that one, and a resume
    with another encoder is refused."""
    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.text import text_encoder

    states, table = text_encoder("gemma3_states"), text_encoder("smollm2_embeddings")
    plain, negated = "put the red block on the blue block", "do not put the red block on the blue block"
    for enc in (states, table):
        assert enc.tokens(negated)[-3:] == enc.tokens(plain)[-3:]
    a, b = states.encode(plain), states.encode(negated)
    assert a.shape == (len(states.tokens(plain)), 640) and a.dtype == np.float32
    np.testing.assert_allclose(a.std(axis=1), 1.0, rtol=1e-3)  # standardised per token
    assert np.abs(a[-1] - b[-1]).max() > 0.1  # the same last word, another state after "do not"
    np.testing.assert_array_equal(states.encode(plain), a)  # deterministic: training caches it
    np.testing.assert_array_equal(table.encode(plain)[-1], table.encode(negated)[-1])
    with pytest.raises(ValueError, match="non-empty"):
        states.encode("  ")

    small = dict(train_data=[str(demos[0])], batch_size=4, eval_every=5, save_every=5, shift=0)
    train(BCConfig(steps=5, text_encoder="gemma3_states", **small), tmp_path, progress=False)
    state = torch.load(tmp_path / "model.pt", weights_only=False)
    assert state["text"]["kind"] == "gemma3_states" and state["net"]["text_dim"] == 640
    planner = VLAPlanner(model=str(tmp_path / "model.pt"))
    assert planner.embeddings is states
    samples = read_dataset(demos[0])
    try:
        plan = planner.plan_image(samples.instruction[0], demo_image(samples, 0), samples.proprio[0], blocks_view())
        assert plan.subgoals[0].kind == "place"
    except (PlanDone, PlanError):
        pass  # five steps of training may say done; what matters is that it runs on the states
    with pytest.raises(ValueError, match="trained with text_encoder=gemma3_states, not smollm2_embeddings"):
        train(BCConfig(steps=10, resume=True, **small), tmp_path, progress=False)
    with pytest.raises(ValueError, match="text_encoder must be one of smollm2_embeddings, gemma3_states"):
        BCConfig(train_data=["x"], text_encoder="bert").check()
    with pytest.raises(ValueError, match=r"text_encoder must be one of .*, got 'bert'"):
        text_encoder("bert")  # a model.pt naming an unknown encoder, refused where the planner loads it


def test_the_shipped_model_reads_a_plain_instruction():
    from hierarchy.vla.planner import VLAPlanner

    planner = VLAPlanner(model="shipped:vla_tabletop")
    env = make_env("blocks", backend="mujoco")
    try:
        env.reset(seed=eval_layout_seed(7, 0, 0))
        view = TabletopDomain().observe(env)
        plan = planner.plan(TASKS[0], view)
    finally:
        env.close()
    step = plan.subgoals[0]
    assert isinstance(step, PlaceSubgoal) and (step.object, step.on) == ("red_block", "blue_block"), plan


def test_resume_continues_from_the_checkpoint(trained, demos, tmp_path):
    run, _ = trained
    data = [str(demos[0])]
    with pytest.raises(ValueError, match="nothing to continue"):
        train(BCConfig(train_data=data, steps=5, resume=True), tmp_path, progress=False)
    before = (run / "train_log.csv").read_text().splitlines()
    train(BCConfig(train_data=data, steps=175, batch_size=8, shift=0, resume=True), run, progress=False)
    after = (run / "train_log.csv").read_text().splitlines()
    assert after[: len(before)] == before and after[-1].startswith("175,")


def test_planner_answers_the_demonstrated_step_and_refuses_bad_input(trained, demos):
    from hierarchy.vla.planner import VLAPlanner

    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"))
    env = make_env("blocks", backend="mujoco")
    try:
        samples = read_dataset(demos[0])
        from hierarchy.vla.data import randomise_view

        env.reset(seed=layout_seed("train", 0, 0, 0))  # the first demonstration's layout
        randomise_view(env, np.random.default_rng([0, 0, False]), DataConfig())
        view = TabletopDomain().observe(env)
        image = env.camera_image("front", 64)
        plan = planner.plan_image(TASKS[0].text, image, samples.proprio[0], view)
        assert isinstance(plan.subgoals[0], PlaceSubgoal)
        assert (plan.subgoals[0].object, plan.subgoals[0].on) == ("red_block", "blue_block")
        assert planner.last_usage["model_ms"] > 0
        # the whole call through the scene's camera works as well (the arm is elsewhere than in the demo)
        assert len(planner.plan(TASKS[0], view).subgoals) == 1
        with pytest.raises(ValueError, match=r"64x64 RGB image of uint8"):
            planner.plan_image(
                TASKS[0].text, type(image)(image.rgb[:32], image.depth, image.spec), samples.proprio[0], view
            )
        with pytest.raises(ValueError, match="depth image"):
            planner.plan_image(TASKS[0].text, type(image)(image.rgb, None, image.spec), samples.proprio[0], view)
        with pytest.raises(PlanError, match="empty"):
            planner.plan(TabletopTask("  ", TASKS[0].goals), view)
        with pytest.raises(ValueError, match="needs a camera image"):
            planner.plan(TASKS[0], replace(view, camera=None))
    finally:
        env.close()


def test_planner_says_done_on_a_finished_scene_and_names_what_it_points_at(trained, demos):
    from hierarchy.vla.planner import VLAPlanner

    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"), decode="cell")
    samples = read_dataset(demos[0])
    done_index = int(np.flatnonzero(samples.actions[:, 4] > 0.5)[0])
    image, view = demo_image(samples, done_index), blocks_view()
    with pytest.raises(PlanDone, match="vla: done"):
        planner.plan_image(samples.instruction[done_index], image, samples.proprio[done_index], view)
    # a step whose points land where this (other) layout has nothing: a PlanError saying where it pointed
    image0 = demo_image(samples, 0)
    far = replace(view, objects=tuple(replace(o, position=(o.position[0], 0.6, o.position[2])) for o in view.objects))
    with pytest.raises(PlanError, match=r"pointed at \(.*\) to pick, \d+ cm from the nearest block"):
        planner.plan_image(samples.instruction[0], image0, samples.proprio[0], far)


def test_things_decoding_names_the_thing_whose_own_point_scores_highest(trained, demos):
    """decode="things" (the default): each candidate is scored by the heatmap at its own projected point, so the
    answer always names a thing in view; "cell" lifts the best cell and names what is near it, or refuses."""
    from hierarchy.vla.planner import VLAPlanner, _best_thing

    samples = read_dataset(demos[0])
    image, view = demo_image(samples, 0), blocks_view()
    tops = {o.name: np.array(o.position) + np.array([0.0, 0.0, o.size / 2]) for o in view.objects}
    half = image.size[0] // 2
    for name in ("red_block", "blue_block"):
        logits = np.zeros((half, half), np.float32)
        u, v = image.project(tops[name][None])[0]
        logits[int(v // 2), int(u // 2)] = 5.0  # one hot cell on this block's top
        assert _best_thing(logits, image, tops, "pick") == name
    off = {"nowhere": np.array([0.5, 3.0, 0.0])}  # behind the camera's view
    assert _best_thing(np.zeros((half, half)), image, {**off, "red_block": tops["red_block"]}, "pick") == "red_block"
    with pytest.raises(PlanError, match="no pick candidate is in the camera's view"):
        _best_thing(np.zeros((half, half)), image, off, "pick")
    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"))
    assert planner.decode == "things"
    env = make_env("blocks", backend="mujoco")
    try:
        from hierarchy.vla.data import randomise_view

        env.reset(seed=layout_seed("train", 0, 0, 0))  # the first demonstration's layout
        randomise_view(env, np.random.default_rng([0, 0, False]), DataConfig())
        view, image = TabletopDomain().observe(env), env.camera_image("front", 64)
    finally:
        env.close()
    plan = planner.plan_image(TASKS[0].text, image, samples.proprio[0], view)
    assert (plan.subgoals[0].object, plan.subgoals[0].on) == ("red_block", "blue_block")
    assert "best thing" in plan.rationale
    with pytest.raises(ValueError, match="decode must be one of cell, things"):
        VLAPlanner(model=str(run / "model.pt"), decode="argmax")


def test_a_consulted_planners_hint_weighs_the_candidates_and_the_done_decision(trained, demos):
    """consult=<planner>: its plan, read once per task, adds consult_weight to its next step's block and target
    and moves the done logit; weight 0 is the VLA alone. The oracle (symbolic) stands in for llm_goals here: its
    reading is the task's goals, so where they differ from what the network says the hint is visible."""
    from hierarchy.vla.data import randomise_view
    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.rl import RLConfig, run_episode

    run, _ = trained
    model = str(run / "model.pt")
    # the network learnt "red on blue" for this text; the task's goal (what symbolic reads) is yellow on red
    task = TabletopTask(TASKS[0].text, (Relation("yellow_block", "red_block"),), "single")
    env = make_env("blocks", backend="mujoco")
    try:
        env.reset(seed=layout_seed("train", 0, 0, 0))  # the first demonstration's layout
        randomise_view(env, np.random.default_rng([0, 0, False]), DataConfig())
        view = TabletopDomain().observe(env)
        answers = {}
        for weight in (0.0, 1e4):
            planner = VLAPlanner(model=model, consult="symbolic", consult_weight=weight)
            step = planner.plan(task, view).subgoals[0]
            answers[weight] = (step.object, step.on)  # (a network that memorised 4 demos is sure: logits ~100 apart)
            assert planner.last_usage["hint"] == "place yellow_block on red_block"
        assert answers[0.0] == ("red_block", "blue_block")  # the VLA alone
        assert answers[1e4] == ("yellow_block", "red_block")  # the hint outweighs it
        # every subgoal of the consulted plan holds: a large done weight ends the task, none leaves the VLA's say
        finished = replace(
            view, objects=tuple(replace(o, on="red_block") if o.name == "yellow_block" else o for o in view.objects)
        )
        with pytest.raises(PlanDone, match="vla: done"):
            VLAPlanner(model=model, consult="symbolic", consult_weight=0, consult_done_weight=100).plan(task, finished)
        assert len(VLAPlanner(model=model, consult="symbolic", consult_weight=0).plan(task, finished).subgoals) == 1
        # stage=val's episodes (the planner's own decisions, kinematic executor) take the hint as well
        wins = {}
        for weight in (0.0, 1e4):
            planner = VLAPlanner(model=model, consult="symbolic", consult_weight=weight)
            seed = layout_seed("val", 0, 0, 0)
            wins[weight] = run_episode(
                planner, env, task, seed, np.random.default_rng(0), RLConfig(), TabletopDomain(), sample=False
            )[2]
        assert wins == {0.0: False, 1e4: True}
    finally:
        env.close()
    with pytest.raises(ValueError, match="consult_weight must be a number >= 0"):
        VLAPlanner(model=model, consult="symbolic", consult_weight=-1)
    with pytest.raises(ValueError, match="decode='things'"):
        VLAPlanner(model=model, consult="symbolic", decode="cell")
    with pytest.raises(ValueError, match="cannot be vla itself"):
        VLAPlanner(model=model, consult="vla")
    with pytest.raises(ValueError, match="saycan is step-wise"):
        VLAPlanner(model=model, consult="saycan")
    with pytest.raises(ValueError, match="graph is not a tabletop planner"):
        VLAPlanner(model=model, consult="graph")


def test_strong_augmentation_randomises_the_look_not_the_labels(demos):
    """augment=strong: the background (depth at the far plane) one random colour per image, the brightness
    changed, the demonstrated pixels where they were (no shift asked)."""
    from hierarchy.vla.text import token_embeddings
    from hierarchy.vla.train import FAR, TextCache, batch_tensors

    samples = read_dataset(demos[0])
    text, index = TextCache(token_embeddings()), np.array([0, 0, 1])
    rgb, depth, _, _, _, actions = batch_tensors(samples, index, text, np.random.default_rng(0), 0, "strong")
    rgb, depth = rgb.numpy().astype(int), depth.numpy()
    far = depth >= FAR
    assert far.any(axis=(1, 2)).all()
    backgrounds = [np.unique(rgb[i][far[i]], axis=0) for i in range(3)]
    assert all(len(b) == 1 for b in backgrounds) and not np.array_equal(backgrounds[0], backgrounds[1])
    plain = samples.rgb[index].astype(int)
    assert not np.array_equal(rgb[0][~far[0]], plain[0][~far[0]])
    assert np.array_equal(actions.numpy(), samples.actions[index], equal_nan=True)  # a done step has no pixels
    with pytest.raises(ValueError, match="augment must be one of light, strong, got 'heavy'"):
        BCConfig(train_data=["x"], augment="heavy").check()


def test_text_dropout_leaves_words_out_of_training_samples_only(demos):
    """text_dropout=p: a training sample's instruction loses each token with probability p, keeps its order and
    at least one token; evaluation (no rng) reads every token."""
    from hierarchy.vla.text import token_embeddings
    from hierarchy.vla.train import TextCache, batch_tensors, drop_words

    rng = np.random.default_rng(0)
    words = torch.arange(40, dtype=torch.float32).view(20, 2)
    kept = [drop_words(words, 0.5, rng) for _ in range(200)]
    assert all(len(k) >= 1 for k in kept) and 5 < np.mean([len(k) for k in kept]) < 15
    assert all(bool((k[1:, 0] > k[:-1, 0]).all()) for k in kept)  # order kept
    assert all(len(drop_words(words[:1], 0.99, rng)) == 1 for _ in range(20))  # never empty
    samples = read_dataset(demos[0])
    text, index = TextCache(token_embeddings()), np.array([0, 1, 2, 3])
    full = batch_tensors(samples, index, text, np.random.default_rng(1), 0, "strong")[4].sum(1)
    dropped = batch_tensors(samples, index, text, np.random.default_rng(1), 0, "strong", 0.5)[4].sum(1)
    assert (dropped <= full).all() and (dropped < full).any() and (dropped >= 1).all()
    assert torch.equal(batch_tensors(samples, index, text, None, 0, "strong", 0.5)[4].sum(1), full)
    with pytest.raises(ValueError, match="text_dropout must be in"):
        BCConfig(train_data=["x"], text_dropout=1.0).check()


def _accelerate(*args: str, processes: int = 2, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return accelerate_launch("hrl.vla", *args, processes=processes, cwd=cwd)


def test_imitation_runs_data_parallel_under_accelerate_launch(demos, tmp_path):
    """Two processes train one model: each draws its own samples, the gradients are averaged, the first process
    writes the run directory once, and a resume needs the same number of processes."""
    run = tmp_path / "run"
    common = [f"train_data=[{demos[0]}]", "batch_size=4", "shift=0", "augment=light", "learning_rate=5e-3"]
    r = _accelerate("stage=bc", *common, "steps=50", "eval_every=25", "save_every=25", f"hydra.run.dir={run}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("[hrl-vla] bc done: 50 steps") == 1, r.stdout  # the first process reports
    result = json.loads((run / "result.json").read_text())
    assert result["processes"] == 2 and result["batch_size_total"] == 8
    assert [line.split(",")[0] for line in (run / "train_log.csv").read_text().splitlines()] == ["step", "25", "50"]
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=False)
    assert ckpt["processes"] == 2 and len(ckpt["process_rngs"]) == 2
    assert ckpt["process_rngs"][0][0] != ckpt["process_rngs"][1][0]  # each process its own stream of samples
    # one process with the same seed and steps: the first process's stream alone, so other weights
    single = tmp_path / "single"
    train(BCConfig(train_data=[str(demos[0])], steps=50, batch_size=4, shift=0, augment="light",
                   learning_rate=5e-3, eval_every=25, save_every=25), single, progress=False)  # fmt: skip
    two = torch.load(run / "model.pt", weights_only=False)["state_dict"]
    one = torch.load(single / "model.pt", weights_only=False)["state_dict"]
    assert two.keys() == one.keys() and not all(torch.equal(two[k], one[k]) for k in two)
    # resume with two processes continues the log; with one it is refused, naming the fix
    r = _accelerate(f"resume={run}", "steps=75")
    assert r.returncode == 0, r.stderr[-3000:]
    assert (run / "train_log.csv").read_text().splitlines()[-1].startswith("75,")
    r = subprocess.run([sys.executable, "-m", "hrl.vla", f"resume={run}", "steps=100"], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "trained by 2 process(es), this run has 1; resume with 2" in r.stderr, r.stderr
    # the other stages run in one process; a run directory named by the time is refused (each process's differs)
    r = _accelerate("stage=data", "episodes=1", f"hydra.run.dir={tmp_path}/data")
    assert r.returncode != 0 and "stage=data runs in one process" in r.stderr, r.stderr[-3000:]
    r = _accelerate("stage=bc", *common, "steps=5", cwd=tmp_path)  # Hydra's folders by the time go there
    assert r.returncode != 0 and "name the run directory with hydra.run.dir=" in r.stderr, r.stderr[-3000:]


def test_training_devices_are_checked():
    with pytest.raises(ValueError, match="device must be cpu, cuda, cuda:<i> or auto, got 'tpu'"):
        BCConfig(train_data=["x"], device="tpu").check()
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch sees no GPU here; use device=cpu"):
            BCConfig(train_data=["x"], device="cuda").check()
    BCConfig(train_data=["x"], device="auto").check()


def test_bad_model_files_are_refused(tmp_path):
    from hierarchy.vla.planner import VLAPlanner

    with pytest.raises(ValueError, match="not found"):
        VLAPlanner(model=str(tmp_path / "nope.pt"))
    with pytest.raises(ValueError, match="unknown shipped VLA model 'nope'; shipped: vla_tabletop"):
        VLAPlanner(model="shipped:nope")
    bad = tmp_path / "model.pt"
    torch.save({"weights": 1}, bad)
    with pytest.raises(ValueError, match="is not a VLA model"):
        VLAPlanner(model=str(bad))


def test_hrl_vla_command_line_refuses_bad_values(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "hrl.vla", *args, f"hydra.run.dir={tmp_path}/run"],
            capture_output=True,
            text=True,
            timeout=120,
        )

    r = run("stage=data", "split=test")
    assert r.returncode == 2 and "split must be 'train' or 'val'" in r.stderr, r.stderr
    r = run("stage=bc")
    assert r.returncode == 2 and "train_data is empty" in r.stderr, r.stderr
    r = run("stage=nope")
    assert r.returncode == 2 and "stage must be 'data', 'bc', 'rl' or 'val'" in r.stderr, r.stderr
    r = run("stage=rl")
    assert r.returncode == 2 and "init_model is empty" in r.stderr, r.stderr
    r = run("stage=val")
    assert r.returncode == 2 and "stage=val needs init_model=<model.pt>" in r.stderr, r.stderr
    r = run("stage=bc", "train_data=[a.hdf5]", "out=runs/vla/mine")  # was ignored silently: the run went elsewhere
    assert r.returncode == 2 and "hydra.run.dir=runs/vla/mine to choose it" in r.stderr, r.stderr
    r = run("stage=rl", "init_model=x.pt", "rl_backends=[mujoco,gazebo]")
    assert r.returncode == 2 and "unknown backend 'gazebo' in rl_backends" in r.stderr, r.stderr
    r = run("stage=bc", "train_data=[a.hdf5]", "+planner_params.consult=llm_goals")
    assert r.returncode == 2 and "planner_params is stage=val's" in r.stderr, r.stderr
    r = run("stage=val", "init_model=x.pt", "+planner_params.consult_wieght=2")
    assert r.returncode == 2 and "planner_params: unknown ['consult_wieght']" in r.stderr, r.stderr
    assert "consult_weight" in r.stderr
    r = run("stage=val", "init_model=x.pt", "+planner_params.model=y.pt")
    assert r.returncode == 2 and "give the model there" in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "hrl.vla", f"resume={tmp_path}/none"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "not an hrl-vla run directory" in r.stderr


def test_command_line_writes_demonstrations(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hrl.vla",
            "stage=data",
            "scenes=[blocks]",
            "episodes=2",
            "image_size=48",
            f"out={tmp_path}/d.hdf5",
            f"hydra.run.dir={tmp_path}/run",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    r2 = subprocess.run(
        [sys.executable, "-m", "hrl.vla", f"resume={tmp_path}/run"], capture_output=True, text=True, timeout=60
    )
    assert r2.returncode == 2 and "only a training run (stage=bc or rl) can be resumed" in r2.stderr, r2.stderr
    samples = read_dataset(tmp_path / "d.hdf5")
    assert len(samples) >= 4 and samples.rgb.shape[1:] == (48, 48, 3)
    assert set(samples.scene) == {"blocks"}
    # the generated instructions are the generator's train split, never the test suites'
    test_texts = {t.text for t in load_tabletop_suite("tabletop_language").tasks}
    assert not set(samples.instruction) & test_texts


def test_data_generation_fans_out_over_hydras_joblib_launcher(tmp_path):
    """`hrl-vla -m stage=data seed=0,1 hydra/launcher=joblib`: one job, one file per seed, distinct episodes."""
    sweep = tmp_path / "sweep"
    r = subprocess.run(
        [sys.executable, "-m", "hrl.vla", "-m", "stage=data", "scenes=[blocks]", "episodes=1", "image_size=32",
         "seed=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    files = sorted(sweep.glob("*/train_mujoco.hdf5"))
    assert [f.parent.name for f in files] == ["0", "1"], list(sweep.rglob("*"))
    first, second = (read_dataset(f) for f in files)
    assert first.instruction != second.instruction or not np.array_equal(first.rgb, second.rgb)


def test_rl_samples_episodes_rewards_them_and_updates_towards_positive_advantages(trained, tmp_path):
    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.rl import RLConfig, log_probs, run_episode, train_rl
    from hierarchy.vla.train import TextCache

    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"))
    env = make_env("blocks", backend="mujoco")
    try:
        steps, reward, success = run_episode(
            planner,
            env,
            TASKS[0],
            layout_seed("train", 0, 0, 0),
            np.random.default_rng(0),
            RLConfig(),
            TabletopDomain(),
        )
    finally:
        env.close()
    assert 1 <= len(steps) <= len(TASKS[0].goals) + 2 and -RLConfig().early_end_penalty <= reward <= 2.0
    assert success == (reward >= 1.0)
    text = TextCache(planner.embeddings)
    opt = torch.optim.SGD(planner.net.parameters(), lr=1e-5)  # a small step: first order holds
    before = log_probs(planner, text, steps, [TASKS[0].text] * len(steps))
    (-before.sum()).backward()  # advantage +1: make these decisions likelier
    opt.step()
    with torch.no_grad():
        after = log_probs(planner, text, steps, [TASKS[0].text] * len(steps))
    assert after.sum() > before.sum().detach()
    cfg = RLConfig(init_model=str(run / "model.pt"), scenes=("blocks",), steps=2, tasks_per_step=1, group=2)
    result = train_rl(cfg, tmp_path / "rl", progress=False)
    assert len((tmp_path / "rl" / "rl_log.csv").read_text().splitlines()) == 3
    assert (tmp_path / "rl" / "rl_curve.png").read_bytes()[:4] == b"\x89PNG"
    VLAPlanner(model=result["model"])  # the RL model loads as a planner
    with pytest.raises(ValueError, match="group must be >= 2"):
        RLConfig(init_model="x", group=1).check()
    with pytest.raises(ValueError, match="augment must be 'none' or 'strong'"):
        RLConfig(init_model="x", augment="heavy").check()


def test_rl_episodes_can_run_the_learned_skills(trained):
    """executor=skills: each sampled step is carried out by the shipped skills through the hierarchy's agent (not
    set down kinematically), and the episode is judged on where the skills left the blocks."""
    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.rl import RLConfig, run_episode

    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"))
    env = make_env("blocks", backend="mujoco")
    domain = TabletopDomain.with_skills()
    try:
        cfg = RLConfig(init_model=str(run / "model.pt"), executor="skills")
        cfg.check()
        steps, reward, success = run_episode(planner, env, TASKS[0], layout_seed("train", 0, 0, 0),
                                             np.random.default_rng(0), cfg, domain, sample=False)  # fmt: skip
        after = {o.name: o for o in domain.observe(env).objects}
        control_steps = env.unwrapped._steps
    finally:
        env.close()
    assert not steps[0].done  # the memorised first step: red onto blue, carried out by the skills
    assert success and reward == 2.0, (reward, len(steps))
    assert after["red_block"].on == "blue_block", after
    assert control_steps > 24  # the skills' reach, grasp, carry and release (47 here); kinematic placing hovers 12


def test_val_episodes_run_the_network_once_per_decision_and_name_as_the_planner_does(trained):
    """stage=val (sample=False, decode=things): the planner's own decisions, its naming of the same heatmaps the
    decision came from (one forward pass a step, not two)."""
    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.rl import RLConfig, run_episode

    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"))
    forward, calls, named = planner.forward, [], []
    name_step = planner.name_step
    planner.forward = lambda *a: calls.append(a[0]) or forward(*a)
    planner.name_step = lambda pl, ql, image, view, *a: named.append((pl, ql)) or name_step(pl, ql, image, view, *a)
    env = make_env("blocks", backend="mujoco")
    try:
        steps, _, _ = run_episode(
            planner, env, TASKS[0], layout_seed("val", 0, 0, 0), np.random.default_rng(0), RLConfig(),
            TabletopDomain(), sample=False,
        )  # fmt: skip
    finally:
        env.close()
    assert len(calls) == len(steps) >= 1 and set(calls) == {TASKS[0].text}
    assert len(named) == sum(not s.done for s in steps)
    for (pl, ql), s in zip(named, steps, strict=False):  # named from the heatmaps whose argmax the step recorded
        assert (int(pl.argmax()), int(ql.argmax())) == (s.pick, s.place)


def test_rl_with_augment_samples_on_a_changed_look_and_keeps_that_image_for_the_gradient(trained):
    """rl_augment=strong: a sampled step sees its image with imitation's change of look, and the step it records
    (what the gradient is computed on) holds that same image, not the render."""
    from hierarchy.vla.data import observe
    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.rl import RLConfig, run_episode

    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"))
    env = make_env("blocks", backend="mujoco")
    seed = layout_seed("train", 0, 0, 0)
    try:
        env.reset(seed=seed)
        rendered, _ = observe(env, planner.size)
        runs = {
            look: run_episode(
                planner, env, TASKS[0], seed, np.random.default_rng(0), RLConfig(augment=look), TabletopDomain()
            )[0]
            for look in ("none", "strong")
        }
    finally:
        env.close()
    assert np.array_equal(runs["none"][0].rgb, rendered.rgb)
    changed = runs["strong"][0].rgb
    assert changed.shape == rendered.rgb.shape and changed.dtype == np.uint8
    assert np.abs(changed.astype(int) - rendered.rgb.astype(int)).mean() > 5
    assert np.array_equal(runs["strong"][0].depth, rendered.depth)  # the look only: depth and labels unchanged


def test_rl_and_val_layouts_are_none_of_the_demonstrations_and_not_each_others():
    from hierarchy.vla.rl import stage_layout_seed

    keys = [(seed, sc, e) for seed in range(5) for sc in range(3) for e in range(50)]
    demos = {layout_seed(s, *k) for s in ("train", "val") for k in keys}
    rl = {stage_layout_seed("rl", *k) for k in keys}
    val = {stage_layout_seed("val", *k) for k in keys}
    assert len(rl) == len(val) == len(keys)
    assert not (rl & demos or val & demos or rl & val)


def test_rl_reward_pays_an_early_end_less_than_running_out_of_steps():
    from hierarchy.vla.rl import RLConfig, episode_reward

    # all goals and said done: the bonus; all goals but never said done: the fraction alone
    assert episode_reward(1.0, True, True, 0.5) == 2.0 and episode_reward(1.0, False, False, 0.5) == 1.0
    # half done: stopping there (done, or pointing at nothing) pays less than running out of steps
    assert episode_reward(0.5, True, True, 0.5) == 0.0 < episode_reward(0.5, False, False, 0.5) == 0.5
    # penalty 0 is the old reward: an early done paid its fraction
    assert episode_reward(0.5, True, True, 0.0) == 0.5
    with pytest.raises(ValueError, match=r"early_end_penalty must be in \[0, 2\].*got -1"):
        RLConfig(init_model="x", early_end_penalty=-1).check()
    with pytest.raises(ValueError, match=r"unknown categories \['negatoin'\].*negation"):
        RLConfig(init_model="x", categories=("negatoin",)).check()
    with pytest.raises(ValueError, match="categories is empty"):
        RLConfig(init_model="x", categories=()).check()


def test_rl_kl_anchor_is_zero_at_the_start_and_grows_as_the_policy_moves(trained):
    """log_probs(ref=...): KL(pi || ref) per decision, 0 against itself, > 0 once the network has moved; the
    sampled log-probabilities are the same with or without it."""
    import copy

    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.rl import RLConfig, log_probs, run_episode
    from hierarchy.vla.train import TextCache

    run, _ = trained
    planner = VLAPlanner(model=str(run / "model.pt"))
    env = make_env("blocks", backend="mujoco")
    try:
        steps = []
        for k in range(3):  # sampled episodes: some steps done, some not
            steps += run_episode(
                planner,
                env,
                TASKS[1],
                layout_seed("train", 0, 0, k),
                np.random.default_rng(k),
                RLConfig(),
                TabletopDomain(),
            )[0]
    finally:
        env.close()
    text, texts = TextCache(planner.embeddings), [TASKS[1].text] * len(steps)
    ref = copy.deepcopy(planner.net).eval().requires_grad_(False)
    lp, kl = log_probs(planner, text, steps, texts, ref=ref)
    assert torch.allclose(lp, log_probs(planner, text, steps, texts)) and kl.shape == lp.shape
    assert float(kl.detach().abs().max()) < 1e-5
    opt = torch.optim.SGD(planner.net.parameters(), lr=1e-2)
    (-lp.sum()).backward()
    opt.step()
    _, kl = log_probs(planner, text, steps, texts, ref=ref)
    assert float(kl.detach().min()) >= -1e-6 and float(kl.detach().mean()) > 1e-4
    with pytest.raises(ValueError, match=r"kl_coef must be in \[0, 10\].*got -0.1"):
        RLConfig(init_model="x", kl_coef=-0.1).check()


def test_rl_in_both_simulators_and_a_second_rl_stage_keeps_the_first_stages_layouts(trained, tmp_path):
    """rl_backends=[mujoco, pybullet]: tasks are sampled in both renderers (an env of each is made and used); the
    model written records every RL stage it went through, which benchmarks/vla.py keeps out of the test."""
    import csv

    from hierarchy.tabletop import make_env as real_make_env
    from hierarchy.vla import rl as rl_module
    from hierarchy.vla.rl import RLConfig, rl_stages, stage_layout_seed, train_rl

    run, _ = trained
    made, reset = [], []

    def tracking_make_env(scene, backend="mujoco", **kw):
        env = real_make_env(scene, backend=backend, **kw)
        made.append(backend)
        original = env.reset

        def recording_reset(*a, **k):
            reset.append(backend)
            return original(*a, **k)

        env.reset = recording_reset
        return env

    import hierarchy.tabletop

    mp = pytest.MonkeyPatch()
    mp.setattr(hierarchy.tabletop, "make_env", tracking_make_env)
    try:
        cfg = RLConfig(
            init_model=str(run / "model.pt"),
            scenes=("blocks",),
            steps=3,
            tasks_per_step=2,
            group=2,
            seed=3,
            backends=("mujoco", "pybullet"),
            kl_coef=0.1,
        )
        first = train_rl(cfg, tmp_path / "rl1", progress=False)
    finally:
        mp.undo()
    assert sorted(made) == ["mujoco", "pybullet"] and set(reset) == {"mujoco", "pybullet"}
    with open(tmp_path / "rl1" / "rl_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and all(r["kl"] != "" for r in rows)
    second = train_rl(
        RLConfig(init_model=first["model"], scenes=("blocks",), steps=1, tasks_per_step=1, group=2, seed=4),
        tmp_path / "rl2",
        progress=False,
    )
    stages = rl_stages(torch.load(second["model"], weights_only=False))
    assert [(s["seed"], s["steps"]) for s in stages] == [(3, 3), (4, 1)]
    assert list(stages[0]["backends"]) == ["mujoco", "pybullet"] and stages[0]["kl_coef"] == 0.1
    from benchmarks.vla import demo_seeds

    seeds, _, _ = demo_seeds(Path(second["model"]))
    assert {stage_layout_seed("rl", 3, 0, i) for i in range(6)} <= seeds
    assert {stage_layout_seed("rl", 4, 0, 0)} <= seeds
    with pytest.raises(ValueError, match="unknown backend 'gazebo' in rl_backends"):
        RLConfig(init_model="x", backends=("mujoco", "gazebo")).check()
    with pytest.raises(ValueError, match="rl_backends must be distinct"):
        RLConfig(init_model="x", backends=("mujoco", "mujoco")).check()
    assert rl_module.RLConfig(backend="pybullet").sims() == ("pybullet",)


def test_val_files_and_the_val_stage_hold_out_phrasings_only_of_the_split_seed_training_drew(tmp_path, trained):
    """Demonstrations record their generator split seed; training refuses a val file of another split seed (its
    held-out phrasings are another seed's training phrasings), and the val stage says whether its phrasings are
    unseen by the model."""
    from hierarchy.vla.data import file_split
    from hierarchy.vla.rl import training_split_seeds, validate_episodes
    from hierarchy.vla.train import check_splits

    def make(name, split, seed, split_seed):
        cfg = DataConfig(scenes=("blocks",), episodes=1, split=split, seed=seed, split_seed=split_seed, image_size=64)
        write_dataset(tmp_path / name, cfg)
        return str(tmp_path / name)

    train_a, train_b = make("a.hdf5", "train", 2, 0), make("b.hdf5", "train", 3, 0)
    val_0, val_1 = make("v0.hdf5", "val", 1, 0), make("v1.hdf5", "val", 1, 1)
    assert file_split(train_b) == ("train", 0) and file_split(val_1) == ("val", 1)
    assert check_splits([train_a, train_b], [val_0]) == [0]
    with pytest.raises(ValueError, match=r"v1.hdf5 holds out the templates and words of split seed 1.*split_seed=1"):
        check_splits([train_a, train_b], [val_1])
    with pytest.raises(ValueError, match=r"b.hdf5 is of split 'train'"):
        check_splits([train_a], [train_b])
    assert check_splits([train_a, val_1], []) == [0, 1]  # no val: mixed split seeds may train a final model
    # the val stage: a model of split seed 0's train split reads seed 0's val as unseen, seed 1's not
    meta = {"split_seeds": [0], "rl_stages": [{"seed": 0}]}  # an RL stage from before split_seed: seed + 7
    assert training_split_seeds(meta) == {0, 7}
    assert training_split_seeds({"trained_on": [str(tmp_path / "gone.hdf5")]}) is None
    assert training_split_seeds({"trained_on": [train_a, val_1]}) == {0, 1}
    run, _ = trained  # its demonstrations are fixed tasks: no generator phrasings at all
    out = validate_episodes(str(run / "model.pt"), ("blocks",), episodes=2, progress=False, split_seed=1)
    assert out["unseen_phrasings"] is True and out["training_split_seeds"] == [] and out["split_seed"] == 1
    assert torch.load(run / "model.pt", weights_only=False)["split_seeds"] == []


def test_the_benchmark_checks_layouts_of_demonstration_files_that_are_gone(tmp_path):
    """model.pt records each demonstration file's generator settings, so benchmarks/vla.py recomputes the files'
    layouts (to keep them out of the test) on a machine that does not have them."""
    from benchmarks.vla import demo_seeds
    from hierarchy.vla.data import file_generator, generator_layouts

    data = tmp_path / "d.hdf5"
    write_dataset(data, DataConfig(scenes=("blocks", "sort"), episodes=2, seed=5, image_size=64))
    with h5py.File(data, "r") as h:
        recorded = {int(g.attrs["seed"]) for g in h["data"].values()}
    assert generator_layouts(file_generator(data)) == recorded and len(recorded) == 4
    train(
        BCConfig(train_data=[str(data)], steps=2, batch_size=2, eval_every=2, save_every=2),
        tmp_path / "run",
        progress=False,
    )
    model = tmp_path / "run" / "model.pt"
    assert demo_seeds(model) == (recorded, [], {"mujoco"})
    data.rename(tmp_path / "gone.hdf5")
    assert demo_seeds(model) == (recorded, [], {"mujoco"})  # recomputed, not "not checked"
    state = torch.load(model, weights_only=False)
    del state["demo_generators"]  # a model from before they were recorded
    torch.save(state, tmp_path / "old.pt")
    assert demo_seeds(tmp_path / "old.pt") == (set(), [str(data)], set())
