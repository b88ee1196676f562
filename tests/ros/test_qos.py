"""hrl.ros.qos: named profiles, the QoS parameter check, and the incompatible-QoS warning over real DDS."""

import time

import pytest
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy, qos_profile_sensor_data
from std_msgs.msg import String

from hrl.ros.params import ParameterError, validate
from hrl.ros.qos import PROFILES, advertise, incompatible_message, profile, qos_param, subscribe
from tests.ros.conftest import spin_until


def test_a_qos_parameter_takes_a_profile_name_and_lists_them_otherwise():
    params = [qos_param("scan_qos", "sensor_data", "/scan in")]
    assert validate(params, {"scan_qos": "reliable"}) == {"scan_qos": "reliable"}
    assert "sensor_data | reliable | latched" in params[0].description
    with pytest.raises(ParameterError, match="'scan_qos' = 'best_effort' must be one of sensor_data, reliable"):
        validate(params, {"scan_qos": "best_effort"})
    with pytest.raises(ValueError, match="default 'fast' is not one of"):
        qos_param("x_qos", "fast", "x")


def test_profiles_are_what_their_names_say():
    assert set(PROFILES) == {"sensor_data", "reliable", "latched"}
    assert profile("sensor_data") == qos_profile_sensor_data
    assert profile("sensor_data").reliability == ReliabilityPolicy.BEST_EFFORT
    reliable = profile("reliable")
    assert (reliable.reliability, reliable.durability, reliable.depth) == (
        ReliabilityPolicy.RELIABLE,
        DurabilityPolicy.VOLATILE,
        10,
    )
    assert profile("latched").durability == DurabilityPolicy.TRANSIENT_LOCAL
    with pytest.raises(ValueError, match="unknown QoS profile 'fast'"):
        profile("fast")


def test_the_warning_names_the_topic_the_policy_and_the_parameter_to_set():
    text = incompatible_message("subscription", "/scan", "reliable", "scan_qos", "RELIABILITY")
    assert text.startswith("/scan: a publisher's QoS is incompatible") and "policy RELIABILITY" in text
    assert "set scan_qos:=sensor_data" in text
    text = incompatible_message("publisher", "/plan", "sensor_data", "plan_qos", "RELIABILITY")
    assert "set plan_qos:=reliable here" in text
    assert "set plan_qos:=latched" in incompatible_message("publisher", "/plan", "reliable", "plan_qos", "DURABILITY")


@pytest.mark.parametrize("publisher_profile", ["sensor_data", "reliable"])
def test_a_sensor_data_subscription_hears_best_effort_and_reliable_publishers(rclpy_node, publisher_profile):
    got = []
    subscribe(rclpy_node, String, "/qos_probe", lambda m: got.append(m.data), "sensor_data", "probe_qos")
    pub = advertise(rclpy_node, String, "/qos_probe", publisher_profile, "probe_out_qos")

    def sent_and_heard():
        pub.publish(String(data=publisher_profile))
        return bool(got)

    assert spin_until(rclpy_node, sent_and_heard, 20), f"nothing heard from a {publisher_profile} publisher"
    assert got[0] == publisher_profile


def test_a_reliable_subscription_warns_about_a_best_effort_publisher(rclpy_node, capfd):
    got = []
    subscribe(rclpy_node, String, "/qos_probe", lambda m: got.append(m.data), "reliable", "probe_qos")
    pub = advertise(rclpy_node, String, "/qos_probe", "sensor_data", "probe_out_qos")
    seen = ""

    def warned():
        nonlocal seen
        pub.publish(String(data="x"))
        seen += capfd.readouterr().err
        return "set probe_qos:=sensor_data" in seen and "a subscriber's QoS is incompatible" in seen

    assert spin_until(rclpy_node, warned, 20), seen
    assert "/qos_probe: a publisher's QoS is incompatible with this subscription (probe_qos=reliable" in seen
    time.sleep(0.2)
    assert not got, "DDS never delivers from a best-effort publisher to a reliable subscription"
