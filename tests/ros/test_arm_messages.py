"""The arm's skill-call messages: a step survives the round trip, and every malformed field is named."""

import json
import math

import numpy as np
import pytest

from hierarchy.domain import Outcome, Step
from hrl.ros.arm_messages import MessageError, SkillCall, SkillStatus


class _Env:
    """Just enough of an env for a goal callable."""

    def __init__(self, p):
        self.p = np.asarray(p, dtype=float)


def test_a_step_goes_out_with_its_goal_computed_now_and_comes_back_as_the_same_step():
    step = Step("pick_place", lambda env: env.p + np.array([0, 0, 0.1]), "red_block", 0.01, 45, "lift", gripper=None)
    call = SkillCall.from_step(step, _Env([0.1, -0.2, 0.02]), "7")
    back = SkillCall.from_json(call.to_json(), skills=["pick_place"], objects=["red_block"])
    assert back == call
    assert back.goal == pytest.approx((0.1, -0.2, 0.12))
    s = back.step()
    assert (s.skill, s.object, s.tolerance, s.budget, s.label) == ("pick_place", "red_block", 0.01, 45, "lift")
    # the goal is fixed: the object moving after the planner computed it changes nothing
    np.testing.assert_allclose(s.goal(_Env([9, 9, 9])), [0.1, -0.2, 0.12])


@pytest.mark.parametrize(
    "change, field",
    [
        ({"goal": [0, 0]}, "'goal'"),
        ({"goal": [0, float("nan"), 0]}, "'goal'"),
        ({"skill": "teleport"}, "unknown skill 'teleport'"),
        ({"object": "green_block"}, "unknown object 'green_block'"),
        ({"budget": 0}, "'budget'"),
        ({"tolerance": -0.1}, "'tolerance'"),
        ({"gripper": 3}, "'gripper'"),
        ({"id": ""}, "'id'"),
        ({"speed": 2}, "unknown field"),
    ],
)
def test_a_malformed_call_is_refused_naming_the_field(change, field):
    data = {"id": "1", "skill": "reach", "goal": [0.0, 0.0, 0.1], "object": None}
    data.update(change)
    with pytest.raises(MessageError, match=field):
        SkillCall.from_json(json.dumps(data), skills=["reach", "pick_place"], objects=["red_block"])


def test_not_json_is_refused_with_the_text():
    with pytest.raises(MessageError, match="not JSON"):
        SkillCall.from_json("pick red", skills=["reach"])


def test_status_round_trip_including_a_call_that_never_started():
    done = SkillStatus("3", "reached", 12, 0.004)
    assert SkillStatus.from_json(done.to_json()) == done
    assert done.result is Outcome.REACHED
    aborted = SkillStatus("4", "aborted", why="e-stop latched")
    back = SkillStatus.from_json(aborted.to_json())
    assert back.result is Outcome.ABORTED and back.why == "e-stop latched" and math.isnan(back.distance)
    with pytest.raises(MessageError, match="'exploded' is not one of"):
        SkillStatus.from_json(json.dumps({"id": "5", "outcome": "exploded"}))


def test_a_cancel_travels_on_the_calls_topic_and_is_told_apart_from_a_call():
    from hrl.ros.arm_messages import SkillCancel, read_subgoal_message

    cancel = SkillCancel("arm_planner_node-4", "task superseded")
    back = read_subgoal_message(cancel.to_json(), skills=["reach"], objects=[])
    assert back == cancel and back.matches("arm_planner_node-4") and not back.matches("arm_planner_node-5")
    assert SkillCancel("*").matches("anything")
    call = SkillCall("5", "reach", (0.0, 0.0, 0.1))
    assert read_subgoal_message(call.to_json(), skills=["reach"]) == call
    with pytest.raises(MessageError, match="'cancel' = ''"):
        read_subgoal_message('{"cancel": ""}')
    with pytest.raises(MessageError, match=r"unknown field\(s\) \['skill'\]"):
        read_subgoal_message('{"cancel": "3", "skill": "reach"}')
    with pytest.raises(MessageError, match="'why'"):
        read_subgoal_message('{"cancel": "3", "why": 7}')
