"""bench.plan_scale runs the graph's own planning steps on made-up probes
(it checks that every window is assigned to a shard exactly once)."""

from bench import plan_scale


def test_the_planning_benchmark_runs_the_graphs_planning():
  result = plan_scale.run_one(700)
  assert result['files'] == 700 and result['blocks'] == 64
