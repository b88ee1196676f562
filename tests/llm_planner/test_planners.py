"""One contract test for every registered map-based planner, and planner-specific behaviour.

The LLM planners read the instruction text, not the goals: tests/llm_planner/test_llm_*.py cover them."""

import math

import networkx as nx
import numpy as np
import pytest

from llm_planner.base import PLANNERS, Feedback, Scene, Task, make_planner, planner_class
from llm_planner.plan import Plan, PlanError, ground
from sim.navigation.world import Pose2D, load_world

CHEAP: dict = {}
MAP_PLANNERS = sorted(
    n
    for n in PLANNERS
    if not n.startswith("llm_") and "navigation" in getattr(planner_class(n), "domains", ("navigation",))
)


@pytest.fixture(scope="module")
def planners():
    return {name: make_planner(name, **CHEAP.get(name, {})) for name in MAP_PLANNERS}


@pytest.mark.parametrize("name", MAP_PLANNERS)
@pytest.mark.parametrize(
    ("map_name", "start", "goals"),
    [
        ("two_rooms", (1.0, 1.0), ("charging_dock",)),
        ("apartment", (2.0, 6.0), ("sofa", "desk")),
    ],
)
def test_planner_contract(planners, name, map_name, start, goals):
    """Every planner returns a valid, groundable plan that ends at each task goal in order."""
    world = load_world(map_name)
    planner = planners[name]
    assert planner.name == name
    plan = planner.plan(Task("go", goals), Scene(world, Pose2D(*start, 0.0)))
    assert isinstance(plan, Plan)
    grounded = ground(plan, world)
    assert grounded
    goal_points = [world.resolve(g).position for g in goals]
    ends = [s.xy for s in grounded]
    idx = 0
    for p in ends:
        if idx < len(goal_points) and math.dist(p, goal_points[idx]) < 1e-6:
            idx += 1
    assert idx == len(goal_points), f"{name} plan does not visit the goals in order: {ends}"
    assert math.dist(ends[-1], goal_points[-1]) < 1e-6
    # replanning with feedback also yields a valid plan
    fb = Feedback("point (1, 1)", "stuck", Pose2D(*start, 0.0), attempt=1, failed_point=ends[0])
    ground(planner.plan(Task("go", goals), Scene(world, Pose2D(*start, 0.0)), fb), world)


def test_unknown_planner_lists_registered():
    with pytest.raises(ValueError, match=r"unknown planner 'astar'; available: flat, graph, llm_goals, llm_route"):
        make_planner("astar")


def test_graph_route_passes_every_door_on_the_shortest_path():
    world = load_world("maze")
    plan = make_planner("graph").plan(Task("x", ("exit_sign",)), Scene(world, Pose2D(1.5, 1.5, 0.0)))
    points = [s.xy for s in ground(plan, world)]
    expected_doors = [
        n
        for n in nx.shortest_path(world.graph(), "start_hall", "goal_room")
        if world.graph().nodes[n]["kind"] == "door"
    ]
    waypoints = {d.name: d.waypoint for d in world.doors}
    visited = [d for d in expected_doors if any(math.dist(p, waypoints[d]) < 1e-6 for p in points)]
    assert visited == expected_doors
    # consecutive waypoints stay within the low-level policy's range, and never cross a wall
    prev = (1.5, 1.5)
    for p in points:
        assert math.dist(prev, p) <= 2.0 + 1e-6
        assert world.line_of_sight(prev, p)
        prev = p


def test_graph_avoids_a_door_that_failed():
    """After a failure at a door, the re-plan goes around it (the house has two loops of rooms) and still
    ends at the goal, through doors only, each leg free of walls."""
    world = load_world("house")
    planner = make_planner("graph")
    task, scene = Task("x", ("sofa",)), Scene(world, world.starts["dock"])
    doors = {d.name: d.waypoint for d in world.doors}

    def doors_on(plan):
        points = [s.xy for s in ground(plan, world)]
        return [name for p in points for name, w in doors.items() if math.dist(p, w) < 1e-6], points

    first, _ = doors_on(planner.plan(task, scene))
    failed = first[0]  # the robot got stuck at the first door of the shortest route
    fb = Feedback(f"door {failed}", "stuck", scene.robot_pose, attempt=1, failed_point=doors[failed])
    second, points = doors_on(planner.plan(task, scene, fb))
    assert failed not in second and second != first
    rooms = ["hallway"]  # the doors chain from the robot's room to the goal's
    for name in second:
        door = next(d for d in world.doors if d.name == name)
        assert rooms[-1] in door.rooms, (second, rooms)
        rooms.append(door.rooms[1] if door.rooms[0] == rooms[-1] else door.rooms[0])
    assert rooms[-1] == "living_room" and points[-1] == world.resolve("sofa").position
    for a, b in zip([scene.robot_xy, *points], points, strict=False):
        assert world.line_of_sight(a, b), (a, b)


def test_flat_plan_is_just_the_goals():
    world = load_world("apartment")
    plan = make_planner("flat").plan(Task("x", ("fridge", "sink")), Scene(world, Pose2D(6.0, 3.75, 0.0)))
    assert [s.xy for s in ground(plan, world)] == [(0.7, 7.2), (6.5, 0.7)]


def test_random_waypoints_are_free():
    world = load_world("apartment")
    plan = make_planner("random", waypoints_per_goal=4, seed=3).plan(
        Task("x", ("sink",)), Scene(world, Pose2D(2, 6, 0))
    )
    points = [s.xy for s in ground(plan, world)]
    assert len(points) == 5
    assert all(world.is_free(p, 0.3) for p in points[:-1])


def test_bad_planner_parameters():
    with pytest.raises(ValueError, match="spacing must be > 0"):
        make_planner("graph", spacing=0)
    with pytest.raises(ValueError, match="step_budget must be >= 1"):
        make_planner("flat", step_budget=0)


def test_sorb_graph_respects_cutoff_and_finds_path(planners):
    planner = planners["sorb"]  # default parameters, graph already built by the contract test
    world = load_world("two_rooms")
    graph, _, _ = planner.build_graph(world)
    assert graph.number_of_nodes() == planner.n_nodes and graph.number_of_edges() > 0
    cutoff = planner.max_edge_steps
    assert all(d["steps"] <= cutoff for _, _, d in graph.edges(data=True))  # cutoff respected
    # float32 critic outputs: equal to float32 precision
    assert all(
        d["weight"] == pytest.approx(d["steps"] + planner.edge_penalty, rel=1e-6) for *_, d in graph.edges(data=True)
    )
    # predicted distances grow with real distances on average (the critic is a distance estimate)
    w = np.array([d["steps"] for _, _, d in graph.edges(data=True)])
    e = np.array([math.dist(graph.nodes[u]["position"], graph.nodes[v]["position"]) for u, v in graph.edges()])
    assert np.corrcoef(w, e)[0, 1] > 0.5
    # no edge crosses the wall between the rooms except through the door gap
    for u, v in graph.edges():
        assert world.line_of_sight(graph.nodes[u]["position"], graph.nodes[v]["position"]), (u, v)
    plan = planner.plan(Task("x", ("charging_dock",)), Scene(world, Pose2D(1.0, 1.0, 0.0)))
    points = [s.xy for s in ground(plan, world)]
    assert len(points) >= 2 and points[-1] == (9.2, 0.8)


def test_sorb_nodes_keep_the_node_margin_free_around_them(planners):
    """Waypoints are visited states whose own scan shows robot radius + node_margin free all around; a margin
    no visited state satisfies is a clear error, not a silent fallback to nodes pressed against walls."""
    world = load_world("two_rooms")
    default = planners["sorb"]
    _, nodes, _ = default.build_graph(world)
    lidar = default.lidar
    free = nodes[:, 6:].min(axis=1) * lidar.max_range
    assert free.min() >= default.node_clearance - 1e-6
    small = {"collect_steps": 2000, "n_nodes": 100}
    wide = make_planner("sorb", **small, node_margin=0.5)
    _, wide_nodes, _ = wide.build_graph(world)
    assert (wide_nodes[:, 6:].min(axis=1) * lidar.max_range).min() >= wide.node_clearance - 1e-6 > free.min()
    impossible = make_planner("sorb", **small, node_margin=2.5)  # rooms are 5 m wide
    with pytest.raises(PlanError, match="lower node_margin"):
        impossible.build_graph(world)
    with pytest.raises(ValueError, match="node_margin must be a distance"):
        make_planner("sorb", node_margin=-0.1)
    with pytest.raises(ValueError, match="the lidar must be able to see it"):
        make_planner("sorb", node_margin=5.0)
