"""policy_node over DDS against what real bases send: best-effort and reliable sensor publishers, an
incompatible QoS, malformed scans, unknown frames, a NaN subgoal, skewed stamps, a close obstacle, a
subgoal in the map frame. The test process is the base: it publishes /odom and /scan at 20 Hz (a robot
standing still, a subgoal 5 m ahead, so the policy keeps driving) and listens to /cmd_vel."""

import math
import re
import time

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import LaserScan
from std_msgs.msg import String

from hrl.ros.qos import advertise
from tests.ros.conftest import spin_until

N_BEAMS = 360
NODE = ("control_hz:=20.0", "stuck_s:=1000.0", "subgoal_budget_s:=1000.0", "stale_timeout_s:=0.4")


class StandIn:
    """A base standing at the odom origin in free space: /odom and /scan at 20 Hz from a timer, with
    ``odom`` and ``scan`` messages a test may spoil; /cmd_vel and /subgoal_status recorded."""

    def __init__(self, node, qos="reliable"):
        self.node = node
        self.cmds: list[tuple[float, float, float]] = []
        self.status: list[str] = []
        node.create_subscription(Twist, "/cmd_vel", self.on_cmd, 50)
        node.create_subscription(String, "/subgoal_status", lambda m: self.status.append(m.data), 10)
        self.goal_pub = node.create_publisher(PoseStamped, "/subgoal", 10)
        self.reset()
        self.publishers(qos)
        node.create_timer(0.05, self.publish)

    def on_cmd(self, msg):
        self.cmds.append((time.monotonic(), msg.linear.x, msg.angular.z))

    def reset(self):
        self.odom = Odometry()
        self.odom.header.frame_id = "odom"
        self.odom.pose.pose.orientation.w = 1.0
        self.scan = LaserScan()
        self.scan.header.frame_id = "laser"
        inc = 2 * math.pi / N_BEAMS
        self.scan.angle_min, self.scan.angle_max, self.scan.angle_increment = -math.pi, math.pi - inc, inc
        self.scan.range_min, self.scan.range_max = 0.05, 8.0
        self.scan.ranges = np.full(N_BEAMS, 3.0, dtype=np.float32).tolist()
        self.stamp = True

    def publishers(self, qos):
        """(Re)create the sensor publishers with the named QoS profile (hrl.ros.qos); None: no sensors."""
        for pub in getattr(self, "pubs", ()):
            self.node.destroy_publisher(pub)
        self.pubs = ()
        if qos is not None:
            self.pubs = (
                advertise(self.node, Odometry, "/odom", qos, "odom"),
                advertise(self.node, LaserScan, "/scan", qos, "scan"),
            )

    def publish(self):
        if not self.pubs:
            return
        if self.stamp:
            now = self.node.get_clock().now().to_msg()
            self.odom.header.stamp = self.scan.header.stamp = now
        self.pubs[0].publish(self.odom)
        self.pubs[1].publish(self.scan)

    def goal(self, x=5.0, y=0.0, frame="odom"):
        g = PoseStamped()
        g.header.frame_id = frame
        g.pose.position.x, g.pose.position.y = x, y
        self.goal_pub.publish(g)

    def recent(self, seconds):
        now = time.monotonic()
        return [(v, w) for t, v, w in self.cmds if now - t <= seconds]

    def moving(self):
        return any(v > 0.05 for v, _ in self.recent(0.3))

    def stopped(self):
        """At least 0.4 s of commands, every one of them an actual zero (silence is not a stop)."""
        window = self.recent(0.4)
        return len(window) >= 5 and all(c == (0.0, 0.0) for c in window)

    def spin(self, until, timeout):
        return spin_until(self.node, until, timeout)

    def drive(self, timeout=20):
        """Send the subgoal until the node drives toward it."""
        return self.spin(lambda: self.moving() or self.goal() or False, timeout)


def test_best_effort_and_reliable_sensor_publishers_both_drive_the_node(processes, rclpy_node):
    policy = processes.start("hrl.ros.policy_node", *NODE)
    base = StandIn(rclpy_node, qos="sensor_data")  # best effort: what lidar drivers and sim bridges send
    assert base.drive(90), "a best-effort /scan and /odom must drive the node\n" + processes.log(policy)
    assert "frames: laser pose in 'base_link' 0,0,0 (parameter laser_pose); assuming 'map' = 'odom'" in processes.log(
        policy
    ), "the map = odom assumption is stated at start"
    base.publishers(None)  # the sensors go quiet: the node stops...
    assert base.spin(base.stopped, 10), processes.log(policy)
    base.publishers("reliable")  # ...and a reliable base drives it again
    assert base.drive(20), "a reliable /scan and /odom must drive the node\n" + processes.log(policy)


def test_a_reliable_scan_subscription_names_the_fix_for_a_best_effort_lidar(processes, rclpy_node):
    policy = processes.start("hrl.ros.policy_node", *NODE, "scan_qos:=reliable")
    base = StandIn(rclpy_node, qos="sensor_data")
    want = "/scan: a publisher's QoS is incompatible with this subscription (scan_qos=reliable; policy RELIABILITY)"
    assert base.spin(lambda: want in processes.log(policy), 90), processes.log(policy)
    assert "set scan_qos:=sensor_data" in processes.log(policy)
    base.goal()
    assert base.spin(base.stopped, 10), "no scan gets in, so the node must not drive"


def test_malformed_inputs_stop_the_node_with_a_logged_reason(processes, rclpy_node):
    policy = processes.start("hrl.ros.policy_node", *NODE, "map_to_odom:=1.0,2.0,0.0")
    base = StandIn(rclpy_node)
    assert base.drive(90), processes.log(policy)
    log = lambda: processes.log(policy)  # noqa: E731

    def spoil(what, reason):
        what()
        assert base.spin(base.stopped, 10), f"{reason}: the node must publish zeros\n{log()}"
        assert base.spin(lambda: reason in log(), 5), f"{reason!r} not logged\n{log()}"
        base.reset()
        assert base.drive(10), f"after {reason}: driving again\n{log()}"

    spoil(lambda: setattr(base.scan, "ranges", [3.0] * 100), "100 ranges, but angle_min")
    spoil(lambda: setattr(base.scan, "angle_increment", 0.0), "angle_increment is 0")
    spoil(lambda: setattr(base.scan, "range_max", 0.01), "need 0 <= range_min < range_max")
    spoil(lambda: setattr(base.scan, "angle_max", math.nan), "non-finite scan geometry")
    spoil(lambda: setattr(base.odom.header, "frame_id", "world"), "pose in frame 'world', not odom_frame 'odom'")
    spoil(lambda: setattr(base.scan.header, "frame_id", "laser2"), "scan in frame 'laser2'; laser_pose was taken")

    base.goal(math.nan, 0.0)  # a NaN subgoal: stop until a usable one comes
    assert base.spin(base.stopped, 10) and "non-finite subgoal (nan, 0.0)" in log()
    assert base.drive(10), log()

    base.goal(5.0, 0.0, frame="world")
    assert base.spin(lambda: base.status and base.stopped(), 10), log()
    assert base.status[-1] == "failed 5.000 0.000: frame 'world' is neither odom_frame 'odom' nor map_frame 'map'"
    assert base.drive(10), log()

    # a subgoal in the map frame goes through map_to_odom: map (1, 2) is the odom origin, where the robot is
    base.goal(1.0, 2.0, frame="map")
    assert base.spin(lambda: "reached 1.000 2.000" in base.status, 10), log()
    assert "assuming 'map'" not in log() and "converted with map_to_odom 1.0,2.0,0.0" in log()
    assert base.spin(base.stopped, 10), "nothing left to drive to"
    assert base.drive(10), log()

    # stamps a day in the past or an hour ahead: warned about, and the node still drives (staleness is by
    # receive time)
    base.stamp = False
    base.odom.header.stamp.sec = base.scan.header.stamp.sec = int(time.time()) - 86400
    assert base.spin(lambda: re.search(r"/odom: header stamps are 86[34]\d\d\.\d s in the past", log()), 10), log()
    base.spin(lambda: False, 1.0)
    assert base.moving(), log()
    base.stamp = True  # back on the clock, then an hour ahead of it
    base.spin(lambda: False, 0.5)
    base.stamp = False
    base.odom.header.stamp.sec = base.scan.header.stamp.sec = int(time.time()) + 3600
    assert base.spin(lambda: re.search(r"/scan: header stamps are 3[56]\d\d\.\d s in the future", log()), 10), log()
    base.spin(lambda: False, 1.0)
    assert base.moving(), log()

    # an obstacle 0.25 m ahead (0.05 m from the footprint): no forward command, turning allowed
    base.reset()
    ranges = np.full(N_BEAMS, 3.0, dtype=np.float32)
    ranges[175:186] = 0.25  # straight ahead is beam 180
    base.scan.ranges = ranges.tolist()
    assert base.spin(lambda: len(base.recent(0.5)) >= 5 and all(v <= 0 for v, _ in base.recent(0.5)), 10), log()
    assert "stopped: obstacle ahead within stop_distance 0.1 m" in log()
    assert policy.poll() is None, "never a crashed node"
