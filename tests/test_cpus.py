"""The worker count follows the CPUs a run may use: its affinity
(taskset, a cpuset) and its cgroup's CPU quota, not the machine's
cores."""

import os
import subprocess
import sys

import pytest

from transforms.runtime import cpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('files, expected', [
    ({'cpu.max': 'max 100000\n'}, None),
    ({'cpu.max': '150000 100000\n'}, 1.5),
    ({'cpu.max': '50000 100000'}, 0.5),
    ({'cpu/cpu.cfs_quota_us': '-1', 'cpu/cpu.cfs_period_us': '100000'},
     None),
    ({'cpu/cpu.cfs_quota_us': '300000', 'cpu/cpu.cfs_period_us': '100000'},
     3.0),
    ({'cpu.max': 'garbage'}, None),
    ({}, None),
])
def test_the_cgroup_quota_in_cpus(tmp_path, files, expected):
  for name, text in files.items():
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(text)
  assert cpus.cgroup_quota(str(tmp_path)) == expected


def test_a_quota_caps_the_affinity_rounded_up(tmp_path):
  (tmp_path / 'cpu.max').write_text('50000 100000')
  assert cpus.usable_cpus(str(tmp_path)) == 1
  (tmp_path / 'cpu.max').write_text('max 100000')
  assert cpus.usable_cpus(str(tmp_path)) == len(os.sched_getaffinity(0))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, 'sched_setaffinity'),
                    reason='no CPU affinity on this system')
def test_a_process_pinned_to_one_cpu_runs_one_worker():
  """As `taskset -c 0 wavbeam run ...`: the local runner's workers."""
  code = ('import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})'
          '\nfrom apache_beam.options.pipeline_options import DirectOptions'
          '\nfrom pipeline.commands import run'
          "\nfor args in ([], ['--direct_num_workers=0']):"
          '\n  d = run.pipeline_options(args).view_as(DirectOptions)'
          '\n  print(d.direct_num_workers, d.direct_running_mode)')
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, check=True,
                       capture_output=True, text=True, timeout=300).stdout
  assert out.split('\n')[:2] == ['1 in_memory', '1 in_memory']
