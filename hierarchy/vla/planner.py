"""``planner=vla``: the trained vision-language-action planner on the tabletop.

Step-wise, as SayCan: each call looks at the front camera (RGB + depth), reads the instruction and the TCP, and
answers the next step, ``place <object> on <target>`` (which the domain grounds into reach, grasp, carry and
release), or raises :class:`~llm_planner.plan.PlanDone` when it judges the task done. The network points with a
pick and a place heatmap; ``decode`` says how they name things. ``"things"`` (default): each candidate's own point
(a free block's top for the pick; another block's top or a place's centre for the place), projected through the
camera's pinhole model, is scored by the heatmap within one cell of it, and the best is named. ``"cell"``: the
argmax cell, lifted to 3-D with the depth image, names the block nearest that point (within ``pick_radius``) or
the block or place nearest it (``place_radius``); a point with nothing there is a
:class:`~llm_planner.plan.PlanError` that says where it pointed and what is nearest. Names and positions of the
scene's things are used only for that naming step (the skills take an object's name); what to do, with what and
where, comes from the image. A robot has the same: its perception publishes the objects' poses.

The instruction's token embeddings are computed once per instruction; ``last_usage`` holds the time of the last
plan (camera, network, lifting) in milliseconds.

**Consulting a language planner** (``consult="llm_goals"``): at a task's first step the named planner (built as
``planner=<name>`` configures it) reads the instruction against the scene once and answers a whole plan; at every
step its next subgoal that does not hold yet is a *hint*. The VLA's scores over the candidates (log-softmax of each
thing's heatmap logit) get ``consult_weight`` added for the hinted block and, when that block is the one picked, for
the hinted target; the done logit gets ``consult_done_weight`` added when every hinted subgoal holds and subtracted
otherwise. Weight 0 is the VLA alone; a large weight follows the language planner's reading wherever it has one.
A language planner that fails to answer leaves the VLA alone for that task (``last_usage["hint"]`` says why). It
costs one language-model call per task (~1 s on 2 cores for ``llm_goals``), the plans after it the VLA's time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from llm_planner.plan import PlanDone, PlanError
from llm_planner.planners.llm_tabletop import holds_in
from llm_planner.tabletop import PlaceSubgoal, TabletopPlan, TabletopTask, TabletopView


def resolve_model(spec: str | Path) -> Path:
    """``shipped:<name>`` (hrl/policies/<name>/model.pt) or a path to a model.pt / a run directory."""
    spec = str(spec)
    if spec.startswith("shipped:"):
        from hrl.policy import shipped_file

        return shipped_file(spec, "model.pt", "VLA model")
    path = Path(spec)
    if path.is_dir():
        path = path / "model.pt"
    if not path.is_file():
        raise ValueError(
            f"VLA model {spec!r} not found; give a model.pt (hrl-vla stage=bc writes one) or shipped:<name>"
        )
    return path


#: How a heatmap names a thing: "cell", its best cell lifted to 3-D with depth and the thing nearest it (within a
#: radius, else a PlanError); "things", the thing whose own point (projected into the image) scores highest.
DECODES = ("cell", "things")


class VLAPlanner:
    name = "vla"
    domains = ("tabletop",)
    stepwise = True

    def __init__(
        self,
        model: str = "shipped:vla_tabletop",
        camera: str = "front",
        max_steps: int = 8,
        pick_radius: float = 0.05,
        place_radius: float = 0.06,
        done_threshold: float = 0.7,
        threads: int | None = None,
        decode: str = "things",
        consult: str | None = None,
        consult_weight: float = 2.0,
        consult_done_weight: float | None = None,
        consult_params: dict[str, Any] | None = None,
    ) -> None:
        import torch

        from hierarchy.vla.model import NetConfig, VLANet
        from hierarchy.vla.text import text_encoder

        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if not (pick_radius > 0 and place_radius > 0):
            raise ValueError(f"pick_radius and place_radius must be > 0 m, got {pick_radius}, {place_radius}")
        if decode not in DECODES:
            raise ValueError(f"decode must be one of {', '.join(DECODES)}, got {decode!r}")
        self.decode = decode
        self.consult = None
        if consult is not None:
            self.consult = _consulted(consult, decode, consult_params or {})
        for key, weight in (("consult_weight", consult_weight), ("consult_done_weight", consult_done_weight)):
            if weight is not None and not (isinstance(weight, int | float) and np.isfinite(weight) and weight >= 0):
                raise ValueError(f"{key} must be a number >= 0 (0: the VLA alone), got {weight!r}")
        self.consult_weight = float(consult_weight)
        self.consult_done_weight = float(consult_weight if consult_done_weight is None else consult_done_weight)
        self._hint: tuple[Any, list[Any] | None, str] | None = None  # (task key, the consulted plan, why none)
        if threads:
            torch.set_num_threads(int(threads))
        self.path = resolve_model(model)
        state = torch.load(self.path, map_location="cpu", weights_only=False)
        if not isinstance(state, dict) or "state_dict" not in state or "net" not in state:
            raise ValueError(f"{self.path} is not a VLA model (hrl-vla stage=bc writes model.pt)")
        self.net = VLANet(NetConfig(**state["net"]))
        self.net.load_state_dict(state["state_dict"])
        self.meta = {k: v for k, v in state.items() if k != "state_dict"}  # what model.pt says of itself
        self.net.eval()
        self.size = self.net.cfg.image_size
        # models before text_encoder existed were all trained on SmolLM2's input embeddings
        self.embeddings = text_encoder(state.get("text", {}).get("kind", "smollm2_embeddings"))
        want = state.get("text", {}).get("fingerprint")
        if want and want != self.embeddings.fingerprint:
            raise ValueError(
                f"{self.path} was trained on other token embeddings ({state['text'].get('source')}); "
                f"this process has {self.embeddings.source}"
            )
        self.camera, self.max_steps = camera, max_steps
        self.pick_radius, self.place_radius, self.done_threshold = pick_radius, place_radius, done_threshold
        from hierarchy.vla.train import TextCache

        self.text = TextCache(self.embeddings)
        self.steps = 0
        self.last_usage: dict[str, Any] = {}
        self.last_points: dict[str, Any] = {}

    def reset(self) -> None:
        self.steps = 0
        self._hint = None

    def hint(self, task: TabletopTask, scene: TabletopView) -> tuple[PlaceSubgoal | None, bool | None]:
        """The consulted planner's next subgoal that does not hold in ``scene`` (None when every one holds, or when
        there is no reading), and whether its plan is complete (None: no reading). The plan is asked for once per
        task: at its first step, so the language planner reads the scene the task started in."""
        if self.consult is None:
            return None, None
        key = (scene.scene, task.text)
        if self._hint is None or self._hint[0] != key:
            try:
                plan = self.consult.plan(task, scene)
                self._hint = (key, list(plan.subgoals), "")
            except PlanError as err:
                self._hint = (key, None, f"{self.consult.name} gave no plan: {err}")
        plan = self._hint[1]
        if plan is None:
            return None, None
        left = [s for s in plan if not holds_in(s, scene)]
        if not left:
            return None, True
        return (left[0] if isinstance(left[0], PlaceSubgoal) else None), False

    # -- planning -----------------------------------------------------------------------------------------
    def plan(self, task: TabletopTask, scene: TabletopView, feedback: Any = None) -> TabletopPlan:
        from llm_planner.llm.prompts import check_instruction

        text = check_instruction(task.text)
        if scene.camera is None:
            raise ValueError("planner vla needs a camera image; this scene offers none (TabletopView.camera is None)")
        if self.steps >= self.max_steps:
            raise PlanDone(f"{self.max_steps} steps taken (max_steps)")
        t0 = time.perf_counter()
        image = scene.camera(self.camera, self.size, depth=True)
        t1 = time.perf_counter()
        width = scene.finger_width if scene.finger_width is not None else 0.08
        hint = self.hint(task, scene)
        plan = self.plan_image(text, image, np.array([*scene.tcp, width], dtype=np.float32), scene, hint)
        self.last_usage["camera_ms"] = round((t1 - t0) * 1000, 2)
        self.steps += 1
        return plan

    def plan_image(
        self,
        text: str,
        image: Any,
        proprio: np.ndarray,
        scene: TabletopView,
        hint: tuple[PlaceSubgoal | None, bool | None] = (None, None),
    ) -> TabletopPlan:
        """The next step from one camera image (``CameraImage`` with depth) and the proprioception (4,); ``hint``
        is :meth:`hint`'s (the consulted planner's next subgoal, and whether its plan is complete)."""
        import torch

        rgb, depth = np.asarray(image.rgb), image.depth
        if rgb.shape != (self.size, self.size, 3) or rgb.dtype != np.uint8:
            raise ValueError(
                f"the VLA takes a {self.size}x{self.size} RGB image of uint8 (shape ({self.size}, {self.size}, 3)), "
                f"got shape {rgb.shape} of {rgb.dtype}; render the camera at {self.size} px"
            )
        if depth is None or np.asarray(depth).shape != (self.size, self.size):
            got = None if depth is None else np.asarray(depth).shape
            raise ValueError(f"the VLA needs the depth image ({self.size}, {self.size}) in metres, got {got}")
        proprio = np.asarray(proprio, dtype=np.float32)
        if proprio.shape != (4,) or not np.all(np.isfinite(proprio)):
            raise ValueError(f"proprioception must be 4 finite numbers (TCP x, y, z, finger width), got {proprio}")
        t0 = time.perf_counter()
        pick_logits, place_logits, done_logit = self.forward(text, rgb, depth, proprio)
        step, complete = hint
        done_logit = float(done_logit[0]) + self.done_bonus(complete)
        done = float(torch.sigmoid(torch.tensor(done_logit)))
        t1 = time.perf_counter()
        self.last_usage = {"model_ms": round((t1 - t0) * 1000, 2), "done": round(done, 3)}
        if self.consult is not None:
            self.last_usage["hint"] = "done" if complete else (step.label() if step else self._hint_why())
        if done >= self.done_threshold:
            raise PlanDone(f"vla: done (p = {done:.2f})")
        obj, on = self.name_step(pick_logits[0].numpy(), place_logits[0].numpy(), image, scene, step)
        self.last_usage["lift_ms"] = round((time.perf_counter() - t1) * 1000, 2)
        if self.decode == "things":
            why = f"the pick heatmap's best thing {obj}, the place heatmap's {on}"
        else:
            (pu, pv), (qu, qv) = self.last_points["pick_uv"], self.last_points["place_uv"]
            why = f"pick at pixel ({pu:.0f}, {pv:.0f}), place at ({qu:.0f}, {qv:.0f})"
        if self.consult is not None:
            why += f"; {self.consult.name}'s next step {self.last_usage['hint']}"
        return TabletopPlan(subgoals=[PlaceSubgoal(object=obj, on=on)], rationale=f"vla: {why}; done p = {done:.2f}")

    def done_bonus(self, complete: bool | None) -> float:
        """What the consulted plan adds to the done logit: +weight when all of it holds, -weight when not, 0
        without a reading."""
        if complete is None:
            return 0.0
        return self.consult_done_weight if complete else -self.consult_done_weight

    def _hint_why(self) -> str:
        if self._hint is not None and self._hint[1] is None:
            return f"none ({self._hint[2]})"
        return "none (not a place)"

    def name_step(
        self,
        pick_logits: np.ndarray,
        place_logits: np.ndarray,
        image: Any,
        scene: TabletopView,
        hint: PlaceSubgoal | None = None,
    ):
        """(object, target) named by the two heatmaps ((S/2, S/2) logits each) as ``decode`` says; a ``hint``
        (``decode="things"`` only) adds ``consult_weight`` to its block's score, and to its target's when that
        block is the one picked."""
        if self.decode == "things":
            tops = self._tops(scene)
            free = [o.name for o in scene.objects if o.on != "gripper"] or list(tops)
            bonus = {hint.object: self.consult_weight} if hint is not None else {}
            obj = _best_thing(pick_logits, image, {k: tops[k] for k in free}, "pick", bonus)
            targets = {k: v for k, v in tops.items() if k != obj}
            targets.update({p.name: np.array([*p.center, 0.0]) for p in scene.places})
            bonus = {hint.on: self.consult_weight} if hint is not None and hint.object == obj else {}
            return obj, _best_thing(place_logits, image, targets, "place", bonus)
        (pu, pv), (qu, qv) = (_best_cell(pick_logits), _best_cell(place_logits))
        pick, place = image.lift(pu, pv), image.lift(qu, qv)
        self.last_points = {"pick_uv": (pu, pv), "place_uv": (qu, qv), "pick": pick, "place": place}
        obj = self._pick_name(pick, scene)
        return obj, self._place_name(place, scene, obj)

    def forward(self, text: str, rgb: np.ndarray, depth: np.ndarray, proprio: np.ndarray) -> tuple:
        """The network on one image (no gradients): pick and place logits (1, S/2, S/2), done logit (1,)."""
        import torch

        from hierarchy.vla.model import pad_tokens

        tokens, mask = pad_tokens([self.text(text)])
        with torch.no_grad():
            return self.net(
                torch.from_numpy(rgb[None].copy()),
                torch.from_numpy(np.asarray(depth, dtype=np.float32)[None]),
                torch.from_numpy(np.asarray(proprio, dtype=np.float32)[None]),
                tokens,
                mask,
            )

    @staticmethod
    def _tops(scene: TabletopView) -> dict[str, np.ndarray]:
        return {o.name: np.array(o.position) + np.array([0.0, 0.0, o.size / 2]) for o in scene.objects}

    def _pick_name(self, point: np.ndarray, scene: TabletopView) -> str:
        tops = self._tops(scene)
        free = [o.name for o in scene.objects if o.on != "gripper"] or list(tops)
        return _nearest(point, {k: tops[k] for k in free}, self.pick_radius, "pick", "block")

    def _place_name(self, point: np.ndarray, scene: TabletopView, picked: str) -> str:
        targets = {k: v for k, v in self._tops(scene).items() if k != picked}
        # a place counts by its centre on the table, with the radius widened by half its usual footprint
        spots = {p.name: np.array([*p.center, 0.0]) for p in scene.places}
        if not np.all(np.isfinite(point)):
            return _nearest(point, targets, self.place_radius, "place", "block or place")
        best_obj = min(((float(np.linalg.norm(point - v)), k) for k, v in targets.items()), default=(np.inf, ""))
        best_place = min(((float(np.linalg.norm(point - v)), k) for k, v in spots.items()), default=(np.inf, ""))
        if best_obj[0] <= self.place_radius and best_obj[0] <= best_place[0]:
            return best_obj[1]
        if best_place[0] <= self.place_radius + 0.04:
            return best_place[1]
        return _nearest(point, {**targets, **spots}, self.place_radius, "place", "block or place")


def _best_cell(logits: np.ndarray) -> tuple[float, float]:
    """The best cell's centre as a full-resolution pixel (u, v), as ``hierarchy.vla.train.decode_cells``."""
    best = int(np.argmax(logits))
    w = logits.shape[1]
    return (best % w) * 2 + 1.0, (best // w) * 2 + 1.0


def _best_thing(
    logits: np.ndarray, image: Any, candidates: dict[str, np.ndarray], what: str, bonus: dict[str, float] | None = None
) -> str:
    """``decode="things"``: the candidate whose point (a block's top, a place's centre: where the demonstrations'
    labels were) sees the highest heatmap logit within one cell of its own, projected through the camera's
    nominal pinhole model. Out-of-view candidates are skipped. ``bonus`` (a consulted planner's hint) is added
    to the candidates' log-softmax scores."""
    if not candidates:
        raise PlanError(f"vla: nothing to {what} in this scene")
    h, w = logits.shape
    names = list(candidates)
    uv = image.project(np.stack([candidates[k] for k in names]))
    cols = np.floor(uv[:, 0] * w / image.size[0]).astype(int)
    rows = np.floor(uv[:, 1] * h / image.size[1]).astype(int)
    scores: dict[str, float] = {}
    for name, c, r in zip(names, cols.tolist(), rows.tolist(), strict=True):
        if 0 <= c < w and 0 <= r < h:
            scores[name] = float(logits[max(r - 1, 0) : r + 2, max(c - 1, 0) : c + 2].max())
    if not scores:
        raise PlanError(f"vla: no {what} candidate is in the camera's view ({', '.join(names)})")
    if bonus:
        top = max(scores.values())
        norm = top + float(np.log(sum(np.exp(v - top) for v in scores.values())))
        scores = {k: v - norm + bonus.get(k, 0.0) for k, v in scores.items()}
    return max(scores, key=scores.__getitem__)


def _consulted(name: str, decode: str, params: dict[str, Any]) -> Any:
    """The language planner ``consult`` names, built as ``planner=<name>`` configures it with ``params`` over it
    (:func:`hrl.eval.planner_arguments`)."""
    from hrl.eval import planner_arguments
    from llm_planner.base import planner_class

    if decode != "things":
        raise ValueError(f"consult={name!r} weighs the candidates decode='things' scores; got decode={decode!r}")
    if name == "vla":
        raise ValueError("consult names the planner the VLA consults; it cannot be vla itself (try llm_goals)")
    registered, kwargs = planner_arguments(name, params)
    cls = planner_class(registered)
    stepwise = getattr(cls, "stepwise", False)
    if "tabletop" not in getattr(cls, "domains", ()) or stepwise:
        raise ValueError(
            f"consult={name!r} must be a planner that reads a whole tabletop plan at once (llm_goals, symbolic); "
            f"{registered} is {'step-wise' if stepwise else 'not a tabletop planner'}"
        )
    return cls(**kwargs)


def _nearest(point: np.ndarray, candidates: dict[str, np.ndarray], radius: float, what: str, kind: str) -> str:
    if not np.all(np.isfinite(point)):  # a robot's depth image has holes (NaN, or 0 mm read as NaN)
        raise PlanError(f"vla: the depth image has no reading where it pointed to {what}; nothing can be named there")
    if not candidates:
        raise PlanError(f"vla: nothing to {what} in this scene")
    d, name = min((float(np.linalg.norm(point - v)), k) for k, v in candidates.items())
    if d > radius:
        x, y, z = point
        raise PlanError(
            f"vla: pointed at ({x:.2f}, {y:.2f}, {z:.2f}) to {what}, {d * 100:.0f} cm from the nearest {kind} "
            f"({name}); nothing to {what} there (radius {radius * 100:.0f} cm)"
        )
    return name
