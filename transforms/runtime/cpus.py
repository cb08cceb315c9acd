"""The CPUs a run may use: what its worker count follows.

os.cpu_count() is the machine's cores. A process pinned with taskset (or
a container's cpuset) may run on fewer, and a container's CPU quota
(cgroup v2's cpu.max, v1's cfs_quota_us) lets it use fewer still: one
worker per machine core there starts processes that only wait their
turn, each holding its memory."""

import math
import os
from typing import Optional

CGROUP = '/sys/fs/cgroup'


def usable_cpus(cgroup_root: str = CGROUP) -> int:
  """The CPUs this process may run on (its affinity), capped by its
  cgroup's CPU quota, rounded up; at least 1."""
  try:
    count = len(os.sched_getaffinity(0))
  except (AttributeError, OSError):  # not on Linux
    count = os.cpu_count() or 1
  quota = cgroup_quota(cgroup_root)
  if quota is not None:
    count = min(count, math.ceil(quota))
  return max(1, count)


def cgroup_quota(root: str = CGROUP) -> Optional[float]:
  """CPUs' worth of time the cgroup may use (quota / period), or None
  without a limit: cgroup v2's cpu.max ('max 100000', '150000 100000'),
  else v1's cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us."""
  text = _read(os.path.join(root, 'cpu.max'))
  if text is not None:
    parts = text.split()
    if len(parts) == 2 and parts[0] != 'max':
      return _ratio(parts[0], parts[1])
    return None
  quota = _read(os.path.join(root, 'cpu', 'cpu.cfs_quota_us'))
  period = _read(os.path.join(root, 'cpu', 'cpu.cfs_period_us'))
  if quota is None or period is None or quota.strip() == '-1':
    return None
  return _ratio(quota, period)


def _ratio(quota: str, period: str) -> Optional[float]:
  try:
    quota_us, period_us = int(quota), int(period)
  except ValueError:
    return None
  if quota_us <= 0 or period_us <= 0:
    return None
  return quota_us / period_us


def _read(path: str) -> Optional[str]:
  try:
    with open(path, encoding='ascii') as f:
      return f.read().strip()
  except (OSError, UnicodeDecodeError):
    return None
