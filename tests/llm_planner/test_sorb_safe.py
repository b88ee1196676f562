"""The safety critic and ``sorb_safe``: predicted wall contact, edge pruning, plans, the graph cache, errors."""

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from hrl.policy import GoalPolicy
from hrl.safety_critic import SafetyCritic, nominal_env, rotated
from llm_planner.base import Feedback, Scene, Task, make_planner
from llm_planner.plan import Plan, PlanError, ground
from sim.navigation.world import Pose2D, load_world

SMALL = {"collect_steps": 3000, "n_nodes": 150}


@pytest.fixture(scope="module")
def policy():
    return GoalPolicy.load("shipped:rover_local")


@pytest.fixture(scope="module")
def critic(policy):
    return SafetyCritic.load("shipped:rover_local_safety", policy)


@pytest.fixture(scope="module")
def safe_graph(policy, tmp_path_factory):
    """A small sorb_safe graph of two_rooms and the plain SoRB graph of the same visited states."""
    cache = tmp_path_factory.mktemp("sorb_cache")
    world = load_world("two_rooms")
    safe = make_planner("sorb_safe", policy=policy, cache_dir=str(cache), **SMALL)
    plain = make_planner("sorb", policy=policy, cache_dir=None, **SMALL)
    return world, safe, safe.build_graph(world), plain.build_graph(world)


def _contact_steps(policy, env, pose, goal, horizon=100):
    """Wall-contact steps of the policy actually driving from pose to goal (the critic's ground truth)."""
    u = env.unwrapped
    u.observation_at(pose)
    obs = u.set_goal(goal)
    contact = 0
    for _ in range(horizon):
        obs, _, _, _, info = env.step(policy(obs))
        contact += int(info["collision"])
        if info["is_success"]:
            break
    return contact


def test_critic_predicts_more_contact_along_a_wall_than_in_free_space(policy, critic):
    """An edge that hugs a wall (robot 5 cm from it, goal 1.5 m along it) is predicted to cost more wall
    contact than the same edge in the middle of the room, and the policy really does touch the wall there."""
    world = load_world("two_rooms")
    env = nominal_env(policy, world)
    env.reset(seed=0)
    u = env.unwrapped
    hug_pose, hug_goal = Pose2D(5.27, 3.3, math.pi / 2), (5.27, 4.6)  # along the dividing wall, east side
    free_pose, free_goal = Pose2D(7.5, 1.0, math.pi / 2), (7.5, 2.5)
    obs = np.stack([u.observation_at(p)["observation"] for p in (hug_pose, free_pose)])
    goals = np.asarray([hug_goal, free_goal])
    pred_hug, pred_free = critic.cost(obs, goals)
    assert pred_hug > pred_free + 1.0
    assert pred_free < 1.0
    assert _contact_steps(policy, env, hug_pose, hug_goal) > _contact_steps(policy, env, free_pose, free_goal)


def test_turning_the_robot_in_place_rolls_the_scan(policy, critic):
    """rotated() turns the heading by whole rays; a full turn is the identity; cost() averages headings."""
    world = load_world("two_rooms")
    env = nominal_env(policy, world)
    env.reset(seed=0)
    u = env.unwrapped
    a = u.observation_at(Pose2D(2.0, 2.0, 0.3))["observation"][None, :]
    b = u.observation_at(Pose2D(2.0, 2.0, 0.3 + 2 * math.pi * 9 / 36))["observation"][None, :]
    turned = rotated(a, 9)
    assert np.allclose(turned[0, 2:4], b[0, 2:4], atol=1e-5)
    assert np.allclose(turned[0, 6:], b[0, 6:], atol=0.02)  # the same wall seen from the turned robot
    assert np.allclose(rotated(a, 36), a, atol=1e-5)
    goal = np.asarray([[3.0, 3.0]])
    each = [critic.cost(rotated(a, k * 9), goal)[0] for k in range(4)]
    assert critic.cost(a, goal, headings=4)[0] == pytest.approx(np.mean(each), rel=1e-5)


def test_graph_edges_carry_the_predicted_and_practised_cost_in_their_weight(safe_graph):
    _, safe, (graph, nodes, _), (plain_graph, plain_nodes, _) = safe_graph
    assert np.array_equal(nodes, plain_nodes)  # the same visited states and candidate edges as plain SoRB
    assert set(graph.edges()) == set(plain_graph.edges())
    edges = list(graph.edges(data=True))
    costs = safe.critic.cost(nodes[[u for u, _, _ in edges]], nodes[[v for _, v, _ in edges], :2], safe.headings)
    assert np.allclose([d["critic_cost"] for *_, d in edges], costs, atol=1e-4)
    for _, _, d in edges:
        assert d["cost"] == pytest.approx(max(d["critic_cost"], d["practice"]))  # practice (default 20 routes)
        assert d["weight"] == pytest.approx(d["steps"] + safe.edge_penalty + safe.safety_weight * d["cost"])


def _search_graph(routes):
    """start -> node -> goal for each (node, steps, cost) of ``routes``; the robot's and goal's edges free."""
    g = nx.DiGraph()
    for node, steps, cost in routes:
        g.add_node(node, position=(float(node), 0.0))
        g.add_edge("start", node, weight=1.0)
        g.add_edge(node, "goal", weight=steps + 10.0 * cost, steps=steps, cost=cost)
    return g


def test_edges_above_max_edge_cost_are_pruned_unless_every_route_needs_one(policy):
    safe = make_planner("sorb_safe", policy=policy, cache_dir=None, max_edge_cost=2.0, safety_weight=10.0)
    # a short edge predicted to scrape (cost 3 > 2) loses to a longer clean one even if weights favoured it
    g = _search_graph([(1, 5.0, 3.0), (2, 40.0, 0.5)])
    g[1]["goal"]["weight"] = 1.0
    safe.thresholds = []
    assert safe._route(g, (0.0, 0.0)) == ["start", 2, "goal"]
    assert safe.thresholds == [2.0] and not g.has_edge(1, "goal")
    # every route has an edge above 2: the threshold rises to the bottleneck (4), the 9-cost edge goes
    g = _search_graph([(1, 5.0, 9.0), (2, 40.0, 4.0), (3, 30.0, 4.0)])
    g[1]["goal"]["weight"] = 1.0
    safe.thresholds = []
    assert safe._route(g, (0.0, 0.0)) == ["start", 3, "goal"]
    assert safe.thresholds == [4.0]
    # no route at all is the base planner's named error
    g.remove_edges_from([(n, "goal") for n in (1, 2, 3)])
    no_path = r"no path in the graph .*max_edge_cost=2 predicted contact steps\); collect more states \(collect_steps="
    with pytest.raises(PlanError, match=no_path):
        safe._route(g, (0.0, 0.0))


def test_planned_route_keeps_below_the_threshold(safe_graph):
    world, safe, (graph, _, _), _ = safe_graph
    plan = safe.plan(Task("x", ("charging_dock",)), Scene(world, Pose2D(1.0, 1.0, 0.0)))
    points = [s.xy for s in ground(plan, world)]
    ids = list(graph.nodes)
    xy = np.asarray([graph.nodes[n]["position"] for n in ids])
    # waypoints are graph nodes (rounded to mm); the last point is the goal
    route = [ids[int(np.argmin(np.hypot(*(xy - p).T)))] for p in points[:-1]]
    (threshold,) = safe.thresholds
    assert threshold >= safe.max_edge_cost
    assert all(graph[u][v]["cost"] <= threshold for u, v in itertools.pairwise(route))
    assert "pruned" in plan.rationale


def test_sorb_safe_plans_a_valid_route_through_the_maze(policy, tmp_path):
    world = load_world("maze")
    planner = make_planner("sorb_safe", policy=policy, cache_dir=str(tmp_path))
    plan = planner.plan(Task("go to the exit sign", ("exit_sign",)), Scene(world, Pose2D(1.5, 1.5, 0.0)))
    assert isinstance(plan, Plan)
    points = [s.xy for s in ground(plan, world)]
    assert len(points) >= 6  # six doors between the start hall and the goal room
    assert points[-1] == world.resolve("exit_sign").position


def test_graph_cache_is_hit_on_the_second_plan_and_by_a_new_planner(policy, tmp_path):
    cache = tmp_path
    world = load_world("two_rooms")
    safe = make_planner("sorb_safe", policy=policy, cache_dir=str(cache), **SMALL)
    task, scene = Task("x", ("charging_dock",)), Scene(world, Pose2D(1.0, 1.0, 0.0))
    safe.plan(task, scene)
    assert safe.graph_source == "built" and len(list(cache.glob("*.npz"))) == 1
    graph, nodes, _ = safe.build_graph(world)
    safe.plan(task, scene)
    assert safe.graph_source == "memory"
    again = make_planner("sorb_safe", policy=policy, cache_dir=str(cache), **SMALL)
    cached_graph, cached_nodes, _ = again.build_graph(world)
    assert again.graph_source == "disk"
    assert np.array_equal(cached_nodes, nodes)
    assert sorted(cached_graph.edges()) == sorted(graph.edges())
    for u, v, w in graph.edges(data="weight"):
        assert cached_graph[u][v]["weight"] == pytest.approx(w)
    # a parameter that shapes the graph is part of the key; a weight applied on loading is not
    assert make_planner("sorb_safe", policy=policy, cache_dir=str(cache), **SMALL, headings=2)._cache_key(
        world
    ) != again._cache_key(world)
    heavier = make_planner("sorb_safe", policy=policy, cache_dir=str(cache), **SMALL, safety_weight=50.0)
    heavier.build_graph(world)
    assert heavier.graph_source == "disk"


def test_practice_finds_contact_the_critic_missed_and_the_edge_costs_it(policy):
    """Practice drives routes over the graph as plans are driven; an edge that touched walls there costs what
    it really cost, though the critic predicted it clean: practice is measured, not predicted."""
    world = load_world("two_rooms")
    safe = make_planner("sorb_safe", policy=policy, cache_dir=None, practice_routes=10, **SMALL)
    graph, _, _ = safe.build_graph(world)
    edges = list(graph.edges(data=True))
    for _, _, d in edges:
        assert d["cost"] == pytest.approx(max(d["critic_cost"], d["practice"]))
    missed = [d for *_, d in edges if d["practice"] > safe.max_edge_cost >= d["critic_cost"]]
    assert missed, "ten practice routes in two_rooms found no edge the critic had predicted clean"
    assert all(d["cost"] == d["practice"] for d in missed)
    # seeded: the same routes, the same findings
    again = make_planner("sorb_safe", policy=policy, cache_dir=None, practice_routes=10, **SMALL)
    again_graph, _, _ = again.build_graph(world)
    assert [d["practice"] for *_, d in again_graph.edges(data=True)] == [d["practice"] for *_, d in edges]
    plan = safe.plan(Task("x", ("charging_dock",)), Scene(world, Pose2D(1.0, 1.0, 0.0)))
    assert "found touching walls in 10 practice routes" in plan.rationale
    unpractised = make_planner("sorb_safe", policy=policy, cache_dir=None, practice_routes=0, **SMALL)
    assert unpractised._cache_key(world) != safe._cache_key(world)
    plain_graph, _, _ = unpractised.build_graph(world)
    assert all("practice" not in d for *_, d in plain_graph.edges(data=True))


def test_randomized_practice_drives_each_route_with_a_new_robot(policy, monkeypatch):
    """practice_robots=randomized: every practised route starts with a reset of the domain-randomized copy (a
    robot drawn from the training preset's ranges), the same routes as nominal practice, and its own cache key."""
    import hrl.safety_critic as safety_critic
    import llm_planner.planners.sorb_safe as sorb_safe

    robots = []

    def randomized(policy, world):
        env = safety_critic.randomized_env(policy, world)
        reset = env.reset

        def recording_reset(**kw):
            obs, info = reset(**kw)
            robots.append(info["domain"])
            return obs, info

        env.reset = recording_reset
        return env

    monkeypatch.setattr(sorb_safe, "randomized_env", randomized)
    world = load_world("two_rooms")
    nominal = make_planner("sorb_safe", policy=policy, cache_dir=None, practice_routes=6, **SMALL)
    safe = make_planner(
        "sorb_safe", policy=policy, cache_dir=None, practice_routes=6, practice_robots="randomized", **SMALL
    )
    graph, _, _ = safe.build_graph(world)
    assert 2 <= len(robots) <= 6 and len({r["mass_scale"] for r in robots}) == len(robots)  # a robot per route
    for r in robots:
        assert 0.8 <= r["mass_scale"] <= 1.25 and 0.5 <= r["friction"] <= 1.0 and 0 <= r["latency_steps"] <= 2
    for *_, d in graph.edges(data=True):
        assert d["cost"] == pytest.approx(max(d["critic_cost"], d["practice"]))
    assert safe._cache_key(world) != nominal._cache_key(world)
    assert "practice_robots" not in nominal._graph_params()  # the nominal key is the one cached before the option
    with pytest.raises(ValueError, match="practice_robots must be one of nominal, randomized, got 'real'"):
        make_planner("sorb_safe", policy=policy, practice_robots="real")


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"safety_weight": -1.0}, ValueError, "safety_weight must be a number >= 0"),
        ({"safety_weight": float("nan")}, ValueError, "safety_weight must be a number"),
        ({"safety_weight": float("inf")}, ValueError, "safety_weight must be finite"),
        ({"max_edge_cost": -0.5}, ValueError, "max_edge_cost must be a number >= 0"),
        ({"max_edge_cost": "high"}, ValueError, "max_edge_cost must be a number"),
        ({"headings": 5}, ValueError, "headings must be a divisor of the lidar's 36 rays"),
        ({"cache_dir": 3}, TypeError, "cache_dir must be a directory path or None"),
        ({"safety_critic": "shipped:nope"}, FileNotFoundError, "no safety critic at .*shipped critics: rover_local"),
        ({"n_nodes": 1}, ValueError, "need n_nodes >= 2"),
        ({"practice_routes": -1}, ValueError, "practice_routes must be a whole number >= 0"),
        ({"practice_routes": 2.5}, ValueError, "practice_routes must be a whole number >= 0"),
    ],
)
def test_bad_sorb_safe_parameters_are_named_errors(policy, params, error, match):
    with pytest.raises(error, match=match):
        make_planner("sorb_safe", policy=policy, **params)


def test_critic_of_another_policy_is_refused():
    other = GoalPolicy.load("shipped:rover_local_dr")
    with pytest.raises(ValueError, match="trained for another policy"):
        SafetyCritic.load("shipped:rover_local_safety", other)


def test_critic_rejects_misshaped_input(critic):
    with pytest.raises(ValueError, match=r"cost\(\) needs observations of shape \(n, 42\)"):
        critic.cost(np.zeros((3, 10)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="headings must divide"):
        critic.cost(np.zeros((1, 42)), np.zeros((1, 2)), headings=7)


def test_graph_cleanup_lasts_one_task(safe_graph):
    """A waypoint that failed loses its incoming edges for the rest of that task only: the next task (no
    feedback) plans on the full graph again, so one failure does not cut every later episode's graph."""
    world, safe, (graph, _, _), _ = safe_graph
    task, pose = Task("x", ("charging_dock",)), Pose2D(1.0, 1.0, 0.0)
    first = ground(safe.plan(task, Scene(world, pose)), world)
    failed = first[0].xy
    node = min(graph.nodes, key=lambda n: math.dist(graph.nodes[n]["position"], failed))
    assert graph.in_degree(node) > 0
    feedback = Feedback("point", "stuck", pose, attempt=1, failed_point=failed)
    replanned = [s.xy for s in ground(safe.plan(task, Scene(world, pose), feedback), world)]
    assert failed not in replanned[1:]  # only the robot's own first hop may still lead there
    assert safe._task_graphs[world.name].in_degree(node) == 0
    assert graph.in_degree(node) > 0  # the cached graph is untouched
    assert [s.xy for s in ground(safe.plan(task, Scene(world, pose)), world)] == [s.xy for s in first]
