"""The Panda's spec, its URDF and the two compiled models agree; the shared kinematics match PyBullet's."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from robots import available_robots
from robots._fields import ConfigFileError
from robots.arm import available_arms, load_arm
from robots.kinematics import DOWN, KinematicChain, solve_ik

ARM = load_arm("panda")
BASE = np.array([-0.6, 0.0, 0.0])


def _urdf_masses() -> dict[str, float]:
    root = ET.parse(ARM.urdf).getroot()
    return {link.get("name"): float(link.find("inertial/mass").get("value")) for link in root.iter("link")}


def _urdf_limits() -> dict[str, tuple[float, float, float, float]]:
    root = ET.parse(ARM.urdf).getroot()
    out = {}
    for j in root.iter("joint"):
        lim = j.find("limit")
        if lim is not None:
            out[j.get("name")] = tuple(float(lim.get(k)) for k in ("lower", "upper", "velocity", "effort"))
    return out


def test_panda_is_an_arm_not_a_mobile_base():
    assert "panda" in available_arms()
    assert "panda" not in available_robots() and "rover" in available_robots()
    assert ARM.joint_names == [f"panda_joint{i}" for i in range(1, 8)]
    assert ARM.gripper.joints == ("panda_finger_joint1", "panda_finger_joint2")


def test_spec_limits_match_the_urdf():
    limits = _urdf_limits()
    for j in ARM.joints:
        assert (j.lower, j.upper, j.velocity, j.effort) == pytest.approx(limits[j.name])
    for name in ARM.gripper.joints:
        _, upper, velocity, effort = limits[name]
        assert upper * 2 == pytest.approx(ARM.gripper.max_width)
        assert (velocity, effort) == pytest.approx((ARM.gripper.velocity, ARM.gripper.force))


def test_mujoco_model_matches_spec_and_urdf():
    import mujoco

    from sim.tabletop.mujoco import TCP_SITE, _build
    from sim.tabletop.scene import load_scene

    scene = load_scene("single_cube")
    model = _build(scene, ARM)
    for j in ARM.joints:
        assert tuple(model.joint(j.name).range) == pytest.approx((j.lower, j.upper))
        assert tuple(model.actuator(j.name).forcerange) == pytest.approx((-j.effort, j.effort))
    masses = _urdf_masses()
    robot_mass = sum(v for k, v in masses.items() if k != "panda_link0")  # link0 is fused into the (fixed) world
    bodies = [model.body(i) for i in range(model.nbody)]
    mj_mass = sum(float(b.mass[0]) for b in bodies if b.name.startswith("panda_"))
    assert mj_mass == pytest.approx(robot_mass, rel=1e-6)
    data = mujoco.MjData(model)
    chain = KinematicChain(ARM.urdf, ARM.base_link, ARM.tcp_link)
    rng = np.random.default_rng(0)
    lower, upper = np.array([j.lower for j in ARM.joints]), np.array([j.upper for j in ARM.joints])
    for _ in range(5):
        q = rng.uniform(lower, upper)
        data.qpos[[model.joint(n).qposadr[0] for n in ARM.joint_names]] = q
        mujoco.mj_kinematics(model, data)
        p, R, _ = chain.forward(q, np.array(scene.robot_base))
        assert data.site(TCP_SITE).xpos == pytest.approx(p, abs=1e-6)
        assert data.site(TCP_SITE).xmat.reshape(3, 3) == pytest.approx(R, abs=1e-6)


@pytest.fixture
def bullet():
    import pybullet as pb

    client = pb.connect(pb.DIRECT)
    robot = pb.loadURDF(str(ARM.urdf), basePosition=BASE.tolist(), useFixedBase=True, physicsClientId=client)
    yield pb, client, robot
    pb.disconnect(physicsClientId=client)


def test_pybullet_model_matches_spec_and_urdf(bullet):
    pb, c, robot = bullet
    info = {pb.getJointInfo(robot, i, physicsClientId=c)[1].decode(): pb.getJointInfo(robot, i, physicsClientId=c)
            for i in range(pb.getNumJoints(robot, physicsClientId=c))}  # fmt: skip
    for j in ARM.joints:
        assert info[j.name][8:10] == pytest.approx((j.lower, j.upper))
        assert info[j.name][10:12] == pytest.approx((j.effort, j.velocity))
    masses = _urdf_masses()
    for name, joint in info.items():
        link = joint[12].decode()
        assert pb.getDynamicsInfo(robot, joint[0], physicsClientId=c)[0] == pytest.approx(masses[link]), name


def test_shared_kinematics_match_pybullet_and_finite_differences(bullet):
    pb, c, robot = bullet
    chain = KinematicChain(ARM.urdf, ARM.base_link, ARM.tcp_link)
    index = {
        pb.getJointInfo(robot, i, physicsClientId=c)[12].decode(): i
        for i in range(pb.getNumJoints(robot, physicsClientId=c))
    }
    arm_joints = [i for i in range(pb.getNumJoints(robot, physicsClientId=c))
                  if pb.getJointInfo(robot, i, physicsClientId=c)[1].decode() in ARM.joint_names]  # fmt: skip
    rng = np.random.default_rng(1)
    lower, upper = np.array([j.lower for j in ARM.joints]), np.array([j.upper for j in ARM.joints])
    for _ in range(10):
        q = rng.uniform(lower, upper)
        for i, value in zip(arm_joints, q, strict=True):
            pb.resetJointState(robot, i, value, physicsClientId=c)
        state = pb.getLinkState(robot, index[ARM.tcp_link], computeForwardKinematics=True, physicsClientId=c)
        p, R, J = chain.forward(q, BASE)
        assert p == pytest.approx(state[4], abs=1e-6)
        assert pytest.approx(np.array(pb.getMatrixFromQuaternion(state[5])).reshape(3, 3), abs=1e-6) == R
        eps = 1e-6
        for k in range(7):
            dq = np.zeros(7)
            dq[k] = eps
            assert (chain.forward(q + dq, BASE)[0] - p) / eps == pytest.approx(J[:3, k], abs=1e-4)


def _rotation(axis, angle: float) -> np.ndarray:
    """Rodrigues' formula, for the reference below."""
    a = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * K @ K


def _reference_forward(urdf, base_link: str, tip_link: str, q: np.ndarray):
    """Textbook kinematics, independent of robots.kinematics: 4 x 4 products along the URDF's joints (rpy as
    Rz Ry Rx), each joint's motion about or along its own axis, and the Jacobian from each joint's world axis
    and origin."""
    root = ET.parse(urdf).getroot()
    by_child = {j.find("child").get("link"): j for j in root.iter("joint")}
    path, link = [], tip_link
    while link != base_link:
        path.append(by_child[link])
        link = by_child[link].find("parent").get("link")
    T, joints, values = np.eye(4), [], iter(q)
    for j in reversed(path):
        origin = j.find("origin")
        r, p, y = (float(v) for v in origin.get("rpy", "0 0 0").split())
        fixed = np.eye(4)
        fixed[:3, :3] = _rotation((0, 0, 1), y) @ _rotation((0, 1, 0), p) @ _rotation((1, 0, 0), r)
        fixed[:3, 3] = [float(v) for v in origin.get("xyz", "0 0 0").split()]
        T = T @ fixed
        if j.get("type") == "fixed":
            continue
        axis = np.array([float(v) for v in j.find("axis").get("xyz").split()])
        axis /= np.linalg.norm(axis)
        joints.append((j.get("type"), T[:3, :3] @ axis, T[:3, 3].copy()))
        motion, value = np.eye(4), next(values)
        if j.get("type") == "prismatic":
            motion[:3, 3] = axis * value
        else:
            motion[:3, :3] = _rotation(axis, value)
        T = T @ motion
    p = T[:3, 3]
    J = np.array(
        [[*axis, 0, 0, 0] if kind == "prismatic" else [*np.cross(axis, p - o), *axis] for kind, axis, o in joints]
    )
    return p, T[:3, :3], J.T


SKEWED_URDF = """<robot name="skewed">
  <link name="base"/><link name="a"/><link name="b"/><link name="c"/><link name="tip"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.5"/><axis xyz="0.6 0 0.8"/></joint>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/>
    <origin xyz="0 0.4 0" rpy="0 0 0"/><axis xyz="0 0 -1"/></joint>
  <joint name="j3" type="prismatic"><parent link="b"/><child link="c"/>
    <origin xyz="0.2 0 0" rpy="1.5707963 0 0"/><axis xyz="1 1 0"/></joint>
  <joint name="fixed" type="fixed"><parent link="c"/><child link="tip"/>
    <origin xyz="0 0 0.1" rpy="0 0.7 0"/></joint>
</robot>
"""


@pytest.mark.parametrize(
    ("urdf", "base_link", "tip_link"),
    [
        (ARM.urdf, ARM.base_link, ARM.tcp_link),
        (ARM.urdf, ARM.base_link, "panda_leftfinger"),  # a prismatic joint along +y last
        (ARM.urdf, ARM.base_link, "panda_rightfinger"),  # ... along -y
        (None, "base", "tip"),  # skewed revolute axes, -z, a prismatic joint along a diagonal, a fixed tip
    ],
)
def test_generated_forward_kinematics_equal_a_textbook_reference(tmp_path, urdf, base_link, tip_link):
    if urdf is None:
        urdf = tmp_path / "skewed.urdf"
        urdf.write_text(SKEWED_URDF)
    chain = KinematicChain(urdf, base_link, tip_link)
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.uniform(-2.5, 2.5, len(chain.joint_names))
        p, R, J = chain.forward(q, BASE)
        p_ref, R_ref, J_ref = _reference_forward(urdf, base_link, tip_link, q)
        assert np.allclose(p, p_ref + BASE, rtol=0, atol=1e-12)
        assert np.allclose(R, R_ref, rtol=0, atol=1e-12)
        assert J.shape == (6, len(chain.joint_names)) and np.allclose(J, J_ref, rtol=0, atol=1e-12)
        assert np.array_equal(chain.forward(list(q), BASE)[0], p)  # a list as well as an array
        assert np.allclose(chain.forward(q)[0], p_ref, rtol=0, atol=1e-12)  # no base: the base link's frame


def test_forward_kinematics_reject_the_wrong_number_of_joints():
    chain = KinematicChain(ARM.urdf, ARM.base_link, ARM.tcp_link)
    with pytest.raises(ValueError, match=r"q must hold 7 joint positions"):
        chain.forward(np.zeros(6))


def test_ik_reaches_targets_with_the_gripper_pointing_down():
    chain = KinematicChain(ARM.urdf, ARM.base_link, ARM.tcp_link)
    lower, upper = np.array([j.lower for j in ARM.joints]), np.array([j.upper for j in ARM.joints])
    home = np.array(ARM.home)
    rng = np.random.default_rng(2)
    for _ in range(20):
        target = np.array([rng.uniform(-0.15, 0.15), rng.uniform(-0.15, 0.15), rng.uniform(0.0, 0.3)])
        q = solve_ik(chain, home, target, lower, upper, base=BASE, iterations=50)
        p, R, _ = chain.forward(q, BASE)
        assert np.linalg.norm(p - target) < 1e-3
        assert np.all(q >= lower) and np.all(q <= upper)
        assert R[:, 2] == pytest.approx(DOWN[:, 2], abs=0.02)  # the tool's z axis points down


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(kind="mobile"), "kind"),
        (lambda d: d["joints"][1].update(upper=-2.0), "joints[1].upper"),
        (lambda d: d.update(home=d["home"][:3]), "home"),
        (lambda d: d["gripper"].update(max_width=80), "gripper.max_width"),
        (lambda d: d.update(urdf="missing.urdf"), "urdf"),
        (lambda d: d.update(tcp_lnk="x"), "tcp_lnk"),
    ],
)
def test_bad_arm_spec_names_file_and_field(tmp_path, edit, field):
    import shutil

    import yaml

    data = yaml.safe_load((ARM.urdf.parent / "panda.yaml").read_text())
    edit(data)
    shutil.copy(ARM.urdf, tmp_path / "panda.urdf")
    path = tmp_path / "arm.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigFileError) as err:
        load_arm(path)
    assert "arm.yaml" in str(err.value) and field in str(err.value)


def test_unknown_arm_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown arm 'pand'.*did you mean 'panda'"):
        load_arm("pand")
