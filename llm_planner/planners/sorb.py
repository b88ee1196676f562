"""``sorb``: Search on the Replay Buffer (Eysenbach et al., 2019), with the rover's goal-conditioned critic.

No map knowledge: the graph's nodes are states the low-level policy itself visited in the world
(rollouts towards random local goals, subsampled for coverage), and the weight of the edge i -> j is the
number of steps the critic predicts the policy needs from state i to reach j's position. With sparse
rewards (-1 per step until success) and discount gamma, ``Q = -(1 - gamma^d) / (1 - gamma)``, so
``d = log(1 + (1 - gamma) Q) / log(gamma)``. Edges longer than ``max_edge_steps`` are dropped (the critic
is only trusted nearby), each edge costs ``edge_penalty`` extra steps (fewer, longer hops), and the
shortest path gives the waypoints. When a waypoint fails, the edges into it are removed before
replanning (graph cleanup, as in the SoRB follow-up work), for the rest of that task.

One addition to the paper, because this critic was trained in an open room and has never seen a goal
behind a wall: an edge is also dropped when the node's own lidar scan shows an obstacle in the straight
corridor (the robot's width) from the node to the target. It uses only that state's observation, no
map. Set ``occlusion_check=False`` for the paper's version.

The graph (nodes and the critic's distances) is cached in memory per map and on disk in ``cache_dir``,
keyed by the policy file, the map's walls and the parameters that shape it, so only the first plan on a
machine pays for building it. ``sorb_safe`` (sorb_safe.py) adds a safety critic through the hooks
``_edge_attributes``, ``_edge_weights``, ``_direct_ok`` and ``_route``.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from hrl import DEFAULT_POLICY
from hrl.safety_critic import file_digest, nominal_env
from llm_planner.base import Feedback, Scene, Task
from llm_planner.plan import Plan, PlanError, Subgoal
from llm_planner.planners.common import goal_point, goal_target, step_budget, waypoint
from sim.navigation.world import Pose2D, World

#: Bump when the way a graph is built changes, so graphs cached on disk by older code are not reused.
GRAPH_FORMAT = 1
DEFAULT_CACHE_DIR = "~/.cache/hrl-stack/sorb"


class SoRBPlanner:
    name = "sorb"

    def __init__(
        self,
        policy: str = DEFAULT_POLICY,
        n_nodes: int = 400,
        collect_steps: int = 6000,
        max_edge_steps: float = 40.0,
        edge_penalty: float = 5.0,
        occlusion_check: bool = True,
        seed: int = 0,
        goal_tolerance: float = 0.3,
        node_margin: float = 0.25,
        cache_dir: str | None = DEFAULT_CACHE_DIR,
    ) -> None:
        if n_nodes < 2 or collect_steps < n_nodes:
            raise ValueError(f"need n_nodes >= 2 and collect_steps >= n_nodes, got {n_nodes}, {collect_steps}")
        if max_edge_steps <= 0:
            raise ValueError(f"max_edge_steps must be > 0, got {max_edge_steps}")
        from hrl.policy import GoalPolicy

        self.policy = GoalPolicy.load(policy) if isinstance(policy, str) else policy
        self.n_nodes = n_nodes
        self.collect_steps = collect_steps
        self.max_edge_steps = max_edge_steps
        self.occlusion_check = occlusion_check
        self.edge_penalty = edge_penalty
        self.seed = seed
        self.goal_tolerance = goal_tolerance
        self.gamma = float(self.policy.model.gamma)
        self.lidar = self.policy.lidar()
        self._angles = np.asarray(self.lidar.angles())
        from robots.spec import load_robot

        robot_radius = load_robot(self.policy.robot_config.name).radius
        self.clearance = robot_radius + 0.05
        # Waypoints must leave room to turn: a node's own scan must show this much free space all around.
        if not (isinstance(node_margin, (int, float)) and 0.0 <= node_margin < self.lidar.max_range - robot_radius):
            raise ValueError(
                f"node_margin must be a distance in metres in [0, {self.lidar.max_range - robot_radius:g}) (the lidar "
                f"must be able to see it), got {node_margin!r}"
            )
        self.node_clearance = robot_radius + float(node_margin)
        self.node_margin = float(node_margin)
        if cache_dir is not None and not isinstance(cache_dir, (str, Path)):
            raise TypeError(f"cache_dir must be a directory path or None (no disk cache), got {cache_dir!r}")
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        self._graphs: dict[str, tuple[nx.DiGraph, np.ndarray, Any]] = {}
        self._task_graphs: dict[str, nx.DiGraph] = {}  # per map: the graph of the current task, cleaned up
        #: Where the last build_graph call got its graph: "built", "disk" or "memory".
        self.graph_source = ""

    # ------------------------------------------------------------------ graph

    def _graph_params(self) -> dict[str, Any]:
        """What shapes the cached part of the graph (nodes and raw edges); weights are applied on load."""
        return {
            "format": GRAPH_FORMAT,
            "planner": type(self).__name__,
            "policy_sha256": file_digest(self.policy.path),
            "n_nodes": self.n_nodes,
            "collect_steps": self.collect_steps,
            "max_edge_steps": self.max_edge_steps,
            "occlusion_check": self.occlusion_check,
            "seed": self.seed,
            "node_margin": self.node_margin,
        }

    def _cache_key(self, world: World) -> str:
        geometry = repr((world.name, world.bounds, world.walls))
        doc = json.dumps({**self._graph_params(), "map": geometry}, sort_keys=True)
        return f"{world.name}-{hashlib.sha256(doc.encode()).hexdigest()[:20]}"

    def build_graph(self, world: World) -> tuple[nx.DiGraph, np.ndarray, Any]:
        """Nodes from visited states, weighted by critic distances; cached per map in memory and on disk."""
        key = self._cache_key(world)
        if key in self._graphs:
            self.graph_source = "memory"
            return self._graphs[key]
        env = nominal_env(self.policy, world)
        env.reset(seed=self.seed)
        path = self.cache_dir / f"{key}.npz" if self.cache_dir is not None else None
        if path is not None and path.is_file():
            with np.load(path) as cached:
                nodes, edges = cached["nodes"], {k: cached[k] for k in cached.files if k != "nodes"}
            self.graph_source = "disk"
        else:
            nodes, edges = self._nodes_and_edges(world, env)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.tmp.npz")  # atomic: a killed run leaves no half file
                np.savez_compressed(tmp, nodes=nodes, **edges)
                tmp.replace(path)
            self.graph_source = "built"
        self._graphs[key] = (self._graph_from(nodes, edges), nodes, env)
        return self._graphs[key]

    def _graph_from(self, nodes: np.ndarray, edges: dict[str, np.ndarray]) -> nx.DiGraph:
        """The search graph of nodes (with their positions) and the edges of finite weight (with every
        per-edge value as an attribute)."""
        graph = nx.DiGraph()
        for i in range(len(nodes)):
            graph.add_node(i, position=(float(nodes[i, 0]), float(nodes[i, 1])))
        weights = self._edge_weights(edges)
        keep = np.isfinite(weights)
        names = [k for k in edges if k not in ("i", "j")]
        for n in np.nonzero(keep)[0].tolist():
            attrs = {k: float(edges[k][n]) for k in names}
            graph.add_edge(int(edges["i"][n]), int(edges["j"][n]), weight=float(weights[n]), **attrs)
        return graph

    def _edge_attributes(self, observations: np.ndarray, goals: np.ndarray) -> dict[str, np.ndarray]:
        """Per-edge values beyond the critic's steps (none here; sorb_safe adds the predicted cost)."""
        return {}

    def _edge_weights(self, edges: dict[str, np.ndarray]) -> np.ndarray:
        """Search weight of each edge; inf drops it. Here: predicted steps + ``edge_penalty``."""
        steps = edges["steps"]
        return np.where(steps <= self.max_edge_steps, steps + self.edge_penalty, np.inf)

    def _edges_to(self, observations: np.ndarray, goals: np.ndarray) -> dict[str, np.ndarray]:
        """Edges from each observation (row) to each goal (column), as flat arrays i, j, steps, ..."""
        dist = self.distances(observations, goals)
        ii, jj = np.nonzero(dist <= self.max_edge_steps)
        edges = {"i": ii.astype(np.int32), "j": jj.astype(np.int32), "steps": dist[ii, jj].astype(np.float32)}
        return {**edges, **self._edge_attributes(observations[ii], goals[jj])}

    def _nodes_and_edges(self, world: World, env: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        rng = np.random.default_rng(self.seed)
        states = np.asarray(self._collect_states(env, world, rng))
        # waypoints must leave room to pass: keep states whose own scan shows clearance around them
        clear = states[:, 6:].min(axis=1) * self.lidar.max_range >= self.node_clearance
        if clear.sum() < 2:
            raise PlanError(
                f"sorb: only {int(clear.sum())} of {len(states)} visited states in {world.name!r} have "
                f"{self.node_clearance:.2f} m free all around; lower node_margin"
            )
        nodes = _farthest_points(states[clear], self.n_nodes, rng)
        edges = self._edges_to(nodes, nodes[:, :2])
        loops = edges["i"] == edges["j"]
        return nodes, {k: v[~loops] for k, v in edges.items()}

    def _collect_states(self, env: Any, world: World, rng: np.random.Generator) -> list[np.ndarray]:
        """Roll the policy out towards random local goals in sight; restart where little was visited yet."""
        u = env.unwrapped
        states: list[np.ndarray] = []
        obs = None
        steps_on_goal = 0
        reached = False
        while len(states) < self.collect_steps:
            if obs is None or steps_on_goal > 60 or reached:
                steps_on_goal = 0
                if obs is None or rng.random() < 0.3:  # spread the visited states over the whole map
                    obs = u.observation_at(Pose2D(*_least_visited_start(world, rng, states)))
                here = (float(obs["achieved_goal"][0]), float(obs["achieved_goal"][1]))
                try:
                    goal = world.sample_free(
                        rng,
                        u.task.goal_clearance,
                        near=here,
                        radius=2.5,
                        min_distance=0.6,
                        line_of_sight=True,
                        max_tries=500,
                    )
                except RuntimeError:  # nothing in sight from here (e.g. pressed against a wall): restart
                    obs = None
                    continue
                obs = u.set_goal(goal)
            obs, _, _, _, info = env.step(self.policy(obs))
            reached = bool(info["is_success"])
            states.append(obs["observation"].copy())
            steps_on_goal += 1
        return states

    def distances(self, observations: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """Predicted steps from each observation (rows) to each goal position (columns); inf if occluded."""
        import torch

        n, m = len(observations), len(goals)
        obs = np.repeat(observations, m, axis=0).astype(np.float32)
        g = np.tile(goals, (n, 1)).astype(np.float32)
        model = self.policy.model
        with torch.no_grad():
            batch = {
                "observation": torch.as_tensor(obs),
                "achieved_goal": torch.as_tensor(obs[:, :2]),
                "desired_goal": torch.as_tensor(g),
            }
            actions = model.policy.actor(batch, deterministic=True)
            q = torch.min(torch.cat(model.policy.critic(batch, actions), dim=1), dim=1).values.numpy()
        floor = -1.0 / (1.0 - self.gamma) + 1e-6
        q = np.clip(q, floor, 0.0)
        steps = np.log1p((1.0 - self.gamma) * q) / math.log(self.gamma)
        steps = steps.reshape(n, m)
        if self.occlusion_check:
            blocked = _blocked(observations, goals, self._angles, self.lidar.max_range, self.clearance)
            steps[blocked] = np.inf
        return steps

    # ------------------------------------------------------------------ planning

    def plan(self, task: Task, scene: Scene, feedback: Feedback | None = None) -> Plan:
        world = scene.world
        built, nodes, env = self.build_graph(world)
        # Graph cleanup lasts one task: a new task (no feedback) starts from the full graph again, so a
        # failure in one episode does not cut edges out of every later one.
        if feedback is None or world.name not in self._task_graphs:
            self._task_graphs[world.name] = built.copy()
        graph = self._task_graphs[world.name]
        if feedback is not None and feedback.failed_point is not None:
            self._forget_edges_into(graph, feedback.failed_point)
        pose = scene.robot_pose
        subgoals: list[Subgoal] = []
        observation = scene.observation
        for goal in task.goals:
            target = goal_point(goal, world)
            start_obs = np.asarray(observation if observation is not None else _observation_at(env, pose), np.float32)
            observation = None
            path = self._path(graph, nodes, start_obs, target)
            for p in path:
                subgoals.append(waypoint(p, 2.0))
            subgoals.append(
                Subgoal(target=goal_target(goal, world), tolerance=self.goal_tolerance, step_budget=step_budget(2.0))
            )
            pose = Pose2D(target[0], target[1], pose.yaw)
        return Plan(subgoals=subgoals, rationale=f"{self.name}: {self._rationale(graph)}")

    def _rationale(self, graph: nx.DiGraph) -> str:
        return f"shortest path over {graph.number_of_nodes()} visited states"

    @staticmethod
    def _forget_edges_into(graph: nx.DiGraph, point: tuple[float, float], radius: float = 0.05) -> None:
        """Graph cleanup after a failure: the critic over-estimated reachability of that waypoint."""
        for n, data in graph.nodes(data=True):
            if math.dist(data["position"], point) <= radius:
                graph.remove_edges_from(list(graph.in_edges(n)))

    def _direct_ok(self, edge: dict[str, np.ndarray]) -> bool:
        """Whether the policy may drive straight from the robot to the goal (one candidate edge or none)."""
        return bool(np.isfinite(self._edge_weights(edge)).any())

    def _path(
        self, graph: nx.DiGraph, nodes: np.ndarray, start_obs: np.ndarray, target: tuple[float, float]
    ) -> list[tuple[float, float]]:
        g = graph.copy()
        goal = np.asarray([target])
        if self._direct_ok(self._edges_to(start_obs[None, :], goal)):
            return []  # the goal is in direct reach
        from_start = self._edges_to(start_obs[None, :], nodes[:, :2])
        for j, w in zip(from_start["j"].tolist(), self._edge_weights(from_start).tolist(), strict=True):
            if math.isfinite(w):
                g.add_edge("start", j, weight=w)
        to_goal = self._edges_to(nodes, goal)
        for i, w in zip(to_goal["i"].tolist(), self._edge_weights(to_goal).tolist(), strict=True):
            if math.isfinite(w):
                g.add_edge(i, "goal", weight=w)
        if "start" not in g or "goal" not in g:
            raise PlanError(
                f"{self.name}: no graph node within reach of the {'robot' if 'start' not in g else 'goal'} "
                f"({self._reach_limits()}); collect more states (collect_steps) or raise max_edge_steps"
            )
        path = self._route(g, target)
        return [g.nodes[n]["position"] for n in path[1:-1]]

    def _route(self, g: nx.DiGraph, target: tuple[float, float]) -> list[Any]:
        """The lightest path from "start" to "goal" in the search graph ``g`` (node ids, ends included)."""
        try:
            return nx.shortest_path(g, "start", "goal", weight="weight")
        except nx.NetworkXNoPath:
            raise PlanError(
                f"{self.name}: no path in the graph ({g.number_of_nodes()} nodes, {g.number_of_edges()} edges) "
                f"to ({target[0]:.2f}, {target[1]:.2f}) ({self._reach_limits()}); collect more states "
                f"(collect_steps={self.collect_steps}: the drives the nodes are drawn from may not cover the map), "
                "or raise n_nodes or max_edge_steps"
            ) from None

    def _reach_limits(self) -> str:
        return f"edges up to max_edge_steps={self.max_edge_steps:g} predicted steps"


def _observation_at(env: Any, pose: Pose2D) -> np.ndarray:
    """The observation the robot has at ``pose`` (on hardware: its live odometry and scan)."""
    return env.unwrapped.observation_at(pose)["observation"].copy()


def _least_visited_start(world: World, rng: np.random.Generator, states: list[np.ndarray]) -> tuple[float, ...]:
    """A free start pose far from the states visited so far, so the rollouts cover the whole map."""
    candidates = np.asarray([world.sample_free(rng, clearance=0.35) for _ in range(20)])
    if not states:
        x, y = candidates[0]
        return (float(x), float(y), float(rng.uniform(-math.pi, math.pi)))
    visited = np.asarray([s[:2] for s in states[::10]])
    gaps = np.min(np.linalg.norm(candidates[:, None, :] - visited[None, :, :], axis=2), axis=1)
    x, y = candidates[int(np.argmax(gaps))]
    return (float(x), float(y), float(rng.uniform(-math.pi, math.pi)))


def _farthest_points(states: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Greedy farthest-point subsampling on (x, y): even coverage of the visited area."""
    xy = states[:, :2]
    chosen = [int(rng.integers(len(states)))]
    d = np.linalg.norm(xy - xy[chosen[0]], axis=1)
    for _ in range(min(n, len(states)) - 1):
        k = int(np.argmax(d))
        chosen.append(k)
        d = np.minimum(d, np.linalg.norm(xy - xy[k], axis=1))
    return states[chosen]


def _blocked(
    observations: np.ndarray, goals: np.ndarray, angles: np.ndarray, max_range: float, radius: float
) -> np.ndarray:
    """True where the lidar of observation i shows an obstacle in the straight corridor (half-width
    ``radius``) from its position to goal j: the robot could not drive there in a straight line."""
    out = np.zeros((len(observations), len(goals)), dtype=bool)
    cos_a, sin_a = np.cos(angles), np.sin(angles)
    for lo in range(0, len(observations), 64):  # chunks keep the (rows, goals, rays) arrays small
        obs = observations[lo : lo + 64]
        ranges = obs[:, 6:] * max_range
        valid = ranges < max_range - 1e-3  # a ray without a return shows no obstacle
        hx, hy = ranges * cos_a, ranges * sin_a  # hit points in the robot frame
        c, s = obs[:, 2:3], obs[:, 3:4]
        dx, dy = goals[None, :, 0] - obs[:, 0:1], goals[None, :, 1] - obs[:, 1:2]
        tx, ty = c * dx + s * dy, -s * dx + c * dy  # goals in the robot frame
        dist = np.maximum(np.hypot(tx, ty), 1e-9)
        ux, uy = (tx / dist)[:, :, None], (ty / dist)[:, :, None]
        along = hx[:, None, :] * ux + hy[:, None, :] * uy
        perp = np.abs(hx[:, None, :] * uy - hy[:, None, :] * ux)
        inside = valid[:, None, :] & (along > 0) & (along < dist[:, :, None] + radius) & (perp < radius)
        out[lo : lo + 64] = inside.any(axis=2)
    return out
