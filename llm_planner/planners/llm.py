"""``llm_goals`` and ``llm_route``: a language model reads the instruction and the scene and plans.

* ``llm_goals``: the model names the places the instruction asks for, in order, and the rooms it
  forbids; the ``graph`` planner routes between them (around the forbidden rooms).
* ``llm_route``: the model emits the whole route (doors, rooms, objects); it is checked against the
  map and every door is expanded into approach points.

``llm_goals`` also plans on the tabletop (:mod:`llm_planner.planners.llm_tabletop`): given a
:class:`~llm_planner.tabletop.TabletopView`, the model answers a ``TabletopPlan`` of the domain's subgoals.

Every call: prompt from Jinja2 templates (scene + retrieved worked examples + instruction), decoding
constrained to the answer's JSON schema with the scene's names as enums, parse + validate + ground.
An invalid answer is sent back with the error (at most ``max_attempts`` calls); with
``self_consistency`` > 1 the model is sampled k times and the most frequent valid answer wins. Answers
are cached by model + prompt + sampling settings (in memory, and on disk with ``cache_dir``). Tokens
and latency of the last ``CALLS_KEPT`` calls are kept in ``calls`` (bounded: a planner node runs for days);
``totals`` sums every call ever made, exactly; ``last_usage`` sums the last ``plan`` call.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections import Counter, OrderedDict, deque
from pathlib import Path
from typing import Any

from llm_planner.base import Feedback, Scene, Task
from llm_planner.llm.answers import (
    MAX_TARGETS,
    GoalsAnswer,
    RouteAnswer,
    answer_schema,
    match_phrase,
    next_schema,
    parse_answer,
    parse_spans,
    parse_tagged,
    phrase_end,
    place_schema,
    route_plan,
    span_schema,
    strip_article,
    tagged_schema,
)
from llm_planner.llm.backend import LLMBackend, LLMError, Message, make_backend
from llm_planner.llm.prompts import DEFAULT_EXAMPLES, ExampleBank, PromptBuilder, load_examples, robot_whereabouts
from llm_planner.plan import Plan, PlanError
from llm_planner.planners.graph import GraphPlanner, room_name
from llm_planner.planners.llm_tabletop import TABLETOP_MAX_TOKENS, TabletopReader
from llm_planner.tabletop import TabletopView
from sim.navigation.world import World

MODES = ("llm_goals", "llm_route")
#: How llm_goals reads an instruction: "names" (the model picks scene names) or "spans" (the model copies
#: the instruction's phrases for the targets; names/aliases ground them; the model is asked which place a
#: phrase means only when it names none outright), or "tagged" (the model lists every place the instruction
#: mentions, in the sentence's order, each tagged then / first / last / avoid / not; a fixed rule orders the
#: targets: llm_planner/llm/answers.py).
READINGS = ("names", "spans", "tagged")
#: Model calls kept in ``LLMPlanner.calls`` (the most recent); older ones leave it, their usage stays in ``totals``.
CALLS_KEPT = 1000
#: Answers kept in memory (least recently used dropped first), so a long-running node's cache stays bounded;
#: ``cache_dir`` keeps every answer on disk.
MEMORY_CACHE_KEPT = 4096
#: The running sums in ``LLMPlanner.totals``.
_TOTALS = ("calls", "llm_calls", "cache_hits", "prompt_tokens", "completion_tokens", "latency_s")


class LLMPlanner:
    domains: tuple[str, ...] = ("navigation",)

    def __init__(
        self,
        mode: str = "llm_goals",
        reading: str = "spans",
        follow_up: bool = True,
        backend: str | LLMBackend = "llama_cpp",
        backend_params: dict[str, Any] | None = None,
        template_dir: str | None = None,
        examples: str | None = None,
        n_examples: int = 4,
        retrieval: bool = True,
        constrained: bool = True,
        self_consistency: int = 1,
        temperature: float = 0.7,
        max_attempts: int = 3,
        max_tokens: int | None = None,
        reprompt_on_failure: bool | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        seed: int = 0,
        router: dict[str, Any] | None = None,
        robot_place: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown LLM planner mode {mode!r}; modes: {', '.join(MODES)}")
        if reading not in READINGS:
            raise ValueError(f"unknown reading {reading!r}; readings: {', '.join(READINGS)}")
        if n_examples < 0:
            raise ValueError(f"n_examples must be >= 0, got {n_examples}")
        if self_consistency < 1:
            raise ValueError(f"self_consistency must be >= 1 (samples per plan), got {self_consistency}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if robot_place and (mode != "llm_goals" or reading == "spans"):
            raise ValueError(
                f"robot_place=true says where the robot is in llm_goals' names or tagged reading; got mode={mode!r}, "
                f"reading={reading!r}: set reading=names or tagged (llm_route always says the robot's room)"
            )
        self.mode = mode
        self.name = mode
        self.reading = reading if mode == "llm_goals" else "names"
        self.follow_up = follow_up
        self.backend = backend if not isinstance(backend, str) else make_backend(backend, **(backend_params or {}))
        self.prompts = PromptBuilder(mode, template_dir, tagged=self.reading == "tagged")
        self.example_path = Path(examples) if examples else DEFAULT_EXAMPLES
        self._examples = load_examples(self.example_path)
        self._banks: dict[str, ExampleBank] = {}
        self.n_examples = n_examples
        self.retrieval = retrieval
        self.constrained = constrained
        self.self_consistency = self_consistency
        self.temperature = temperature
        self.max_attempts = max_attempts
        self.max_tokens = max_tokens or (128 if mode == "llm_route" or self.reading == "tagged" else 48)
        self.reprompt_on_failure = (mode == "llm_route") if reprompt_on_failure is None else reprompt_on_failure
        self.cache = cache
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.seed = seed
        self.router = GraphPlanner(**(router or {}))
        #: llm_goals, reading=names or tagged: say where the robot is before the instruction ("The robot is at the
        #: charging_dock, in the hallway."), as the post-trained model was trained (``hrl-posttrain``).
        self.robot_place = robot_place
        #: The last CALLS_KEPT model calls (prompt and completion tokens, answer, latency, cache hit, error).
        self.calls: deque[dict[str, Any]] = deque(maxlen=CALLS_KEPT)
        #: Sums over every call ever made (``calls`` keeps only the recent ones): calls, llm_calls, cache_hits,
        #: prompt_tokens, completion_tokens, latency_s.
        self.totals: dict[str, float] = dict.fromkeys(_TOTALS, 0)
        self.last_usage: dict[str, Any] = {}
        self.last_answer: GoalsAnswer | RouteAnswer | None = None
        self.last_text = ""  # the model's text of last_answer (in the reading's own form)
        self._memory: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._interpretation: tuple[str, str, GoalsAnswer] | None = None  # (map, text, answer) being executed
        self._said = ""  # the model's own text of that answer (what a re-prompt shows it)

    # -- the planner protocol -------------------------------------------------------------------------
    def plan(self, task: Task, scene: Scene, feedback: Feedback | None = None) -> Plan:
        start = dict(self.totals)
        try:
            return self._plan(task, scene, feedback)
        finally:
            self._count_usage(start)

    def _count_usage(self, start: dict[str, float]) -> None:
        """``last_usage``: what the calls since the ``totals`` were ``start`` cost."""
        new = {k: self.totals[k] - start[k] for k in _TOTALS}
        self.last_usage = {
            "tokens": new["prompt_tokens"] + new["completion_tokens"],
            "llm_calls": new["llm_calls"],
            "cache_hits": new["cache_hits"],
        }

    def reading_of(self, text: str, world_name: str) -> GoalsAnswer | None:
        """The model's reading (``targets`` in order, ``avoid``) of ``text`` on the map ``world_name``, as the
        plan being executed used it; None when it has not read that instruction (or reads routes: llm_route).
        A robot that has no gold reading judges the task by this one (hrl.ros.planner_node)."""
        current = self._interpretation
        return current[2] if current is not None and current[:2] == (world_name, text) else None

    def calls_since(self, count: int) -> list[dict[str, Any]]:
        """The calls made after the first ``count`` (a ``totals["calls"]`` read earlier), as far as ``calls``
        still holds them (a reader that waits for more than ``CALLS_KEPT`` new calls misses the oldest)."""
        new = min(int(self.totals["calls"]) - count, len(self.calls))
        return list(itertools.islice(self.calls, len(self.calls) - new, None)) if new > 0 else []

    def _record(self, call: dict[str, Any]) -> None:
        self.calls.append(call)
        self.totals["calls"] += 1
        self.totals["llm_calls"] += not call["cached"]
        self.totals["cache_hits"] += call["cached"]
        for key in ("prompt_tokens", "completion_tokens", "latency_s"):
            self.totals[key] += call[key]

    def _plan(self, task: Task, scene: Scene, feedback: Feedback | None) -> Plan:
        world = scene.world
        robot_room = room_name(world, scene.robot_xy)
        if self.mode == "llm_goals":
            answer = self._goals(task, world, robot_room, feedback, scene.robot_xy)
            done = _reached_in_order(answer.targets, world, feedback.reached if feedback else ())
            remaining = answer.targets[done:]
            if not remaining:
                raise PlanError("every target the model named is reached, but the task is not done")
            routed = Task(task.text, tuple(remaining), tuple(answer.avoid))
            return self.router.plan(routed, scene, feedback)
        messages = self._messages(task.text, world, robot_room)
        if feedback is not None and self.reprompt_on_failure:
            messages.append({"role": "assistant", "content": json.dumps({"route": self._last_route()})})
            messages.append({"role": "user", "content": self._feedback_text(task, feedback, robot_room)})
        answer = self.ask(messages, world, lambda a: route_plan(a, world, scene.robot_xy))
        assert isinstance(answer, RouteAnswer)
        return route_plan(answer, world, scene.robot_xy)

    def _goals(
        self, task: Task, world: World, robot_room: str, feedback: Feedback | None, robot_xy: Any = None
    ) -> GoalsAnswer:
        """The model's reading of the instruction; kept while the same task executes (replanning after a
        navigation failure re-routes, it does not re-read), unless ``reprompt_on_failure``."""
        current = self._interpretation
        same_task = current is not None and current[:2] == (world.name, task.text)
        said = self._said
        if feedback is not None and same_task and not self.reprompt_on_failure:
            return current[2]  # type: ignore[index]
        if self.reading == "spans":
            answer = self._read_spans(task.text, world)
        else:
            messages = self._messages(task.text, world, robot_room, robot_xy)
            if feedback is not None and same_task:
                messages.append({"role": "assistant", "content": said or current[2].model_dump_json()})  # type: ignore[index]
                messages.append({"role": "user", "content": self._feedback_text(task, feedback, robot_room)})
            answer = self._ask_goals(messages, world)
        assert isinstance(answer, GoalsAnswer)
        self._interpretation = (world.name, task.text, answer)
        self._said = self.last_text if self.reading != "spans" else ""
        return answer

    # -- asking the model ---------------------------------------------------------------------------
    def interpret(
        self, text: str, world: World, robot_room: str, robot_xy: tuple[float, float] | None = None
    ) -> GoalsAnswer | RouteAnswer:
        """One answer to ``text`` (no execution): used by the benchmark to score plan accuracy. ``robot_xy``:
        where the robot is (said in the prompt with ``robot_place``; else the centre of ``robot_room``)."""
        start = dict(self.totals)
        try:
            if self.reading == "spans":
                return self._read_spans(text, world)
            check = None
            if self.mode == "llm_route":
                point = world.room(robot_room).center
                check = lambda a: route_plan(a, world, point)  # noqa: E731
            if self.reading == "tagged":
                return self._ask_goals(self._messages(text, world, robot_room, robot_xy), world)
            return self.ask(self._messages(text, world, robot_room, robot_xy), world, check)
        finally:
            self._count_usage(start)

    def _ask_goals(self, messages: list[Message], world: World) -> GoalsAnswer | RouteAnswer:
        """llm_goals' answer in this planner's reading (names, or tagged mentions turned into names)."""
        if self.reading != "tagged":
            return self.ask(messages, world)
        schema = tagged_schema(world) if self.constrained else None
        return self.ask(messages, world, parse=lambda raw: parse_tagged(raw, world), schema=schema)

    def _bank(self, world: World) -> ExampleBank:
        if world.name not in self._banks:
            self._banks[world.name] = ExampleBank(self._examples, world)
        return self._banks[world.name]

    def _shots(self, text: str, world: World) -> list[Any]:
        bank = self._bank(world)
        return bank.nearest(text, self.n_examples) if self.retrieval else bank.first(self.n_examples)

    def _messages(self, text: str, world: World, robot_room: str, robot_xy: Any = None) -> list[Message]:
        robot_at = None
        if self.robot_place and self.mode == "llm_goals":
            xy = robot_xy if robot_xy is not None else world.room(robot_room).center
            robot_at = robot_whereabouts(world, (float(xy[0]), float(xy[1])))
        return self.prompts.messages(world, text, robot_room, self._shots(text, world), robot_at=robot_at)

    def _read_spans(self, text: str, world: World) -> GoalsAnswer:
        """reading=spans: the model copies the phrases; each is grounded by name/alias or, failing that,
        by asking the model which place it means."""
        messages = self.prompts.span_messages(text, self._bank(world), self._shots(text, world))
        span_messages = list(messages)
        schema = span_schema(text) if self.constrained else None

        def parse(raw: str) -> GoalsAnswer:
            spans = parse_spans(raw, text)
            found = list(spans.targets)
            cursor = 0
            for phrase in found:
                cursor = phrase_end(text, phrase, cursor)
            while self.follow_up and len(found) < MAX_TARGETS:  # ask for the place after the last one found
                choices = next_schema(text, cursor, list(spans.avoid))
                if choices is None:
                    break
                messages = self.prompts.next_messages(span_messages, found, list(spans.avoid))
                nxt = json.loads(self._complete(messages, choices, 0.0, self.seed, 1) or "{}").get("next", "none")
                if nxt == "none" or nxt not in choices["properties"]["next"]["enum"]:
                    break
                found.append(nxt)
                cursor = phrase_end(text, nxt, cursor)
            targets = [self._place(p, world, ("landmark", "room")) for p in found]
            avoid = [self._place(p, world, ("room",)) for p in spans.avoid]
            return parse_answer("llm_goals", GoalsAnswer(targets=targets, avoid=avoid).model_dump_json(), world)

        answer = self.ask(messages, world, parse=parse, schema=schema)
        assert isinstance(answer, GoalsAnswer)
        return answer

    def _place(self, phrase: str, world: World, kinds: tuple[str, ...]) -> str:
        name = match_phrase(phrase, world, kinds)
        if name is None and kinds == ("room",):  # "avoid the sofa": the room it stands in
            landmark = match_phrase(phrase, world, ("landmark",))
            name = world.resolve(landmark).room if landmark else None  # type: ignore[union-attr]
        if name is not None:
            return name
        messages = self.prompts.place_messages(world, strip_article(phrase), self._bank(world))
        raw = self._complete(messages, place_schema(world, kinds), 0.0, self.seed, 1)
        try:
            place = json.loads(raw)["place"]
            return parse_answer("llm_goals", json.dumps({"targets": [place], "avoid": []}), world).targets[0]
        except (ValueError, KeyError, TypeError, PlanError):
            raise PlanError(f"cannot tell which place {phrase!r} means") from None

    def ask(
        self,
        messages: list[Message],
        world: World | None,
        check: Any = None,
        parse: Any = None,
        schema: Any = "auto",
        max_tokens: int | None = None,
    ) -> GoalsAnswer | RouteAnswer:
        """Ask until a valid answer (at most ``max_attempts`` rounds, each of ``self_consistency``
        samples); PlanError with the last problem when none is valid. ``max_tokens``: per answer, when not
        the planner's (the tabletop's plans are longer)."""
        if schema == "auto":
            schema = answer_schema(self.mode, world) if self.constrained else None
        parse = parse or (lambda raw: parse_answer(self.mode, raw, world))
        messages = list(messages)
        error = ""
        for attempt in range(1, self.max_attempts + 1):
            votes: Counter[Any] = Counter()
            first: dict[Any, Any] = {}
            texts: dict[Any, str] = {}
            last_text = ""
            for k in range(self.self_consistency):
                greedy = k == 0
                temperature = 0.0 if greedy else self.temperature
                text = self._complete(messages, schema, temperature, self.seed + k, attempt, max_tokens)
                last_text = text
                try:
                    answer = parse(text)
                    if check is not None:
                        check(answer)
                except PlanError as err:
                    error = str(err)
                    self.calls[-1]["error"] = error
                    continue
                self.calls[-1]["valid"] = True
                votes[answer.key()] += 1
                first.setdefault(answer.key(), answer)
                texts.setdefault(answer.key(), text)
            if votes:
                best = max(votes, key=lambda key: (votes[key], -list(first).index(key)))
                self.last_answer = first[best]
                self.last_text = texts[best]
                return first[best]
            messages += [
                {"role": "assistant", "content": last_text[:2000]},
                {"role": "user", "content": self.prompts.render("retry.j2", error=error)},
            ]
        raise PlanError(
            f"{self.mode}: no valid answer from {self.backend.model_id} in {self.max_attempts} attempts; last: {error}"
        )

    def _complete(
        self,
        messages: list[Message],
        schema: Any,
        temperature: float,
        seed: int,
        attempt: int,
        max_tokens: int | None = None,
    ) -> str:
        max_tokens = max_tokens or self.max_tokens
        key = hashlib.sha256(
            json.dumps(
                [self.backend.model_id, messages, schema, temperature, seed, max_tokens], sort_keys=True
            ).encode()
        ).hexdigest()
        record: dict[str, Any] = {"attempt": attempt, "valid": False, "error": None}
        hit = self._cached(key) if self.cache and (temperature == 0 or seed is not None) else None
        if hit is not None:
            self._record(
                {**record, **hit, "latency_s": 0.0, "prompt_tokens": 0, "completion_tokens": 0, "cached": True}
            )
            return hit["text"]
        t0 = time.perf_counter()
        try:
            out = self.backend.complete(messages, schema, temperature=temperature, max_tokens=max_tokens, seed=seed)
        except LLMError as err:
            self._record(
                {
                    **record,
                    "text": "",
                    "latency_s": time.perf_counter() - t0,
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "cached": False,
                    "error": str(err),
                }
            )
            raise
        self._record(
            {
                **record,
                "text": out.text,
                "latency_s": out.latency_s,
                "prompt_tokens": out.prompt_tokens,
                "completion_tokens": out.completion_tokens,
                "cached": False,
            }
        )
        if self.cache:
            self._store(key, {"text": out.text})
        return out.text

    def _cached(self, key: str) -> dict[str, Any] | None:
        if key in self._memory:
            self._memory.move_to_end(key)
            return self._memory[key]
        if self.cache_dir is not None:
            path = self.cache_dir / f"{key}.json"  # the file name is a hash, never model output
            if path.is_file():
                try:
                    value = json.loads(path.read_text())
                except (OSError, ValueError):
                    return None
                if isinstance(value, dict) and isinstance(value.get("text"), str):
                    self._remember(key, {"text": value["text"]})
                    return self._memory[key]
        return None

    def _remember(self, key: str, value: dict[str, Any]) -> None:
        self._memory[key] = value
        self._memory.move_to_end(key)
        while len(self._memory) > MEMORY_CACHE_KEPT:
            self._memory.popitem(last=False)

    def _store(self, key: str, value: dict[str, Any]) -> None:
        self._remember(key, value)
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_dir / f".{key}.tmp"
            tmp.write_text(json.dumps(value))
            tmp.replace(self.cache_dir / f"{key}.json")

    # -- feedback -------------------------------------------------------------------------------------
    def _feedback_text(self, task: Task, feedback: Feedback, robot_room: str) -> str:
        reached = [r.split(" ", 1)[-1] for r in feedback.reached if not r.startswith("(")]
        return self.prompts.render(
            "feedback.j2", feedback=feedback, reached=reached, robot_room=robot_room, instruction=task.text
        )

    def _last_route(self) -> list[str]:
        return list(self.last_answer.route) if isinstance(self.last_answer, RouteAnswer) else []


def _reached_in_order(targets: list[str], world: World, reached: tuple[str, ...]) -> int:
    """How many of ``targets`` (in order) are among the subgoals reached so far."""
    labels = [r.split(" ", 1)[-1] for r in reached]
    done = 0
    for label in labels:
        if done < len(targets) and label == targets[done]:
            done += 1
    return done


class LLMGoalsPlanner(LLMPlanner):
    """``planner=llm_goals``: the model reads the targets and the graph planner routes (navigation), or the model
    answers the tabletop's subgoals (tabletop; ``tabletop_examples``: your own bank of worked examples, YAML like
    ``llm_planner/prompts/tabletop_examples.yaml``)."""

    domains = ("navigation", "tabletop")

    def __init__(self, tabletop_examples: str | None = None, **params: Any) -> None:
        super().__init__(mode="llm_goals", **params)
        self.tabletop = TabletopReader(self, tabletop_examples, params.get("max_tokens") or TABLETOP_MAX_TOKENS)

    def _plan(self, task: Any, scene: Any, feedback: Any) -> Any:
        if isinstance(scene, TabletopView):
            return self.tabletop.plan(task, scene, feedback)
        return super()._plan(task, scene, feedback)


class LLMRoutePlanner(LLMPlanner):
    """``planner=llm_route``: the model emits the whole door route."""

    def __init__(self, **params: Any) -> None:
        params.pop("reading", None)
        super().__init__(mode="llm_route", **params)
