"""The arm's whole graph over real DDS, each node in its own process: the simulated Panda (sim_arm_node), the
skill policies (arm_policy_node) and the tabletop hierarchy (arm_planner_node) stack a block on another from a
task sent as a ROS message, and a task the planner cannot use is refused with a status saying what to send."""

from __future__ import annotations

import json

import pytest
from std_msgs.msg import String

from hrl.ros.planner_node import is_final
from tests.ros.conftest import spin_until

#: The blocks scene's layout of reset seed 0: the symbolic plan and the shipped skills stack red on blue in both
#: engines in simulation (tests/hierarchy/test_agent.py).
LAYOUT_SEED = 0


class Listener:
    """Collects the strings published on a topic."""

    def __init__(self, node, topic):
        from hrl.ros.qos import profile

        self.messages: list[str] = []
        self.sub = node.create_subscription(String, topic, lambda m: self.messages.append(m.data), profile("reliable"))


def start_graph(processes, planner="symbolic"):
    processes.start("hrl.ros.sim_arm_node", "scene:=blocks", "backend:=mujoco", f"layout_seed:={LAYOUT_SEED}")
    processes.start("hrl.ros.arm_policy_node", "scene:=blocks")
    return processes.start("hrl.ros.arm_planner_node", "scene:=blocks", f"planner:={planner}")


def send_until_heard(node, publisher, text, status, timeout_s=120.0):
    """Publish the task until the planner answers (its subscription may match after our first message)."""
    publisher.publish(String(data=text))
    heard = spin_until(node, lambda: bool(status.messages), 10.0)
    while not heard and timeout_s > 0:
        publisher.publish(String(data=text))
        heard = spin_until(node, lambda: bool(status.messages), 10.0)
        timeout_s -= 10.0
    return heard


def test_the_simulated_arm_stacks_red_on_blue_from_a_task_message(processes, rclpy_node):
    planner = start_graph(processes)
    status = Listener(rclpy_node, "/task_status")
    calls = Listener(rclpy_node, "/arm_subgoal")
    results = Listener(rclpy_node, "/arm_subgoal_status")
    task = rclpy_node.create_publisher(String, "/task", 10)
    assert send_until_heard(rclpy_node, task, "red_block on blue_block", status), processes.log(planner)
    ended = spin_until(rclpy_node, lambda: any(is_final(m) for m in status.messages), 240.0)
    logs = "\n".join(processes.log(p) for p, _ in processes.procs)
    assert ended, f"no final status; got {status.messages}\n{logs}"
    assert [m for m in status.messages if is_final(m)] == ["done"], f"{status.messages}\n{logs}"
    # The plan went out as skill calls, each answered: reach over red, lift, carry, lower, release.
    sent = [json.loads(c) for c in calls.messages]
    # the last status may reach this listener after the planner's "done" (two topics, no order between them)
    spin_until(rclpy_node, lambda: len(results.messages) >= len(sent), 10.0)
    answered = {json.loads(r)["id"]: json.loads(r)["outcome"] for r in results.messages}
    assert [c["skill"] for c in sent][:2] == ["reach", "pick_place"], sent
    assert sent[-1]["skill"] == "release" and answered.get(sent[-1]["id"]) == "reached", (sent, answered)
    assert all(c["id"] in answered for c in sent), (sent, answered)
    # a skill the physics leaves short (a block caught 'stuck', seen once in a loaded run) is planned again, at most
    # max_replans (3) times: the task above is still done
    assert sum(outcome != "reached" for outcome in answered.values()) <= 3, (sent, answered)
    assert any(m.startswith("executing: ") for m in status.messages)


def test_without_an_arm_policy_node_no_call_is_sent_and_the_task_fails_saying_what_is_missing(processes, rclpy_node):
    # A call sent to a policy node still loading its skills used to time out before the node could answer it
    # (a CI failure): the planner now waits for the policy node's status publisher before it sends a call.
    processes.start("hrl.ros.sim_arm_node", "scene:=blocks", "backend:=mujoco", f"layout_seed:={LAYOUT_SEED}")
    planner = processes.start("hrl.ros.arm_planner_node", "scene:=blocks", "arm_wait_s:=3.0")
    status = Listener(rclpy_node, "/task_status")
    task = rclpy_node.create_publisher(String, "/task", 10)
    assert send_until_heard(rclpy_node, task, "red_block on blue_block", status), processes.log(planner)
    assert spin_until(rclpy_node, lambda: any(is_final(m) for m in status.messages), 120.0), status.messages
    final = [m for m in status.messages if is_final(m)]
    assert final[0].startswith("failed: "), status.messages
    log = processes.log(planner)
    why = "no arm policy node within arm_wait_s 3 s: nothing subscribes to /arm_subgoal and nothing publishes "
    assert why + "/arm_subgoal_status" in log, log
    assert "waiting for the arm policy node" in log


def test_a_task_the_planner_cannot_use_is_refused_saying_what_to_send(processes, rclpy_node):
    planner = processes.start("hrl.ros.arm_planner_node", "scene:=blocks")
    status = Listener(rclpy_node, "/task_status")
    task = rclpy_node.create_publisher(String, "/task", 10)
    assert send_until_heard(rclpy_node, task, "green_block on blue_block", status), processes.log(planner)
    refused = [m for m in status.messages if is_final(m)]
    assert refused and refused[0].startswith("failed: "), status.messages
    assert "'green_block'" in refused[0] and "red_block" in refused[0]  # the unknown name and what there is
    status.messages.clear()
    assert send_until_heard(rclpy_node, task, "{not json", status)
    assert "not valid JSON" in status.messages[0]


def test_a_planner_that_does_not_plan_for_the_tabletop_stops_the_node_naming_those_that_do(tmp_path, ros_domain):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "hrl.ros.arm_planner_node", "--ros-args", "-p", "planner:=graph"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "'graph' does not plan for the tabletop" in out.stderr and "symbolic" in out.stderr


@pytest.mark.parametrize("bad", ["scene:=no_such_scene", "skill_hz:=0.0"])
def test_bad_parameters_stop_the_node_with_the_value(bad, ros_domain):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "hrl.ros.arm_planner_node", "--ros-args", "-p", bad],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert bad.split(":=")[1] in out.stderr


@pytest.mark.parametrize("how", ["cancel", "supersede"])
def test_a_cancelled_or_superseded_task_cancels_its_skill_call(how, processes, rclpy_node):
    """``/task_cancel`` (or a new task) mid-task: the status says so, and the skill call the arm is running is
    cancelled on the policy node (it answers ``aborted: cancelled``) before anything else is sent: the arm does not
    finish a motion nobody wants while the next task is planned. After a cancel no call follows."""
    from std_msgs.msg import Empty

    planner = start_graph(processes)
    status = Listener(rclpy_node, "/task_status")
    calls = Listener(rclpy_node, "/arm_subgoal")
    results = Listener(rclpy_node, "/arm_subgoal_status")
    task = rclpy_node.create_publisher(String, "/task", 10)
    cancel = rclpy_node.create_publisher(Empty, "/task_cancel", 10)
    assert send_until_heard(rclpy_node, task, "red_block on blue_block", status), processes.log(planner)
    # the second call (pick_place: lift the block) is under way
    sent = lambda: [json.loads(c) for c in calls.messages if "cancel" not in json.loads(c)]  # noqa: E731
    assert spin_until(rclpy_node, lambda: len(sent()) >= 2, 180.0), f"{status.messages}\n{processes.log(planner)}"
    if how == "cancel":
        cancel.publish(Empty())
        final, why = "cancelled: red_block on blue_block: by /task_cancel", "cancelled by /task_cancel"
    else:
        task.publish(String(data="blue_block on red_block"))
        final, why = "cancelled: red_block on blue_block: superseded by blue_block on red_block", "superseded by"
    assert spin_until(rclpy_node, lambda: final in status.messages, 10.0), status.messages
    assert spin_until(rclpy_node, lambda: any("cancel" in json.loads(c) for c in calls.messages), 10.0)
    # the cancel goes out right after the call it ends (the one under way), before any call of a next task
    msgs = [json.loads(c) for c in calls.messages]
    k = next(i for i, c in enumerate(msgs) if "cancel" in c)
    running = msgs[k - 1]["id"]
    assert msgs[k]["cancel"] == running and k >= 2, msgs
    answered = lambda: {json.loads(r)["id"]: json.loads(r) for r in results.messages}  # noqa: E731
    assert spin_until(rclpy_node, lambda: running in answered(), 10.0), results.messages
    assert answered()[running]["outcome"] == "aborted" and why in answered()[running]["why"], answered()[running]
    if how == "supersede":
        return
    n = len(calls.messages)
    spin_until(rclpy_node, lambda: False, 3.0)
    assert len(calls.messages) == n, f"calls after the cancel: {calls.messages[n:]}"
    assert not any(m.startswith(("done", "failed")) for m in status.messages), status.messages
    status.messages.clear()
    task.publish(String(data="{not json"))  # the node still takes tasks
    assert spin_until(rclpy_node, lambda: bool(status.messages), 10.0)
    assert "not valid JSON" in status.messages[0]


def test_a_task_cancelled_while_it_waits_for_the_robot_ends_there(processes, rclpy_node):
    """No arm publishes: the task waits for joint states (10 s). Cancelled meanwhile, it says so once, and neither
    plans nor fails when the wait runs out."""
    from std_msgs.msg import Empty

    planner = processes.start("hrl.ros.arm_planner_node", "scene:=blocks")
    status = Listener(rclpy_node, "/task_status")
    task = rclpy_node.create_publisher(String, "/task", 10)
    cancel = rclpy_node.create_publisher(Empty, "/task_cancel", 10)

    def ready():  # our writers and its status writer have matched (a volatile status sent before that is lost)
        heard = task.get_subscription_count() > 0 and cancel.get_subscription_count() > 0
        return heard and status.sub.get_publisher_count() > 0

    assert spin_until(rclpy_node, ready, 120), processes.log(planner)
    task.publish(String(data="red_block on blue_block"))
    spin_until(rclpy_node, lambda: False, 1.0)
    cancel.publish(Empty())
    final = "cancelled: red_block on blue_block: by /task_cancel"
    assert spin_until(rclpy_node, lambda: final in status.messages, 10.0), (status.messages, processes.log(planner))
    spin_until(rclpy_node, lambda: False, 11.0)  # past the 10 s wait for the robot
    assert status.messages == [final], status.messages
