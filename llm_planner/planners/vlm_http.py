"""``vlm_http``: a vision-language model behind an OpenAI-compatible chat API looks at the tabletop's camera and
answers a :class:`~llm_planner.tabletop.TabletopPlan`.

What the model is given: a system prompt with the task, the answer's form and the *names* of the scene's blocks
and places (no colours, sizes or positions: it must look), then one user message of content parts: each camera's
picture (``cameras``, rendered at ``image_size`` through ``TabletopView.camera`` and sent as a base64 PNG
``image_url``, :mod:`llm_planner.llm.vision`) and the instruction. Servers: vLLM, Ollama, llama.cpp's
``llama-server`` with a vision projector (``--mmproj``), hosted APIs.

Everything after the request is the text planners' (:class:`~llm_planner.planners.llm.LLMPlanner`): the answer is
decoded under ``TabletopPlan.json_schema(scene.names())`` (``response_format``), parsed and checked against the
scene, sent back with the error when invalid (``max_attempts``, then a ``PlanError``), voted on
(``self_consistency``), cached and accounted; the backend's faults (HTTP errors, timeouts, a body that is not a
chat completion, a server that is down) are ``LLMError`` s after the client's bounded retries, and the hierarchy's
``Agent`` ends the episode with the cause before anything moves. The plan is grounded by the domain like any other.

After a failure the model looks again (``reprompt_on_failure``, the default): it is told the failure and what
was done, shown the cameras now and asked for the rest. With ``reprompt_on_failure=false`` the reading is kept
and the subgoals the executor reports reached are dropped from it (never the simulator's state: the planner
knows only what it sees and what it is told).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from llm_planner.llm.backend import Message
from llm_planner.llm.prompts import check_instruction
from llm_planner.llm.vision import OpenAIVisionBackend, check_rgb, image_part, text_part
from llm_planner.plan import PlanError
from llm_planner.planners.llm import LLMPlanner
from llm_planner.planners.llm_tabletop import TABLETOP_MAX_TOKENS, TabletopReader
from llm_planner.tabletop import TabletopPlan, TabletopView

#: Pixels per side of each camera image when not configured: what small VLMs are trained on (Qwen2-VL, SmolVLM
#: and LLaVA resize to 224-448), and ~40 kB of PNG.
IMAGE_SIZE = 224
#: Bounds of ``image_size``: the renderer's smallest image, and a size no server needs for a table of blocks.
MIN_IMAGE_SIZE, MAX_IMAGE_SIZE = 16, 1024


class CameraReader(TabletopReader):
    """The tabletop reading from camera images: the prompt of the module docstring, and what replanning keeps."""

    def __init__(self, planner: VLMHttpPlanner, max_tokens: int) -> None:
        super().__init__(planner, None, max_tokens)
        self.planner: VLMHttpPlanner = planner

    def plan(self, task: Any, scene: TabletopView, feedback: Any = None) -> TabletopPlan:
        if not isinstance(scene, TabletopView):
            raise TypeError(
                f"vlm_http plans for the tabletop from its camera; got a {type(scene).__name__} scene (a planner "
                "for the rover: llm_goals, graph)"
            )
        current = self._interpretation
        same_task = current is not None and current[:2] == (scene.scene, task.text)
        if feedback is not None and same_task and not self.planner.reprompt_on_failure:
            plan = current[2]  # type: ignore[index]
            left = plan.subgoals[_reached_in_order(plan, feedback.reached) :]
            if not left:
                raise PlanError("every subgoal the model planned was reached, but the task is not done")
            return TabletopPlan(subgoals=left, rationale=plan.rationale)
        if feedback is not None and same_task:  # look again: the plan tried, the failure, the cameras now
            render = self.planner.prompts.render
            messages = [
                self.system(task.text, scene),
                {"role": "user", "content": render("vlm_tabletop_user.j2", instruction=task.text)},
                {"role": "assistant", "content": current[2].to_json()},  # type: ignore[index]
                self._user(render("vlm_tabletop_feedback.j2", feedback=feedback), task.text, scene),
            ]
        else:
            messages = self.messages(task.text, scene)
        plan = self.ask(messages, scene)
        self._interpretation = (scene.scene, task.text, plan)
        return plan

    def messages(self, instruction: str, scene: TabletopView) -> list[Message]:
        """The system prompt, then the cameras' pictures and the instruction in one user message."""
        return [self.system(instruction, scene), self._user("", instruction, scene)]

    def system(self, instruction: str, scene: TabletopView) -> Message:
        """The task, the answer's form and the scene's names (the instruction is checked first: an empty one is
        refused before a camera renders or a request is sent)."""
        check_instruction(instruction)
        names = scene.names()
        content = self.planner.prompts.render(
            "vlm_tabletop_system.j2",
            cameras=list(self.planner.cameras),
            scene=scene.scene,
            objects=names["object"],
            places=names["place"],
        )
        return {"role": "system", "content": content}

    def _user(self, lead: str, instruction: str, scene: TabletopView) -> Message:
        render = self.planner.prompts.render
        parts: list[dict[str, Any]] = [text_part(lead)] if lead else []
        for camera, rgb in self.planner.images(scene):
            parts += [text_part(render("vlm_tabletop_camera.j2", camera=camera)), image_part(rgb)]
        parts.append(text_part(render("vlm_tabletop_user.j2", instruction=instruction)))
        return {"role": "user", "content": parts}  # type: ignore[dict-item]


def _reached_in_order(plan: TabletopPlan, reached: Sequence[str]) -> int:
    """How many of the plan's first subgoals the executor reported reached, in order."""
    done = 0
    for label in reached:
        if done < len(plan.subgoals) and label == plan.subgoals[done].label():
            done += 1
    return done


class VLMHttpPlanner(LLMPlanner):
    """``planner=vlm_http`` (see the module docstring). The server: ``base_url``, ``model``, ``api_key_env`` (the
    *name* of the variable holding the key), ``timeout_s``, ``max_retries`` and ``response_format`` as the
    ``openai`` backend's; what it sees: ``cameras`` (``front``, optionally ``wrist``) at ``image_size`` pixels."""

    domains = ("tabletop",)

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 2,
        response_format: str = "json_schema",
        cameras: Sequence[str] = ("front",),
        image_size: int = IMAGE_SIZE,
        constrained: bool = True,
        self_consistency: int = 1,
        temperature: float = 0.7,
        max_attempts: int = 3,
        max_tokens: int = TABLETOP_MAX_TOKENS,
        reprompt_on_failure: bool = True,
        cache: bool = True,
        cache_dir: str | None = None,
        template_dir: str | None = None,
        seed: int = 0,
    ) -> None:
        self.cameras = _cameras(cameras)
        if (
            isinstance(image_size, bool)
            or not isinstance(image_size, int)
            or not (MIN_IMAGE_SIZE <= image_size <= MAX_IMAGE_SIZE)
        ):
            raise ValueError(
                f"image_size must be a whole number of pixels in [{MIN_IMAGE_SIZE}, {MAX_IMAGE_SIZE}], got "
                f"{image_size!r} (e.g. {IMAGE_SIZE})"
            )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number >= 1, got {max_tokens!r} (e.g. {TABLETOP_MAX_TOKENS})")
        self.image_size = image_size
        backend = OpenAIVisionBackend(
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            timeout_s=timeout_s,
            max_retries=max_retries,
            response_format=response_format,
        )
        super().__init__(
            mode="llm_goals",
            reading="names",
            backend=backend,
            template_dir=template_dir,
            constrained=constrained,
            self_consistency=self_consistency,
            temperature=temperature,
            max_attempts=max_attempts,
            max_tokens=max_tokens,
            reprompt_on_failure=reprompt_on_failure,
            cache=cache,
            cache_dir=cache_dir,
            seed=seed,
        )
        self.mode = self.name = "vlm_http"  # named in errors ("vlm_http: no valid answer from ...")
        self.tabletop = CameraReader(self, max_tokens)

    def _plan(self, task: Any, scene: Any, feedback: Any) -> Any:
        return self.tabletop.plan(task, scene, feedback)

    def images(self, scene: TabletopView) -> list[tuple[str, np.ndarray]]:
        """Each configured camera's picture now, checked: (camera, (image_size, image_size, 3) uint8)."""
        if scene.camera is None:
            raise ValueError(
                f"scene {scene.scene!r} has no camera (TabletopView.camera is None), and vlm_http plans from camera "
                "images: observe a tabletop env that renders them (TabletopDomain.observe with env.camera_image), "
                "or choose a planner that reads the scene's symbols (llm_goals, symbolic)"
            )
        out = []
        for camera in self.cameras:
            shot = scene.camera(camera=camera, size=self.image_size, depth=False)
            rgb = getattr(shot, "rgb", None)
            if rgb is None:
                raise TypeError(
                    f"TabletopView.camera({camera!r}) returned a {type(shot).__name__}, not a camera image with .rgb "
                    "(sim.tabletop.physics.CameraImage)"
                )
            out.append((camera, check_rgb(rgb, self.image_size, f"camera {camera!r} image")))
        return out


def _cameras(cameras: Any) -> tuple[str, ...]:
    from sim.tabletop.physics import CAMERAS

    if isinstance(cameras, str) or not isinstance(cameras, Sequence) or not cameras:
        raise ValueError(f"cameras must be a non-empty list of camera names ({', '.join(CAMERAS)}), got {cameras!r}")
    for camera in cameras:
        if camera not in CAMERAS:
            raise ValueError(f"unknown camera {camera!r} in cameras; available: {', '.join(CAMERAS)}")
    if len(set(cameras)) != len(cameras):
        raise ValueError(f"cameras {list(cameras)} names one twice; list each camera once")
    return tuple(cameras)
