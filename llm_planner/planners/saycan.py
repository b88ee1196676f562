"""``saycan``: the language model says what is useful, the skill's critic what can be done (SayCan, Ahn et al. 2022).

Step-wise (the agent asks again after every subgoal). Each call lists the feasible next skills of the tabletop
(``place X on/in Y`` for every block with nothing on it and every clear target, and ``done``), and scores each:

- **say**: the language model's log-likelihood of the skill's text after the instruction and the steps so far
  (mean per token, from llama.cpp or the OpenAI-compatible server's logprobs), turned into a distribution
  over the candidates by a softmax;
- **can**: the pick-and-place skill's own critic on the current state, SB3's Q(s, pi(s, g), g) for the goal
  of that placement, read as the discounted chance of reaching it, gamma^T = 1 + (1 - gamma) Q (sparse
  -1/0 rewards), clipped to [0.001, 1]; ``done`` has affordance 1.

The product picks the step; ``done`` ends the episode (the final state is judged). Re-scored after each step,
so a block knocked off the tower makes re-placing it the likely next step. ``language=false`` (the "can" alone,
an ablation) never says done: ``max_steps`` ends it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from llm_planner.plan import PlanDone
from llm_planner.tabletop import PlaceSubgoal, TabletopPlan, TabletopTask, TabletopView

PROMPT = """A robot arm moves blocks on a table. It can place a block on another block, or in a place (a bin, a \
plate, a zone). For each task it lists the steps, one per line, then says done.

Task: put the green block on the yellow block.
1. place the green block on the yellow block
2. done

Task: build a tower with the blue block at the bottom, then the green block, then the red block.
1. place the green block on the blue block
2. place the red block on the green block
3. done

Task: tidy up: every block goes in the box.
1. place the red block in the box
2. place the green block in the box
3. done

Task: {task}
{steps}{n}."""

#: How a block goes onto each kind of target, as the candidates say it.
PREPOSITION = {"bin": "in", "zone": "in", "plate": "on", "object": "on"}


def spoken(name: str) -> str:
    """``red_block_1`` -> ``the red block 1``."""
    return "the " + name.replace("_", " ")


class SayCanPlanner:
    name = "saycan"
    domains = ("tabletop",)
    stepwise = True

    def __init__(
        self,
        backend: str | Any = "llama_cpp",
        backend_params: dict[str, Any] | None = None,
        skill: str = "shipped:panda_pick_place",
        language: bool = True,
        affordance: bool = True,
        max_steps: int = 12,
        device: str = "cpu",
    ) -> None:
        if not (language or affordance):
            raise ValueError("saycan needs the language score, the affordance or both; both are off")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if language:
            from llm_planner.llm.backend import make_backend

            self.backend = make_backend(backend, **(backend_params or {})) if isinstance(backend, str) else backend
            if not hasattr(self.backend, "score"):
                raise ValueError(f"LLM backend {getattr(self.backend, 'name', backend)!r} cannot score text")
        if affordance:
            from hrl.policy import GoalPolicy

            self.policy = GoalPolicy.load(skill, device=device)
            self.gamma = float(self.policy.model.gamma)
        self.language, self.affordance, self.max_steps = language, affordance, max_steps
        self.history: list[str] = []
        self.last_usage: dict[str, Any] = {}
        self.last_scores: list[dict[str, Any]] = []

    def reset(self) -> None:
        self.history = []

    def plan(self, task: TabletopTask, scene: TabletopView, feedback: Any = None) -> TabletopPlan:
        if feedback is not None and self.history:
            self.history[-1] += " (failed)"
        if len(self.history) >= self.max_steps:
            raise PlanDone(f"{self.max_steps} steps taken (max_steps)")
        options = candidates(scene)
        texts = [text for text, _ in options] + ["done"]
        say = np.ones(len(texts)) / len(texts)
        if self.language:
            prompt = PROMPT.format(
                task=task.text.strip(),
                steps="".join(f"{i + 1}. {h}\n" for i, h in enumerate(self.history)),
                n=len(self.history) + 1,
            )
            logp = np.asarray(self.backend.score(prompt, [" " + t for t in texts]))
            say = np.exp(logp - logp.max())
            say /= say.sum()
        can = np.ones(len(texts))
        if self.affordance:
            can[:-1] = [self._affordance(scene, sub) for _, sub in options]
        if not self.language:
            can[-1] = 0.0  # only the language model can say the task is done: without it, max_steps does
        total = say * can
        best = int(np.argmax(total))
        self.last_scores = [
            {"skill": t, "say": round(float(a), 4), "can": round(float(b), 4)}
            for t, a, b in zip(texts, say, can, strict=True)
        ]
        self.last_usage = {"candidates": len(texts)}
        if best == len(texts) - 1:
            raise PlanDone(f"done (say {say[best]:.2f})")
        text, sub = options[best]
        self.history.append(text)
        return TabletopPlan(subgoals=[sub], rationale=f"saycan: {text} (say {say[best]:.2f} x can {can[best]:.2f})")

    def _affordance(self, scene: TabletopView, sub: PlaceSubgoal) -> float:
        if scene.skill_observation is None:
            raise ValueError("saycan's affordances need the skill's observation; this scene offers none")
        obs = scene.skill_observation("pick_place", False, sub.object, placement_goal(scene, sub))
        return discounted_success(critic_value(self.policy.model, obs), self.gamma)


def candidates(scene: TabletopView) -> list[tuple[str, PlaceSubgoal]]:
    """Every feasible ``place``: a block with nothing on it onto a clear block or into a place, unless it is
    there already."""
    under = {o.on for o in scene.objects if o.on not in (None, "gripper")}
    out = []
    for o in scene.objects:
        if o.name in under:
            continue
        for t in scene.objects:
            if t.name != o.name and t.name not in under and o.on != t.name and t.on != o.name:
                out.append((f"place {spoken(o.name)} on {spoken(t.name)}", PlaceSubgoal(object=o.name, on=t.name)))
        for p in scene.places:
            if o.on != p.name:
                text = f"place {spoken(o.name)} {PREPOSITION.get(p.kind, 'on')} {spoken(p.name)}"
                out.append((text, PlaceSubgoal(object=o.name, on=p.name)))
    return out


def placement_goal(scene: TabletopView, sub: PlaceSubgoal) -> np.ndarray:
    """Where the placed block's centre would rest: on top of the target block, or at the place's centre."""
    obj = scene.object(sub.object)
    names = {o.name for o in scene.objects}
    if sub.on in names:
        below = scene.object(sub.on)
        return np.array([below.position[0], below.position[1], below.position[2] + below.size / 2 + obj.size / 2])
    place = next(p for p in scene.places if p.name == sub.on)
    return np.array([place.center[0], place.center[1], obj.size / 2])


def critic_value(model: Any, obs: dict[str, np.ndarray]) -> float:
    """SB3's Q(s, pi(s, g), g) (the smaller of the twin critics) for one observation dict."""
    import torch

    policy = model.policy
    tensor, _ = policy.obs_to_tensor(obs)
    with torch.no_grad():
        action = policy.actor(tensor, deterministic=True)
        q = torch.cat(policy.critic(tensor, action), dim=1).min(dim=1).values
    return float(q[0])


def discounted_success(q: float, gamma: float) -> float:
    """gamma^T from a sparse -1/0 critic, Q = -(1 - gamma^T) / (1 - gamma): the chance of success, discounted."""
    return float(min(1.0, max(1e-3, 1.0 + (1.0 - gamma) * q))) if math.isfinite(q) else 1e-3
