"""NodeProcesses.report: what a failed bring-up error shows of every node (a CI run once said only "the arm graph
did not come up", with two of its three nodes' logs)."""

from hrl.ros.runner import NodeProcesses


def test_report_says_of_every_node_whether_it_runs_or_how_it_ended_and_its_log(tmp_path):
    nodes = NodeProcesses(tmp_path)
    gone = nodes.start("hrl.ros.no_such_node")
    second = nodes.start("hrl.ros.no_such_node_either")
    try:
        gone.wait(timeout=60)
        report = nodes.report()
        assert gone.returncode != 0
        assert f"--- no_such_node_0 (exited with code {gone.returncode}) ---" in report
        assert "No module named hrl.ros.no_such_node" in report
        assert "--- no_such_node_either_1 (" in report  # every node, in the order started, running or not
        assert report.index("no_such_node_0") < report.index("no_such_node_either_1")
        second.wait(timeout=60)
        assert f"--- no_such_node_either_1 (exited with code {second.returncode}) ---" in nodes.report()
    finally:
        nodes.stop_all()
