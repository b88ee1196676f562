"""``sorb_safe``: SoRB over a waypoint graph that also knows how much wall contact each edge will cost.

Beside the goal-conditioned distance critic SoRB uses (``sorb.py``), a **safety critic**
(:class:`hrl.safety_critic.SafetyCritic`) predicts the wall-contact steps the low-level policy makes
driving from a node's state to another node, averaged over ``headings`` arrival headings (the node's scan,
rolled). Then, on the same graph of visited states:

* an edge whose predicted cost exceeds ``max_edge_cost`` contact steps is **pruned** (the policy would
  scrape a wall or a door frame on it). When every route has such an edge (a door all routes pass), the
  threshold of that plan leg is raised to the route's bottleneck, the smallest largest edge cost of any
  route, so only the safest way through is kept (the plan's rationale records each leg's threshold);
* every edge weighs ``steps + edge_penalty + safety_weight * cost``: ``safety_weight`` is the one knob of
  the trade-off, in control steps of detour accepted to avoid one predicted step of contact (0 = plain
  SoRB's shortest path among the edges kept).

**Practice** (``practice_routes``, 20 by default): the critic predicts each edge from a node's own state, and
is blind where the robot leaves a waypoint still moving on the last leg's heading and clips a door frame
(it predicted under one contact step on edges that pinned the robot against a frame for 20). So once the
graph is built, the planner drives that many routes between random points of the map in its own copy of
it, as a plan is executed, each planned on what the earlier ones found, and an edge's cost becomes the
larger of the critic's prediction and the contact steps it really cost. Cached with the graph. With
``practice_robots: randomized`` each practice route is driven by a robot drawn from the domain randomization
ranges the project trains with (``configs/env/wrappers/randomize.yaml``: heavier or lighter, more slippery,
weaker or stronger motors, noisier lidar, commands up to two periods late) instead of the nominal one, so the
practised costs also cover a robot that differs from the simulator, as a real one does.

Edges out of the robot's own state and into the task's goal are weighted but never pruned: the robot has
to leave where it is and reach the goal whatever they cost. Nothing here reads the map's walls, rooms or
doors: the critic sees the node's observation, the graph is SoRB's, and practice, like SoRB's state
collection, only drives the policy in the planner's simulator of the map. Plain ``sorb`` stays as it is,
for comparison.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Any

import networkx as nx
import numpy as np

from hrl import DEFAULT_POLICY
from hrl.safety_critic import SafetyCritic, randomized_env
from llm_planner.base import Feedback, Scene, Task
from llm_planner.plan import Plan, PlanError
from llm_planner.planners.common import WAYPOINT_TOLERANCE, step_budget
from llm_planner.planners.sorb import SoRBPlanner
from sim.navigation.world import Pose2D, World

DEFAULT_CRITIC = "shipped:rover_local_safety"
#: Which robot drives the practice routes: the simulator's nominal one, or one drawn per route from the
#: domain randomization preset.
PRACTICE_ROBOTS = ("nominal", "randomized")


class SafeSoRBPlanner(SoRBPlanner):
    name = "sorb_safe"

    def __init__(
        self,
        policy: Any = DEFAULT_POLICY,
        safety_critic: str | SafetyCritic = DEFAULT_CRITIC,
        safety_weight: float = 10.0,
        max_edge_cost: float = 2.0,
        headings: int = 4,
        practice_routes: int = 20,
        practice_robots: str = "nominal",
        **sorb_params: Any,
    ) -> None:
        """``sorb_params`` are plain SoRB's (n_nodes, collect_steps, max_edge_steps, edge_penalty, ...)."""
        super().__init__(policy=policy, **sorb_params)
        if isinstance(practice_routes, bool) or not isinstance(practice_routes, int) or practice_routes < 0:
            raise ValueError(f"practice_routes must be a whole number >= 0 (0: no practice), got {practice_routes!r}")
        self.practice_routes = practice_routes
        if practice_robots not in PRACTICE_ROBOTS:
            raise ValueError(f"practice_robots must be one of {', '.join(PRACTICE_ROBOTS)}, got {practice_robots!r}")
        self.practice_robots = practice_robots
        for label, value, low in (("safety_weight", safety_weight, 0.0), ("max_edge_cost", max_edge_cost, 0.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < low:
                raise ValueError(f"{label} must be a number >= {low:g} (contact steps), got {value!r}")
        if math.isinf(safety_weight):
            raise ValueError("safety_weight must be finite; to forbid every risky edge lower max_edge_cost instead")
        self.safety_weight = float(safety_weight)
        self.max_edge_cost = float(max_edge_cost)
        self.critic = (
            safety_critic if isinstance(safety_critic, SafetyCritic) else SafetyCritic.load(safety_critic, self.policy)
        )
        rays = self.critic.num_rays
        if isinstance(headings, bool) or not isinstance(headings, int) or headings < 1 or rays % headings:
            raise ValueError(
                f"headings must be a divisor of the lidar's {rays} rays (1, 2, 3, 4, 6, ...), got {headings!r}"
            )
        self.headings = headings
        self.thresholds: list[float] = []  # the pruning threshold of each leg of the last plan

    def _graph_params(self) -> dict[str, Any]:
        return {
            **super()._graph_params(),
            "critic_sha256": self.critic.digest(),
            "headings": self.headings,
            "practice_routes": self.practice_routes,
            **({"practice_robots": self.practice_robots} if self.practice_robots != "nominal" else {}),
        }

    def _nodes_and_edges(self, world: World, env: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """SoRB's nodes and edges with the critic's cost; after ``practice_routes`` practice drives, an edge's
        cost is the larger of the critic's and the contact steps it really cost (``practice``)."""
        nodes, edges = super()._nodes_and_edges(world, env)
        if self.practice_routes:
            edges["critic_cost"] = edges["cost"].copy()
            edges["practice"] = self._practice(world, env, nodes, edges)
            edges["cost"] = np.maximum(edges["critic_cost"], edges["practice"])
        return nodes, edges

    def _practice(self, world: World, env: Any, nodes: np.ndarray, edges: dict[str, np.ndarray]) -> np.ndarray:
        """Drive ``practice_routes`` routes between random far-apart free points of the map, in the planner's
        own copy of it, as a plan is executed (waypoints within their tolerance, the navigation domain's
        drive with its back-off recovery), each route planned on what the earlier ones found; return the
        wall-contact steps each edge cost when driven (its maximum; 0 where never driven or clean).

        The critic is blind where the robot leaves a waypoint at speed on a new heading and clips a door
        frame (docs/hierarchy.md): practice measures those edges instead of predicting them. The routes are
        the planner's own random draws (seeded), never a task's."""
        rng = np.random.default_rng([self.seed, 1])  # apart from the state collection's draws
        if self.practice_robots == "nominal":
            return self._drive_practice(world, env, nodes, edges, rng, None)
        randomized = randomized_env(self.policy, world)
        try:  # the robots have draws of their own, so the routes are the nominal practice's
            return self._drive_practice(world, randomized, nodes, edges, rng, np.random.default_rng([self.seed, 2]))
        finally:
            randomized.close()

    def _drive_practice(
        self,
        world: World,
        env: Any,
        nodes: np.ndarray,
        edges: dict[str, np.ndarray],
        rng: np.random.Generator,
        robots: np.random.Generator | None,
    ) -> np.ndarray:
        """The practice routes on ``env``; with ``robots``, a reset (a new robot) before each."""
        from hierarchy.navigation import ExecutorConfig, SubgoalExecutor

        contact = np.zeros(len(edges["i"]), np.float32)
        index = {(i, j): n for n, (i, j) in enumerate(zip(edges["i"].tolist(), edges["j"].tolist(), strict=True))}
        node_at = {(float(x), float(y)): k for k, (x, y) in enumerate(nodes[:, :2].tolist())}
        u = env.unwrapped
        executor = SubgoalExecutor(env, self.policy, ExecutorConfig())
        budget = step_budget(2.0)  # a plan's waypoint legs (llm_planner.planners.common.waypoint)
        graph = self._graph_from(nodes, edges)  # its costs and weights follow what practice finds, edge by edge
        for _ in range(self.practice_routes):
            start = world.sample_free(rng, 0.35)
            goal = world.sample_free(rng, u.task.goal_clearance)
            pose = Pose2D(start[0], start[1], float(rng.uniform(-math.pi, math.pi)))
            obs = u.observation_at(pose)
            try:
                path = self._path(graph, nodes, obs["observation"], (float(goal[0]), float(goal[1])))
            except PlanError:  # no route between these two: draw the next pair
                continue
            if robots is not None:  # a new robot for this route, then the route's start
                env.reset(seed=int(robots.integers(2**31)))
                obs = u.observation_at(pose)
            executor.start(obs)
            previous = None
            for p in path:
                here = node_at[p]
                before = executor.collisions
                reason, _ = executor.drive(p, WAYPOINT_TOLERANCE, budget, "practice", executor.steps + budget + 1)
                n = index.get((previous, here)) if previous is not None else None
                if n is not None and executor.collisions - before > contact[n]:
                    contact[n] = executor.collisions - before
                    self._set_cost(graph, edges, n, max(float(edges["cost"][n]), float(contact[n])))
                if reason != "reached":
                    break  # the robot is off its route: the next one starts afresh
                previous = here
        self.thresholds = []
        return contact

    def _set_cost(self, graph: nx.DiGraph, edges: dict[str, np.ndarray], n: int, cost: float) -> None:
        """Give edge ``n`` of ``edges`` a new cost in ``graph`` (and the weight that follows from it)."""
        data = graph.get_edge_data(int(edges["i"][n]), int(edges["j"][n]))
        if data is not None:
            data["cost"] = cost
            one = {k: v[n : n + 1] for k, v in edges.items()}
            data["weight"] = float(self._edge_weights({**one, "cost": np.float32([cost])})[0])

    def _edge_attributes(self, observations: np.ndarray, goals: np.ndarray) -> dict[str, np.ndarray]:
        if len(observations) == 0:
            return {"cost": np.zeros(0, np.float32)}
        return {"cost": self.critic.cost(observations, goals, self.headings).astype(np.float32)}

    def _edge_weights(self, edges: dict[str, np.ndarray]) -> np.ndarray:
        steps = edges["steps"]
        return np.where(
            steps <= self.max_edge_steps, steps + self.edge_penalty + self.safety_weight * edges["cost"], np.inf
        )

    def _direct_ok(self, edge: dict[str, np.ndarray]) -> bool:
        return super()._direct_ok(edge) and bool((edge["cost"] <= self.max_edge_cost).all())

    def _route(self, g: nx.DiGraph, target: tuple[float, float]) -> list[Any]:
        """Prune the graph's edges above the threshold, then the lightest path. The threshold is
        ``max_edge_cost``, raised to the route's bottleneck (the smallest maximum edge cost of any route)
        when every route has an edge above it: a door the robot must pass stays usable, and only the
        safest way through it is kept."""
        bottleneck = _bottleneck(g, "start", "goal")
        if math.isinf(bottleneck):
            return super()._route(g, target)  # no route at all: the base error says so
        threshold = max(self.max_edge_cost, bottleneck)
        g.remove_edges_from([(u, v) for u, v, c in g.edges(data="cost", default=0.0) if c > threshold])
        self.thresholds.append(threshold)
        return super()._route(g, target)

    def plan(self, task: Task, scene: Scene, feedback: Feedback | None = None) -> Plan:
        self.thresholds = []
        return super().plan(task, scene, feedback)

    def _rationale(self, graph: nx.DiGraph) -> str:
        limits = ", ".join(f"{t:.1f}" for t in self.thresholds) or "-"
        practiced = ""
        if self.practice_routes:
            found = sum(1 for *_, c in graph.edges(data="practice", default=0.0) if c > 0)
            practiced = f", {found} edges found touching walls in {self.practice_routes} practice routes"
        return (
            f"{super()._rationale(graph)}, edges predicted to touch walls for more than {limits} steps pruned "
            f"(max_edge_cost {self.max_edge_cost:g}, raised to a leg's bottleneck), "
            f"safety_weight {self.safety_weight:g}{practiced}"
        )

    def _reach_limits(self) -> str:
        return f"{super()._reach_limits()}, up to max_edge_cost={self.max_edge_cost:g} predicted contact steps"


def _bottleneck(g: nx.DiGraph, source: Any, target: Any, key: str = "cost") -> float:
    """The smallest possible largest edge ``key`` over the paths from source to target (inf: no path);
    Dijkstra with max in place of sum. Edges without the attribute count 0 (the robot's and goal's)."""
    best = {source: 0.0}
    heap = [(0.0, 0, source)]
    tie = itertools.count(1)  # nodes of mixed types ("start", ints) must never be compared
    while heap:
        b, _, u = heapq.heappop(heap)
        if u == target:
            return b
        if b > best[u]:
            continue
        for v, data in g[u].items():
            nb = max(b, float(data.get(key, 0.0)))
            if nb < best.get(v, math.inf):
                best[v] = nb
                heapq.heappush(heap, (nb, next(tie), v))
    return math.inf
