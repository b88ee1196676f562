"""The tabletop domain: a Panda, named objects and places, and the learned skills that move them.

Tasks are ordered goals ``object on target`` (a target is another object or a place: a bin, a plate, a
zone); a task is done when all of them hold in the final state, after the arm has let go (:func:`holds`).
The subgoal vocabulary: ``pick(object)``, ``place(object, on)``, ``push(object, to)``, ``move_tcp(x, y, z)``
and ``gripper(open | close)``. Grounding turns each into skill calls of the shipped skills:

- ``pick``: ``panda_pick_place`` lifts the object to the carry height where it stands;
- ``place``: pick (the reach skill over the object, then as above), carry to ``HOVER`` over the target, lower
  onto it, then the scripted ``release``
  (open the fingers, rise straight up): carrying high and lowering last keeps the skill, which never saw
  another object, from sweeping through the tower it builds;
- ``push``: ``panda_push`` to the place's centre; ``move_tcp``: ``panda_reach``;
- ``gripper``: the scripted ``open`` / ``close``.

Targets are computed when a step starts (the block a tower is built on may have moved), a place's target is
the free slot of the place farthest from what is already in it, so sorting five blocks into three bins stacks
none on another.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hierarchy.domain import GroundedSubgoal, Outcome, SkillResult, Step
from llm_planner.plan import PlanError, _unknown
from llm_planner.tabletop import (
    GripperSubgoal,
    MoveTcpSubgoal,
    ObjectView,
    PickSubgoal,
    PlaceView,
    PushSubgoal,
    Relation,
    TabletopPlan,
    TabletopTask,
    TabletopView,
)
from sim.tabletop.env import GOAL_MODES, TCP_STEP, PandaTabletopEnv
from sim.tabletop.scene import BIN_WALL_THICKNESS
from sim.wrappers import set_goal

#: Carry height (m above the table) of a picked object, the clearance over a target before lowering, and the
#: height over an object from which the pick-and-place skill grasps it (the reach skill brings the open gripper).
CARRY_HEIGHT, HOVER, APPROACH = 0.12, 0.05, 0.1
#: How close a waypoint (lift, hover) and the final placement must be reached (m).
WAYPOINT_TOLERANCE, PLACE_TOLERANCE = 0.02, 0.01
#: ... and over a place, whose spots lie outside the skill's training goals (the release's servo corrects it).
HOVER_TOLERANCE = 0.03
#: ``on`` holds when the object's centre is this close (m) horizontally to the centre of the one below and its
#: height is that of resting on it within ``ON_HEIGHT``; in a place, when it rests inside the place.
ON_XY, ON_HEIGHT = 0.02, 0.012
#: The release: fingers opened over ``OPEN_STEPS``, then the TCP rises ``RETREAT`` m at ``RETREAT_SPEED``
#: (action units): a full-speed rise drags the object sideways with the opened fingers.
OPEN_STEPS, RETREAT, RETREAT_SPEED = 4, 0.1, 0.3
#: Before letting go, the held object is servoed onto its goal within ``ALIGN_TOLERANCE`` (m), for at most
#: ``ALIGN_STEPS`` steps at ``ALIGN_SPEED`` (action units).
ALIGN_TOLERANCE, ALIGN_STEPS, ALIGN_SPEED = 0.003, 30, 0.2
#: ... held this far (m) above where it rests (and its fingertips, ``FINGERTIPS`` below the TCP, this far above
#: what it will rest on), so that aligning does not drag what is below.
ALIGN_ABOVE, FINGERTIPS = 0.004, 0.007
#: A spot in a place keeps the object this far (m) inside it; in a bin the opened fingers reach ``FINGER_REACH``
#: (m) either side of the object's centre along y.
SLOT_MARGIN, FINGER_REACH = 0.005, 0.05
#: A skill that has not come ``STUCK_PROGRESS`` m closer over ``STUCK_WINDOW`` steps is stuck.
STUCK_WINDOW, STUCK_PROGRESS = 25, 0.005
#: The skills a tabletop plan uses, by the shipped policy's name.
SKILLS = {"pick_place": "shipped:panda_pick_place", "push": "shipped:panda_push", "reach": "shipped:panda_reach"}


# ---- the domain -------------------------------------------------------------------------------------------
def make_env(scene: str = "blocks", backend: str = "mujoco", **kwargs: Any) -> PandaTabletopEnv:
    """The env the tabletop hierarchy runs in: pick-and-place mode (the gripper free), no time limit of its own."""
    return PandaTabletopEnv(scene, backend=backend, goal_mode="pick_place", max_steps=10**9, **kwargs)


@dataclass
class TabletopDomain:
    """Grounding, skills, progress and the end of an episode for the tabletop (see the module docstring)."""

    skills: dict[str, Any] = field(default_factory=dict)
    name: str = "tabletop"
    plan_model: Any = TabletopPlan

    @classmethod
    def with_skills(cls, skills: dict[str, str] | None = None, device: str = "cpu") -> TabletopDomain:
        """The domain with learned skills loaded (``skills``: name -> policy spec, defaults :data:`SKILLS`)."""
        from hrl.policy import GoalPolicy

        loaded: dict[str, Any] = {}
        for name, spec in {**SKILLS, **(skills or {})}.items():
            loaded[name] = LearnedSkill.from_policy(GoalPolicy.load(spec, device=device))
        return cls(skills={**loaded, **SCRIPTED})

    # -- scene ----------------------------------------------------------------------------------------
    def observe(self, env: Any) -> TabletopView:
        env = env.unwrapped
        held = holding(env)
        objects = tuple(
            ObjectView(
                o.name,
                o.color,
                max(o.size),
                tuple(float(v) for v in env.physics.object_state(o.name).position),
                "gripper" if o.name == held else resting_on(env, o.name),
            )
            for o in env.scene.objects
        )
        places = tuple(PlaceView(p.name, p.kind, p.color, p.center) for p in env.scene.places)
        tcp = tuple(float(v) for v in env.tcp()[0])
        return TabletopView(
            env.scene.name,
            objects,
            places,
            tcp,
            held,
            skill_observation=env.observation_as,
            finger_width=float(env.physics.finger_width()),
            camera=getattr(env, "camera_image", None),
        )

    # -- grounding ------------------------------------------------------------------------------------
    def ground(self, plan: TabletopPlan, scene: TabletopView) -> list[GroundedSubgoal]:
        out = []
        for i, sub in enumerate(plan.subgoals):
            try:
                out.append(GroundedSubgoal(sub.label(), self._steps(sub, scene)))
            except PlanError as err:
                raise PlanError(f"subgoal {i + 1} ({sub.label()}): {err}") from None
        return out

    def _steps(self, sub: Any, scene: TabletopView) -> tuple[Step, ...]:
        names = scene.names()
        if isinstance(sub, GripperSubgoal):
            return (Step(sub.command, _here, label=sub.command),)
        if isinstance(sub, MoveTcpSubgoal):
            self._need("reach")
            return (Step("reach", _fixed((sub.x, sub.y, sub.z)), tolerance=WAYPOINT_TOLERANCE, label="reach"),)
        obj = _known("object", sub.object, names["object"])
        if isinstance(sub, PickSubgoal):
            self._need("pick_place")
            self._need("reach")
            return _pick(obj)
        if isinstance(sub, PushSubgoal):
            self._need("push")
            to = _known("place", sub.to, names["place"])
            return (Step("push", lambda env: _slot(env, obj, to), obj, WAYPOINT_TOLERANCE, 80, f"push to {to}"),)
        self._need("pick_place")
        self._need("reach")
        on = _known("object or place", sub.on, names["object"] + names["place"])
        if on == obj:
            raise PlanError(f"cannot place {obj!r} on itself")
        target = (lambda env: _on_top(env, obj, on)) if on in names["object"] else (lambda env: _slot(env, obj, on))
        if sub.via == "direct":
            return (Step("pick_place", target, obj, PLACE_TOLERANCE, 80, f"onto {on}"), Step("release", target, obj))
        hover = lambda env: target(env) + np.array([0.0, 0.0, HOVER])  # noqa: E731
        # Onto an object the skill lowers it; into a place the release's servo does: the skill's goals were drawn
        # from the 30 x 30 cm workspace, and the places lie outside it, where it carries well but lowers badly.
        lower = (Step("pick_place", target, obj, PLACE_TOLERANCE, 40, f"onto {on}"),) if on in names["object"] else ()
        return (
            *_pick(obj),
            Step("pick_place", hover, obj, WAYPOINT_TOLERANCE if lower else HOVER_TOLERANCE, 60, f"over {on}"),
            *lower,
            Step("release", target, obj, label="release"),
        )

    def _need(self, skill: str) -> None:
        if skill not in self.skills:
            raise PlanError(f"no {skill!r} skill is loaded; the domain has {', '.join(sorted(self.skills))}")

    # -- judging --------------------------------------------------------------------------------------
    def progress(self, task: TabletopTask, env: Any) -> int:
        """How many of the task's goals hold now, counted in order (the first that does not hold stops it)."""
        done = 0
        for goal in task.goals:
            if not holds(env, goal):
                break
            done += 1
        return done

    def finish(self, env: Any, max_steps: int, on_step: Callable[[], None]) -> None:
        """Let go of whatever is held, so the final state is judged with the arm out of the way."""
        if holding(env.unwrapped) is not None or env.unwrapped.physics.finger_width() < 0.01:
            # the domain's own release (on a robot, the planner's proxy that forwards it to the arm's node)
            self.skills.get("release", SCRIPTED["release"]).run(env, Step("release", _here), max_steps, on_step)


def _known(kind: str, name: str, names: list[str]) -> str:
    if name in names:
        return name
    lowered = {n.lower(): n for n in names}
    if name.strip().lower() in lowered:
        return lowered[name.strip().lower()]
    raise PlanError(_unknown(kind, name, names))


def _pick(obj: str) -> tuple[Step, Step]:
    """Over the object at the carry height first (the reach skill: the fingers come down from above, not through
    whatever stands between), then grasp and lift it to the carry height."""

    def above(env: Any) -> np.ndarray:
        p = env.unwrapped.physics.object_state(obj).position
        return np.array([p[0], p[1], p[2] + APPROACH])

    def lifted(env: Any) -> np.ndarray:
        p = env.unwrapped.physics.object_state(obj).position
        return np.array([p[0], p[1], max(CARRY_HEIGHT, p[2])])

    def held(env: Any) -> bool:
        return holding(env.unwrapped) == obj

    return (
        Step("reach", above, None, WAYPOINT_TOLERANCE, 40, "over it", gripper=1.0, skip=held),
        Step("pick_place", lifted, obj, WAYPOINT_TOLERANCE, 60, "lift"),
    )


def _fixed(point: tuple[float, float, float]) -> Callable[[Any], np.ndarray]:
    return lambda env: np.asarray(point, dtype=float)


def _here(env: Any) -> np.ndarray:
    return env.unwrapped.tcp()[0].copy()


def _on_top(env: Any, obj: str, below: str) -> np.ndarray:
    e = env.unwrapped
    p = e.physics.object_state(below).position
    return np.array([p[0], p[1], p[2] + e.scene.object(below).size[2] / 2 + e.scene.object(obj).size[2] / 2])


def _slot(env: Any, obj: str, place: str) -> np.ndarray:
    """Where ``obj`` goes in ``place``: of a grid of spots inside it, the one farthest from the other objects. In a
    bin the spots keep the opened fingers (``FINGER_REACH`` either side of the object, along y) off the walls."""
    e = env.unwrapped
    p, o = e.scene.place(place), e.scene.object(obj)
    inset = BIN_WALL_THICKNESS if p.kind == "bin" else 0.0
    hx = p.size[0] / 2 - inset - o.size[0] / 2 - SLOT_MARGIN
    hy = p.size[1] / 2 - inset - (FINGER_REACH if p.kind == "bin" else o.size[1] / 2 + SLOT_MARGIN)
    xs = np.linspace(-hx, hx, 5) if hx > 0 else np.zeros(1)
    ys = np.linspace(-hy, hy, 3) if hy > 0 else np.zeros(1)
    spots = np.array([(p.center[0] + x, p.center[1] + y) for x in xs for y in ys])
    others = [e.physics.object_state(n.name).position[:2] for n in e.scene.objects if n.name != obj]
    if others:
        gap = np.min(np.linalg.norm(spots[:, None, :] - np.asarray(others)[None], axis=-1), axis=1)
        best = spots[int(np.argmax(np.round(gap, 3) - 1e-3 * np.linalg.norm(spots - p.center, axis=1)))]
    else:
        best = np.asarray(p.center)
    return np.array([best[0], best[1], p.surface_z + o.size[2] / 2])


# ---- judging the state ---------------------------------------------------------------------------------
def holding(env: PandaTabletopEnv) -> str | None:
    """The object between the closed fingers, if any."""
    tcp = env.tcp()[0]
    width = env.physics.finger_width()
    best, nearest = None, math.inf
    for o in env.scene.objects:
        p = env.physics.object_state(o.name).position - tcp
        between = np.hypot(p[0], p[1]) < max(o.size[:2]) / 2 and abs(p[2]) < o.size[2] / 2 + 0.005
        if between and width < min(o.size[:2]) + 0.005 and np.linalg.norm(p) < nearest:
            best, nearest = o.name, float(np.linalg.norm(p))  # the nearest: a tower's blocks are all under the TCP
    return best


def resting_on(env: PandaTabletopEnv, name: str) -> str | None:
    """The object or place ``name`` rests on (None: the bare table, or in the air)."""
    for other in env.scene.objects:
        if other.name != name and holds(env, Relation(name, other.name)):
            return other.name
    for place in env.scene.places:
        if holds(env, Relation(name, place.name)):
            return place.name
    return None


def holds(env: Any, goal: Relation) -> bool:
    """Whether ``goal.object`` rests on ``goal.on`` now (and is not in the gripper)."""
    e = env.unwrapped
    if holding(e) == goal.object:
        return False
    p = e.physics.object_state(goal.object).position
    size = e.scene.object(goal.object).size
    names = [o.name for o in e.scene.objects]
    if goal.on in names:
        below = e.physics.object_state(goal.on).position
        rest = below[2] + e.scene.object(goal.on).size[2] / 2 + size[2] / 2
        return bool(np.linalg.norm(p[:2] - below[:2]) < ON_XY and abs(p[2] - rest) < ON_HEIGHT)
    place = e.scene.place(goal.on)
    return bool(place.contains(p[:2]) and p[2] < place.surface_z + size[2] / 2 + ON_HEIGHT)


# ---- skills ------------------------------------------------------------------------------------------------
@dataclass
class LearnedSkill:
    """A goal-conditioned policy trained in one goal mode, run in the hierarchy's pick-and-place env: it sees the
    observation of its own mode (:meth:`~sim.tabletop.env.PandaTabletopEnv.observation_as`); a skill trained
    with a blocked gripper gets ``gripper`` appended to its actions (closed for pushing, held otherwise)."""

    policy: Callable[[dict[str, np.ndarray]], np.ndarray]
    goal_mode: str
    block_gripper: bool
    gripper: float = 0.0

    @classmethod
    def from_policy(cls, policy: Any) -> LearnedSkill:
        kwargs = dict(policy.env_config.kwargs or {})
        mode = kwargs.get("goal_mode", "reach")
        if mode not in GOAL_MODES:
            raise ValueError(f"policy {policy.path} was not trained on the tabletop (goal_mode {mode!r})")
        blocked = bool(kwargs.get("block_gripper", mode in ("reach", "push")))
        return cls(policy, mode, blocked, -1.0 if mode == "push" else 0.0)

    def run(self, env: Any, step: Step, max_steps: int, on_step: Callable[[], None]) -> SkillResult:
        e = env.unwrapped
        goal = np.asarray(step.goal(env), dtype=float)
        # through the env's wrappers (an ActionLatency in front of it does not define set_goal)
        set_goal(env, goal, object=step.object) if self.goal_mode != "reach" else set_goal(env, goal)
        best, best_at, k = math.inf, 0, 0
        budget = min(step.budget, max_steps)
        obs = e.observation_as(self.goal_mode, self.block_gripper)
        while True:
            d = float(np.linalg.norm(obs["achieved_goal"] - goal))
            if d < step.tolerance:
                return SkillResult(Outcome.REACHED, k, d)
            if k >= budget:
                return SkillResult(Outcome.EPISODE_LIMIT if k >= max_steps else Outcome.BUDGET, k, d)
            if d < best - STUCK_PROGRESS:
                best, best_at = d, k
            elif k - best_at >= STUCK_WINDOW:
                return SkillResult(Outcome.STUCK, k, d)
            action = np.asarray(self.policy(obs), dtype=float)
            if self.block_gripper:
                action = np.append(action, self.gripper if step.gripper is None else step.gripper)
            _, _, _, _, info = env.step(action)
            k += 1
            on_step()
            if info.get("failure") == "object_left_table":
                return SkillResult(Outcome.OBJECT_LEFT_TABLE, k, d)
            obs = e.observation_as(self.goal_mode, self.block_gripper)


@dataclass
class ScriptedSkill:
    """A primitive that needs no learning: ``open``/``close`` the fingers (the TCP held where it is), or
    ``release`` (servo the held object onto the step's goal, open, then rise straight up ``RETREAT`` m)."""

    kind: Literal["open", "close", "release"]

    def run(self, env: Any, step: Step, max_steps: int, on_step: Callable[[], None]) -> SkillResult:
        e = env.unwrapped
        k = 0
        if self.kind == "release" and step.object is not None and holding(e) == step.object:
            k = _align(env, step, max_steps, on_step)
        here = e.tcp()[0].copy()
        plan = [(here, 1.0 if self.kind != "close" else -1.0, 1.0)] * OPEN_STEPS
        if self.kind == "release":
            up = here + np.array([0.0, 0.0, RETREAT])
            up[2] = min(up[2], 0.5)
            plan += [(up, 1.0, RETREAT_SPEED)] * (math.ceil(RETREAT / (TCP_STEP * RETREAT_SPEED)) + 3)
        for k, (target, grip, speed) in enumerate(plan, start=k):  # noqa: B020 (counts on from the alignment)
            if k >= max_steps:
                return SkillResult(Outcome.EPISODE_LIMIT, k, float(np.linalg.norm(e.tcp()[0] - plan[-1][0])))
            move = np.clip((target - e.tcp()[0]) / TCP_STEP, -speed, speed)
            env.step(np.append(move, grip))
            on_step()
        return SkillResult(Outcome.REACHED, k + 1, float(np.linalg.norm(e.tcp()[0] - plan[-1][0])))


def _align(env: Any, step: Step, max_steps: int, on_step: Callable[[], None]) -> int:
    """Servo the held object onto the step's goal (the TCP moved by the object's error, slowly) until within
    ``ALIGN_TOLERANCE``: the learned skill stops within ~1 cm, and a block let go 1.5 cm off the centre of a 4 cm
    block tips off it."""
    e = env.unwrapped
    goal = np.asarray(step.goal(env), dtype=float)
    # The skill grasps an object where it finds it, often below its centre: the fingertips then reach below the
    # object's bottom and would land on the block underneath first. Hold it high enough that they clear it.
    half = e.scene.object(step.object).size[2] / 2
    grasp = e.tcp()[0][2] - e.physics.object_state(step.object).position[2]
    goal[2] = max(goal[2] + ALIGN_ABOVE, goal[2] - half + FINGERTIPS + ALIGN_ABOVE - grasp)
    for k in range(min(ALIGN_STEPS, max_steps)):
        error = goal - e.physics.object_state(step.object).position
        if np.linalg.norm(error) < ALIGN_TOLERANCE:
            return k
        if error[2] > ALIGN_TOLERANCE:
            error[:2] = 0.0  # up first: moving sideways while touching the block below drags it along
        elif np.hypot(error[0], error[1]) > 2 * ALIGN_TOLERANCE:
            error[2] = max(error[2], 0.0)  # over the spot, then down: the fingers clear a bin's walls
        env.step(np.append(np.clip(error / TCP_STEP, -ALIGN_SPEED, ALIGN_SPEED), -1.0))
        on_step()
    return min(ALIGN_STEPS, max_steps)


SCRIPTED: dict[str, ScriptedSkill] = {k: ScriptedSkill(k) for k in ("open", "close", "release")}  # type: ignore[misc]
