"""Hydra composition of configs/: typed schemas, every group option, clear errors for typos."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from hrl.config import EvalRunConfig, TrainConfig
from hrl.train import CONFIG_DIR, register_schemas

register_schemas()


def compose_train(overrides=(), config_name="config", return_hydra_config=False):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name=config_name, overrides=list(overrides), return_hydra_config=return_hydra_config)


def to_train_config(cfg) -> TrainConfig:
    config = OmegaConf.to_object(cfg)
    assert isinstance(config, TrainConfig)
    return config


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def test_default_config_is_valid():
    config = to_train_config(compose_train())
    config.validate()
    assert config.algo.name == "sac_her" and config.env.kwargs["map"] == "open"


@pytest.mark.parametrize("algo", group_options("algo"))
def test_every_algo_composes_and_builds(algo):
    from stable_baselines3.common.env_util import make_vec_env

    from hrl.training import build_model

    assert {"sac_her", "td3_her", "tqc_her", "ppo"} <= set(group_options("algo"))
    config = to_train_config(compose_train([f"algo={algo}", "total_steps=5000"]))
    config.validate()
    venv = make_vec_env(config.env.id, n_envs=1, env_kwargs=config.env.make_kwargs(config.robot))
    model = build_model(config, venv, tensorboard_log=None)
    assert type(model).__name__.lower() == algo.split("_")[0]
    assert (type(model.replay_buffer).__name__ == "HerReplayBuffer") == config.algo.her if config.algo.her else True
    venv.close()


@pytest.mark.parametrize("env", group_options("env"))
def test_every_env_option_makes_an_env(env):
    import gymnasium as gym

    config = to_train_config(compose_train([f"env={env}"]))
    config.env.validate()
    gym.make(config.env.id, **config.env.make_kwargs(config.robot)).reset(seed=0)


def test_experiment_rover_local():
    config = to_train_config(compose_train(["experiment=rover_local"]))
    config.validate()
    assert config.experiment_name == "rover_local"
    assert config.env.kwargs["map"] == "open" and config.env.argument("local_goal_radius") == 2.5


@pytest.mark.parametrize("preset", group_options("env/wrappers"))
def test_a_wrapper_preset_outside_hydra_is_the_one_hydra_composes(preset):
    from hrl.cli import wrapper_preset

    assert wrapper_preset(preset) == list(compose_train([f"env/wrappers={preset}"]).env.wrappers)


def test_an_unknown_wrapper_preset_is_named_with_the_presets():
    from hrl.cli import wrapper_preset

    with pytest.raises(ValueError, match=r"no wrapper preset 'sticky'; presets: .*noise_latency.*randomize"):
        wrapper_preset("sticky")


@pytest.mark.parametrize("preset", group_options("env/wrappers"))
@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_every_wrapper_preset_makes_a_wrapped_env_on_every_backend(preset, backend):
    import gymnasium as gym

    config = to_train_config(compose_train([f"env/wrappers={preset}", f"env.backend={backend}"]))
    config.env.validate()
    env = gym.make(config.env.id, **config.env.make_kwargs(config.robot))
    env.reset(seed=0)
    env.step(env.action_space.sample())
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(type(env).__name__)
        env = env.env
    named = [w if isinstance(w, str) else w["name"] for w in config.env.wrappers]
    assert len(
        [c for c in chain if c in ("DomainRandomization", "SensorNoise", "ActionLatency", "ActionRateLimit")]
    ) == len(named)
    assert env.physics.__class__.__module__ == f"sim.navigation.{backend}.physics"


def test_experiment_rover_local_dr_randomizes():
    config = to_train_config(compose_train(["experiment=rover_local_dr"]))
    config.validate()
    assert config.experiment_name == "rover_local_dr"
    assert [w["name"] for w in config.env.wrappers] == ["domain_randomization"]


def test_wrappers_on_the_command_line():
    config = to_train_config(compose_train(["env.wrappers=[{name:sensor_noise,lidar_std:0.01},action_latency]"]))
    config.validate()
    assert config.env.make_kwargs(config.robot)["wrappers"] == [
        {"name": "sensor_noise", "lidar_std": 0.01},
        "action_latency",
    ]
    bad = to_train_config(compose_train(["env.wrappers=[{name:latency}]"]))
    with pytest.raises(ValueError, match=r"env.wrappers\[0\]: unknown wrapper 'latency'"):
        bad.validate()


def test_typo_in_key_fails_before_training():
    with pytest.raises(ConfigCompositionException, match="lerning_rate"):
        compose_train(["algo.lerning_rate=0.1"])


def test_unknown_group_option_lists_valid_ones():
    with pytest.raises(ConfigCompositionException, match=r"(?s)sac_herr.*Available options.*sac_her"):
        compose_train(["algo=sac_herr"])


def test_wrong_type_fails():
    with pytest.raises(ConfigCompositionException, match="total_steps"):
        compose_train(["total_steps=lots"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algo.learning_rate=-1"], "algo.learning_rate must be a positive number"),
        (["algo.name=a2c"], r"algo.name must be one of \['ppo', 'sac_her', 'td3_her', 'tqc_her'\]"),
        (["algo.learning_starts=50"], "must exceed env.kwargs.max_steps"),
        (["env.kwargs.max_steps=-1"], "env.kwargs.max_steps must be a positive integer, got -1"),
        (["+env.kwargs.mapp=maze"], r"env.kwargs: mapp \(did you mean map\?\) not an argument of env.id=hrl/Rover"),
        (["n_envs=0"], "n_envs must be a positive integer"),
        (["vec_env=ray"], "vec_env must be one of"),
        (["curriculum.enabled=true", "curriculum.start_radius=5.0"], "exceeds env.kwargs.local_goal_radius"),
        (["algo.features=cnn"], "algo.features must be one of"),
    ],
)
def test_bad_values_rejected(overrides, message):
    config = to_train_config(compose_train(overrides))
    with pytest.raises(ValueError, match=message):
        config.validate()


@pytest.mark.parametrize("launcher", ["joblib", "ray", "submitit_slurm"])
def test_launcher_presets_compose(launcher):
    cfg = compose_train([f"hydra/launcher={launcher}"], return_hydra_config=True)
    target = cfg.hydra.launcher._target_
    assert target.startswith(f"hydra_plugins.hydra_{launcher.split('_')[0]}_launcher.")


@pytest.mark.parametrize(
    ("launcher", "module", "schema"),
    [
        ("joblib", "hydra_plugins.hydra_joblib_launcher.config", "JobLibLauncherConf"),
        ("ray", "hydra_plugins.hydra_ray_launcher._config", "RayLauncherConf"),
        ("submitit_slurm", "hydra_plugins.hydra_submitit_launcher.config", "SlurmQueueConf"),
    ],
)
def test_launcher_presets_match_plugin_schemas(launcher, module, schema):
    """Our presets replace the plugins' own configs: they must name only keys the plugin knows."""
    import importlib

    plugin = pytest.importorskip(module)
    keys = set(OmegaConf.structured(getattr(plugin, schema)).keys())
    preset = OmegaConf.load(Path(CONFIG_DIR) / "hydra" / "launcher" / f"{launcher}.yaml")
    assert set(preset.keys()) <= keys
    assert preset._target_ == OmegaConf.structured(getattr(plugin, schema))._target_
    importlib.import_module(preset._target_.rsplit(".", 1)[0])


def test_eval_config_composes():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="eval", overrides=["env=apartment_local", "episodes=7"])
    config = OmegaConf.to_object(cfg)
    assert isinstance(config, EvalRunConfig)
    assert config.env.kwargs["map"] == "apartment" and config.episodes == 7


def test_llm_planner_configs_compose_with_a_backend_group():
    from hrl.eval import planner_params

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        goals = compose(config_name="eval", overrides=["planner=llm_goals", "task=apartment_language"])
        route = compose(
            config_name="eval",
            overrides=["planner=llm_route", "planner/backend=openai", "planner.backend.params.model=qwen",
                       "task=house_language"],
        )  # fmt: skip
    g = OmegaConf.to_object(goals)
    assert g.planner.name == "llm_goals" and g.planner.backend.name == "llama_cpp"
    params = planner_params(g.planner)
    # the default: Gemma 3 270M with the shipped SFT adapter, asked the way it was trained
    assert params["backend"] == "llama_cpp" and params["backend_params"]["model_path"] is None
    assert (
        params["backend_params"]["model"] == "gemma3" and params["backend_params"]["lora_path"] == "shipped:gemma3_sft"
    )
    assert params["reading"] == "names" and params["n_examples"] == 0 and params["robot_place"] is True
    r = OmegaConf.to_object(route)
    params = planner_params(r.planner)
    assert params["backend"] == "openai" and params["backend_params"]["model"] == "qwen"
    assert params["backend_params"]["api_key_env"] == "OPENAI_API_KEY"  # the variable's name, never a key
    assert len(r.task["episodes"]) == 30


def test_the_default_llm_planner_gives_its_backend_up_whole_and_a_ros_params_file_goes_over_it():
    """planner=llm_goals carries Gemma + the shipped adapter in its backend group: planner/backend=openai
    replaces the group, never an OpenAI backend with model=gemma3 and a lora_path. A ROS node's params file
    goes over the config key by key; a backend it names comes with its own backend_params, and backend_params
    alone go over the configured backend's."""
    from hrl.eval import planner_arguments

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        served = compose(
            config_name="eval", overrides=["planner=llm_goals", "planner/backend=openai", "task=house_language"]
        )
    backend = OmegaConf.to_container(served.planner.backend)
    assert (
        backend["name"] == "openai" and backend["params"]["model"] == "default" and "lora_path" not in backend["params"]
    )

    name, params = planner_arguments(
        "llm_goals", {"cache": False, "backend": "openai", "backend_params": {"model": "m"}}
    )
    assert name == "llm_goals" and params["backend"] == "openai" and params["backend_params"] == {"model": "m"}
    assert params["cache"] is False and (params["reading"], params["robot_place"]) == ("names", True)
    assert "backend_params" not in planner_arguments("llm_goals", {"backend": "openai"})[1]
    # backend_params without a backend go over the configured backend's: the adapter stays
    threads = planner_arguments("llm_goals", {"backend_params": {"n_threads": 2}})[1]["backend_params"]
    assert threads["n_threads"] == 2 and threads["lora_path"] == "shipped:gemma3_sft" and threads["model"] == "gemma3"
    name, params = planner_arguments("llm_goals_untrained", {})  # a config name runs its registered planner
    assert name == "llm_goals" and params["reading"] == "spans" and params["backend_params"]["lora_path"] is None
    assert planner_arguments("graph", {"spacing": 1.5})[1] == {"spacing": 1.5, "goal_tolerance": 0.3}


def test_planner_from_file_reads_a_params_file_and_names_a_bad_one(tmp_path):
    """The ROS planner nodes' planner_params_file: its keys over the config; a file that is not YAML, or YAML that
    is not a mapping, is an error naming the file and what it must hold (never a yaml traceback)."""
    from hrl.eval import planner_from_file

    good = tmp_path / "graph.yaml"
    good.write_text("spacing: 1.5\n")
    assert planner_from_file("graph", str(good)) == ("graph", {"spacing": 1.5, "goal_tolerance": 0.3})
    assert planner_from_file("graph", "") == ("graph", {"spacing": 2.0, "goal_tolerance": 0.3})  # the config's
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert planner_from_file("graph", str(empty)) == planner_from_file("graph", "")
    listed = tmp_path / "list.yaml"
    listed.write_text("- spacing\n- 1.5\n")
    with pytest.raises(ValueError, match=r"list\.yaml.*must hold a mapping.*not a list"):
        planner_from_file("graph", str(listed))
    broken = tmp_path / "broken.yaml"
    broken.write_text("spacing: [1.5\n")
    with pytest.raises(ValueError, match=r"broken\.yaml.*not valid YAML"):
        planner_from_file("graph", str(broken))
    with pytest.raises(FileNotFoundError):
        planner_from_file("graph", str(tmp_path / "absent.yaml"))


def test_configured_planner_works_inside_a_running_hydra_app_and_leaves_it_running():
    """hrl-deploy processes=one builds the ROS nodes inside its Hydra job: composing a planner config there must
    neither fail ("GlobalHydra is already initialized") nor end the app's Hydra."""
    from hydra.core.global_hydra import GlobalHydra

    from hrl.eval import configured_planner

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        name, params = configured_planner("llm_goals_untrained")
        assert GlobalHydra.instance().is_initialized()
        app = compose(config_name="eval", overrides=["planner=graph", "task=apartment_multi"])  # the app's, still
    assert name == "llm_goals" and params["reading"] == "spans" and app.planner.name == "graph"


def test_every_planner_config_builds(tmp_path):
    """Each configs/planner/*.yaml builds its planner with exactly the params it declares."""
    from hrl.eval import planner_params
    from hrl.hierarchy_eval import build_planner
    from hrl.policy import GoalPolicy

    policy = GoalPolicy.load("shipped:rover_local")
    for name in group_options("planner"):
        if name == "sorb":  # builds a graph from rollouts when it first plans; its params are checked in its tests
            continue
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            cfg = compose(config_name="eval", overrides=[f"planner={name}", "task=apartment_multi"])
        if name == "llm_goals_trained":  # needs a trained adapter (tests/llm_planner/test_posttrain_train.py)
            with pytest.raises(MissingMandatoryValue, match="lora_path"):
                OmegaConf.to_object(cfg)
            continue
        typed = OmegaConf.to_object(cfg).planner  # a config may run a registered planner under another name
        planner = build_planner(typed.name, planner_params(typed), policy)
        assert planner.name == typed.name and name.startswith(typed.name)  # llm_goals_untrained runs llm_goals


@pytest.mark.parametrize("name", ["vla", "posttrain", "deploy"])
def test_every_key_of_a_commands_typed_config_is_written_in_its_yaml(name):
    """The commands whose YAML is the reference of their keys (docs point there) list every field of the typed
    config: a key added to the dataclass only would be undocumented (posttrain's `engine` was, until 2026-12-07)."""
    from dataclasses import fields

    import yaml

    from hrl.deploy import DeployConfig
    from hrl.vla import VLAConfig
    from llm_planner.posttrain.train import PosttrainConfig

    typed = {"vla": VLAConfig, "posttrain": PosttrainConfig, "deploy": DeployConfig}[name]
    written = set(yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())) - {"defaults", "hydra"}
    assert written == {f.name for f in fields(typed)}
