"""Camera images over ROS for the planners that look (issue 17, "the ROS planner node accepts sensor_msgs/Image"):
the simulated arm (sim_arm_node, its own process) publishes its cameras, a read-only ``RosArmPhysics`` in this
process serves them through ``env.camera_image`` exactly as the simulator renders them; images that cannot be
served (none yet, stale, an unsupported encoding, another aspect ratio) are clear errors naming the topic; and
arm_planner_node with ``planner=vla`` plans from the images (or says plainly that none came)."""

from __future__ import annotations

import array
import contextlib
import json
import threading
import time

import numpy as np
import pytest
from sensor_msgs.msg import Image
from std_msgs.msg import String

from hrl.ros.arm_physics import CameraError, RosArmPhysics
from hrl.ros.planner_node import is_final
from robots.arm import load_arm
from sim.tabletop.scene import load_scene
from tests.ros.conftest import spin_until

ARM = load_arm("panda")
BLOCKS = load_scene("blocks")
FRONT = ("/camera/front/image_raw", "/camera/front/depth/image_raw")
LAYOUT_SEED = 0
SIZE = 64


@contextlib.contextmanager
def spinning(node):
    """``node`` spun on a thread of its own (RosArmPhysics waits on another thread, as in the planner node)."""
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor()
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        executor.shutdown()
        thread.join(timeout=5.0)


def direct_render(size):
    """The front camera as the simulator itself renders the blocks scene at sim_arm_node's layout (its reset)."""
    from sim.tabletop.env import PandaTabletopEnv

    env = PandaTabletopEnv("blocks", backend="mujoco", goal_mode="reach", block_gripper=False, control_hz=100.0)
    try:
        layout = env.scene.sample_layout(np.random.default_rng(LAYOUT_SEED))
        env.reset(seed=LAYOUT_SEED, options={"layout": layout})
        return env.camera_image("front", size, depth=True)
    finally:
        env.close()


def test_ros_images_are_what_the_simulator_renders_and_lift_to_the_blocks(processes, rclpy_node):
    from hierarchy.tabletop import make_env

    sim = processes.start(
        "hrl.ros.sim_arm_node", "scene:=blocks", f"layout_seed:={LAYOUT_SEED}", "camera_hz:=5.0",
        f"image_size:={SIZE}", "cameras:=front",
    )  # fmt: skip
    physics = RosArmPhysics(rclpy_node, BLOCKS, ARM, 0.04, read_only=True, cameras={"front": FRONT})
    env = make_env(BLOCKS, backend=physics)
    with spinning(rclpy_node):
        assert physics.wait_for_state(120.0), f"{physics.missing()}\n{processes.log(sim)}"
        assert physics.wait_for_images(["front"], 60.0), f"{physics.missing_images(['front'])}\n{processes.log(sim)}"
        shot = env.unwrapped.camera_image("front", SIZE, depth=True)  # what planner=vla and vlm_http call
        small = env.unwrapped.camera_image("front", 32, depth=True)
        poses = {o.name: physics.object_state(o.name).position for o in BLOCKS.objects}
    assert shot.rgb.shape == (SIZE, SIZE, 3) and shot.rgb.dtype == np.uint8
    assert shot.depth.shape == (SIZE, SIZE) and shot.depth.dtype == np.float32
    assert 0.3 < float(np.median(shot.depth)) < 1.5  # metres: the table 0.5 m below a camera ~0.7 m away

    # the same picture as the simulator renders directly (the arm holding home for a few seconds moves nothing)
    ref = direct_render(SIZE)
    rgb_diff = np.abs(shot.rgb.astype(int) - ref.rgb.astype(int)).max(axis=2)
    assert (rgb_diff > 40).mean() < 0.01 and rgb_diff.mean() < 3.0, rgb_diff.mean()
    assert (np.abs(shot.depth - ref.depth) > 0.005).mean() < 0.01

    # each block's top, projected to a pixel and lifted back with the ROS depth image, lands on the block
    for o in BLOCKS.objects:
        top = poses[o.name] + np.array([0.0, 0.0, o.size[2] / 2])
        u, v = shot.project(top)
        lifted = shot.lift(float(u), float(v))
        assert np.linalg.norm(lifted - top) < 0.015, (o.name, top, lifted)
        colour = shot.rgb[int(v), int(u)].astype(int)
        assert np.abs(colour - ref.rgb[int(v), int(u)].astype(int)).max() < 40

    # asked smaller: RGB averaged over the pixels each covers, depth the nearest pixel (never a blend of edges)
    assert small.rgb.shape == (32, 32, 3) and small.depth.shape == (32, 32)
    assert np.abs(small.rgb.astype(float) - shot.rgb.reshape(32, 2, 32, 2, 3).mean(axis=(1, 3))).max() <= 1.0
    assert np.array_equal(small.depth, shot.depth[1::2, 1::2])


def image(encoding, pixels, big_endian=False):
    msg = Image()
    msg.height, msg.width = pixels.shape[:2]
    msg.encoding, msg.is_bigendian = encoding, int(big_endian)
    msg.step = pixels.nbytes // pixels.shape[0]
    msg.data = array.array("B", pixels.tobytes())
    return msg


def test_images_that_cannot_be_served_are_clear_errors_naming_the_topic(rclpy_node):
    from hrl.ros.qos import profile

    physics = RosArmPhysics(
        rclpy_node, BLOCKS, ARM, 0.04, read_only=True, cameras={"front": FRONT}, image_timeout_s=1.0
    )
    rgb_pub = rclpy_node.create_publisher(Image, FRONT[0], profile("reliable"))
    depth_pub = rclpy_node.create_publisher(Image, FRONT[1], profile("reliable"))
    with pytest.raises(CameraError, match="no image on /camera/front/image_raw yet"):
        physics.render("front", 8, 8)
    assert "no image on /camera/front/depth/image_raw yet" in physics.missing_images(["front"])
    with pytest.raises(CameraError, match=r"does not subscribe camera images of 'wrist'.*front"):
        physics.render("wrist", 8, 8)

    def publish_until_heard(pub, msg, topic):
        arrived = physics._images.get(topic, (None, None))[0]
        deadline = time.monotonic() + 30.0
        while physics._images.get(topic, (None, None))[0] == arrived and time.monotonic() < deadline:
            pub.publish(msg)
            spin_until(rclpy_node, lambda: physics._images.get(topic, (None, None))[0] != arrived, 0.5)
        assert physics._images.get(topic, (None, None))[0] != arrived, f"nothing heard on {topic}"

    # bgr8 and 16UC1 (mm; 0 = no reading), big-endian, decoded to RGB and metres
    rgb = np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    mm = np.full((8, 8), 750, dtype=">u2")
    mm[0, 0] = 0
    publish_until_heard(rgb_pub, image("bgr8", np.ascontiguousarray(rgb[:, :, ::-1])), FRONT[0])
    publish_until_heard(depth_pub, image("16UC1", mm, big_endian=True), FRONT[1])
    assert np.array_equal(physics.render("front", 8, 8), rgb)
    metres = physics.render("front", 8, 8, depth=True)
    assert np.isnan(metres[0, 0]) and np.allclose(metres.flat[1:], 0.75)
    assert physics.missing_images(["front"]) == ""
    with pytest.raises(CameraError, match=r"/camera/front/image_raw: a 8x8 image cannot be served at 16x8"):
        physics.render("front", 16, 8)

    # an encoding it cannot read: refused naming the topic, the encoding and what it reads
    publish_until_heard(rgb_pub, image("mono8", np.zeros((8, 8), np.uint8)), FRONT[0])
    with pytest.raises(CameraError, match=r"/camera/front/image_raw: encoding 'mono8' .* rgb8, bgr8"):
        physics.render("front", 8, 8)
    publish_until_heard(depth_pub, image("rgb8", rgb), FRONT[1])
    with pytest.raises(CameraError, match=r"/camera/front/depth/image_raw: encoding 'rgb8' .* 32FC1, 16UC1"):
        physics.render("front", 8, 8, depth=True)

    # the camera stops: its last image goes stale after image_timeout_s
    publish_until_heard(rgb_pub, image("rgb8", rgb), FRONT[0])
    assert np.array_equal(physics.render("front", 8, 8), rgb)
    time.sleep(1.3)
    with pytest.raises(CameraError, match=r"last image on /camera/front/image_raw arrived 1\.\d\d s ago"):
        physics.render("front", 8, 8)
    physics.close()


# ---- arm_planner_node with planner=vla -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_vla(tmp_path_factory):
    """A VLA trained here for a few steps on two demonstrations at 32 px: it plans from images, not well (its
    planner made to always answer a step: never done, any pointed point names the nearest thing)."""
    import torch

    from hierarchy.vla.data import DataConfig, write_dataset
    from hierarchy.vla.train import BCConfig, train
    from llm_planner.tabletop import Relation, TabletopTask

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("tiny_vla")
    task = TabletopTask("Put the red block on the blue block.", (Relation("red_block", "blue_block"),), "single")
    write_dataset(root / "train.hdf5", DataConfig(scenes=("blocks",), episodes=2, tasks=(task,), image_size=32))
    cfg = BCConfig(train_data=[str(root / "train.hdf5")], steps=20, batch_size=4, eval_every=20, save_every=20)
    train(cfg, root / "run", progress=False)
    params = root / "vla_params.yaml"
    params.write_text(
        f"model: {root / 'run' / 'model.pt'}\nthreads: 1\ndone_threshold: 1.0\npick_radius: 1.0\nplace_radius: 1.0\n"
    )
    return params


class Listener:
    def __init__(self, node, topic, qos="reliable"):
        from hrl.ros.qos import profile

        self.messages: list[str] = []
        node.create_subscription(String, topic, lambda m: self.messages.append(m.data), profile(qos))


def run_vla_task(processes, rclpy_node, params, camera_hz):
    """sim_arm_node (cameras at ``camera_hz``) and arm_planner_node with planner=vla, no policy node; one task
    sent: the /plan messages, the /task_status messages and the planner's process."""
    processes.start(
        "hrl.ros.sim_arm_node", "scene:=blocks", f"layout_seed:={LAYOUT_SEED}", f"camera_hz:={camera_hz}",
        f"image_size:={SIZE}", "cameras:=front",
    )  # fmt: skip
    planner = processes.start(
        "hrl.ros.arm_planner_node", "scene:=blocks", "planner:=vla", f"planner_params_file:={params}",
        "max_replans:=0", "call_slack:=0.1",
    )  # fmt: skip
    status, plans = Listener(rclpy_node, "/task_status"), Listener(rclpy_node, "/plan", "latched")
    task = rclpy_node.create_publisher(String, "/task", 10)
    # one task, sent once the planner hears /task (a second one would supersede the first)
    assert spin_until(rclpy_node, lambda: task.get_subscription_count() > 0, 180.0), processes.log(planner)
    task.publish(String(data="red_block on blue_block"))
    done = spin_until(rclpy_node, lambda: plans.messages or any(is_final(m) for m in status.messages), 180.0)
    assert done, f"{status.messages}\n{processes.log(planner)}"
    return plans.messages, status.messages, planner


def test_the_planner_node_plans_from_ros_images_with_planner_vla(processes, rclpy_node, tiny_vla):
    plans, statuses, planner = run_vla_task(processes, rclpy_node, tiny_vla, camera_hz=5.0)  # (lists that grow)
    log = processes.log(planner)
    assert "looks through the front camera: /camera/front/image_raw and /camera/front/depth/image_raw" in log
    assert not any("camera" in s or s.startswith("cancelled") for s in statuses), f"{statuses}\n{log}"
    # the net looked at the images and pointed: a place step, announced and sent to the arm as skill calls
    assert plans, f"{statuses}\n{log}"
    labels = json.loads(plans[0])
    names = {o.name for o in BLOCKS.objects} | {p.name for p in BLOCKS.places}
    assert len(labels) == 1 and labels[0].startswith("place "), labels
    _, picked, on, target = labels[0].split(" ")
    assert on == "on" and picked in names and target in names - {picked}, labels
    spin_until(rclpy_node, lambda: any(m.startswith("executing: ") for m in statuses), 30.0)
    assert any(m.startswith("executing: ") for m in statuses), statuses  # grounded into skill calls for the arm


def test_the_planner_node_says_plainly_when_no_camera_images_come(processes, rclpy_node, tiny_vla):
    plans, statuses, _ = run_vla_task(processes, rclpy_node, tiny_vla, camera_hz=0.0)
    final = [s for s in statuses if is_final(s)]
    assert final and final[0].startswith("failed: no fresh camera images within 10 s for planner 'vla'"), statuses
    assert "no image on /camera/front/image_raw yet" in final[0]
    assert "no image on /camera/front/depth/image_raw yet" in final[0]
    assert not plans
