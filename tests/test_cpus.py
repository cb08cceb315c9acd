"""The worker count follows the CPUs a run may use: its affinity
(taskset, a cpuset) and its cgroup's CPU quota, not the machine's
cores."""

import os
import subprocess
import sys
import uuid

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
  _write(tmp_path, files)
  assert cpus.cgroup_quota(str(tmp_path), _own(tmp_path, '0::/')) == expected


def test_a_quota_caps_the_affinity_rounded_up(tmp_path):
  own = _own(tmp_path, '0::/')
  (tmp_path / 'cpu.max').write_text('50000 100000')
  assert cpus.usable_cpus(str(tmp_path), own) == 1
  (tmp_path / 'cpu.max').write_text('max 100000')
  assert cpus.usable_cpus(str(tmp_path), own) == len(os.sched_getaffinity(0))


def _write(root, files):
  for name, text in files.items():
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)


def _own(tmp_path, text):
  """A /proc/self/cgroup of the given lines."""
  path = tmp_path.parent / (tmp_path.name + '-proc-cgroup')
  path.write_text(text)
  return str(path)


V2_SCOPE = '0::/user.slice/run-u7.scope\n'
V1_DOCKER = ('12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n'
             '1:name=systemd:/docker/abc\n')


@pytest.mark.parametrize('own, files, expected', [
    # systemd-run -p CPUQuota=50%: the unit's own cgroup
    (V2_SCOPE, {'user.slice/run-u7.scope/cpu.max': '50000 100000',
                'user.slice/cpu.max': 'max 100000'}, 0.5),
    # a slice's quota bounds every unit under it
    (V2_SCOPE, {'user.slice/run-u7.scope/cpu.max': '250000 100000',
                'user.slice/cpu.max': '100000 100000'}, 1.0),
    (V2_SCOPE, {'user.slice/run-u7.scope/cpu.max': 'max 100000'}, None),
    # inside a cgroup namespace the process's cgroup is not under the
    # mount: the mount's own files are the process's
    (V2_SCOPE, {'cpu.max': '200000 100000'}, 2.0),
    ('0::/../../escape\n', {'cpu.max': '300000 100000'}, 3.0),
    # a cgroup beside the namespace's: not the folder of that name here
    ('0::/../x\n', {'cpu.max': '300000 100000',
                    'x/cpu.max': '100000 100000'}, 3.0),
    # cgroup v1, a container in the host's tree
    (V1_DOCKER, {'cpu/docker/abc/cpu.cfs_quota_us': '150000',
                 'cpu/docker/abc/cpu.cfs_period_us': '100000',
                 'cpu/cpu.cfs_quota_us': '-1',
                 'cpu/cpu.cfs_period_us': '100000'}, 1.5),
    (V1_DOCKER, {'cpu/cpu.cfs_quota_us': '400000',
                 'cpu/cpu.cfs_period_us': '100000'}, 4.0),
    # a hybrid layout: the cpu controller on v1, an empty v2 beside it
    ('1:cpu:/batch\n0::/\n',
     {'cpu/batch/cpu.cfs_quota_us': '100000',
      'cpu/batch/cpu.cfs_period_us': '100000',
      'unified/cgroup.controllers': ''}, 1.0),
    ('', {'cpu.max': '100000 100000'}, 1.0),
])
def test_the_quota_of_the_process_s_own_cgroup_and_those_above(
    tmp_path, own, files, expected):
  _write(tmp_path, files)
  assert cpus.cgroup_quota(str(tmp_path), _own(tmp_path, own)) == expected


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


def _quota_cgroup(quota_us: int, period_us: int = 100000):
  """A new cgroup of this CPU quota (v1's cpu controller or v2's), as a
  folder a process joins by writing its pid to cgroup.procs; None where
  this process may not make one (not root, a read-only or delegated
  hierarchy)."""
  name = f'wavbeam-test-{uuid.uuid4().hex[:12]}'
  v1 = os.path.join(cpus.CGROUP, 'cpu')
  try:
    if os.path.exists(os.path.join(v1, 'cpu.cfs_quota_us')):
      folder = os.path.join(v1, name)
      os.mkdir(folder)
      _put(folder, 'cpu.cfs_period_us', period_us)
      _put(folder, 'cpu.cfs_quota_us', quota_us)
      return folder
    folder = os.path.join(cpus.CGROUP, name)
    os.mkdir(folder)
    if not os.path.exists(os.path.join(folder, 'cpu.max')):
      os.rmdir(folder)
      return None
    _put(folder, 'cpu.max', f'{quota_us} {period_us}')
    return folder
  except OSError:
    if 'folder' in locals() and os.path.isdir(folder):
      os.rmdir(folder)
    return None


def _put(folder, name, value):
  with open(os.path.join(folder, name), 'w') as f:
    f.write(str(value))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, 'sched_getaffinity') or
                    len(os.sched_getaffinity(0)) < 2,
                    reason='needs 2 CPUs to see a quota of half of one')
def test_a_process_in_a_cgroup_of_half_a_cpu_runs_one_worker():
  """As `systemd-run -p CPUQuota=50% wavbeam run ...`: the quota sits in
  the process's own cgroup, not at the hierarchy's root."""
  folder = _quota_cgroup(50000)
  if folder is None:
    pytest.skip('this process may not make a cgroup with a CPU quota')
  code = ('from apache_beam.options.pipeline_options import DirectOptions'
          '\nfrom pipeline.commands import run'
          '\nd = run.pipeline_options([]).view_as(DirectOptions)'
          '\nprint(d.direct_num_workers, d.direct_running_mode)')
  try:
    # The shell joins the cgroup, then becomes the Python process.
    out = subprocess.run(
        ['sh', '-c', 'echo $$ > "$1/cgroup.procs" && exec "$2" -c "$3"',
         'sh', folder, sys.executable, code],
        cwd=ROOT, check=True, capture_output=True, text=True,
        timeout=300).stdout
  finally:
    os.rmdir(folder)
  assert out.split('\n')[0] == '1 in_memory'

