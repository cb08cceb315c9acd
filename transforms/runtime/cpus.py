"""The CPUs a run may use: what its worker count follows.

os.cpu_count() is the machine's cores. A process pinned with taskset (or
a container's cpuset) may run on fewer, and a container's CPU quota
(cgroup v2's cpu.max, v1's cfs_quota_us) lets it use fewer still: one
worker per machine core there starts processes that only wait their
turn, each holding its memory."""

import math
import os
from typing import List, Optional, Tuple

CGROUP = '/sys/fs/cgroup'
PROC_CGROUP = '/proc/self/cgroup'


def usable_cpus(cgroup_root: str = CGROUP,
                proc_cgroup: str = PROC_CGROUP) -> int:
  """The CPUs this process may run on (its affinity), capped by its
  cgroups' CPU quota, rounded up; at least 1."""
  try:
    count = len(os.sched_getaffinity(0))
  except (AttributeError, OSError):  # not on Linux
    count = os.cpu_count() or 1
  quota = cgroup_quota(cgroup_root, proc_cgroup)
  if quota is not None:
    count = min(count, math.ceil(quota))
  return max(1, count)


def cgroup_quota(root: str = CGROUP,
                 proc_cgroup: str = PROC_CGROUP) -> Optional[float]:
  """CPUs' worth of time this process may use (quota / period), or None
  without a limit: the smallest quota of its own cgroup and of those
  above it. A quota is rarely set at the hierarchy's root: systemd puts
  CPUQuota= in a unit's or slice's cgroup (`systemd-run -p CPUQuota=`),
  and a container without its own cgroup namespace sits deep in the
  host's tree. cgroup v2 holds it in cpu.max ('max 100000', '150000
  100000'), v1 in the cpu controller's cpu.cfs_quota_us (-1: none) and
  cpu.cfs_period_us."""
  v2, v1 = _own_paths(proc_cgroup)
  if os.path.exists(os.path.join(root, 'cpu.max')) or (
      v2 is not None and not os.path.isdir(os.path.join(root, 'cpu'))):
    return _smallest(_up_from(root, v2), _v2_quota)
  return _smallest(_up_from(os.path.join(root, 'cpu'), v1), _v1_quota)


def _own_paths(proc_cgroup: str) -> Tuple[Optional[str], Optional[str]]:
  """(cgroup v2 path, cgroup v1 cpu controller's path) of this process,
  from /proc/self/cgroup's 'id:controllers:path' lines; None where it
  has none."""
  v2 = v1 = None
  for line in (_read(proc_cgroup) or '').splitlines():
    parts = line.split(':', 2)
    if len(parts) != 3:
      continue
    _, controllers, path = parts
    if controllers == '':
      v2 = path
    elif 'cpu' in controllers.split(','):
      v1 = path
  return v2, v1


def _up_from(mount: str, path: Optional[str]) -> List[str]:
  """The folders of `path` in the hierarchy mounted at `mount`, and each
  one above it up to `mount` itself. Only `mount` when the path is not
  there: inside a cgroup namespace the mount is the process's own
  cgroup, and /proc/self/cgroup shows '/' (or, for a v1 mount, the
  host's path)."""
  parts = [p for p in (path or '').split('/') if p and p != '.']
  folder = os.path.join(mount, *parts)
  # '..': a cgroup outside the namespace's, not under this mount.
  if not parts or '..' in parts or not os.path.isdir(folder):
    return [mount]
  return [os.path.join(mount, *parts[:n]) for n in range(len(parts), -1, -1)]


def _smallest(folders: List[str], quota_in) -> Optional[float]:
  quotas = [q for q in map(quota_in, folders) if q is not None]
  return min(quotas) if quotas else None


def _v2_quota(folder: str) -> Optional[float]:
  parts = (_read(os.path.join(folder, 'cpu.max')) or '').split()
  if len(parts) == 2 and parts[0] != 'max':
    return _ratio(parts[0], parts[1])
  return None


def _v1_quota(folder: str) -> Optional[float]:
  quota = _read(os.path.join(folder, 'cpu.cfs_quota_us'))
  period = _read(os.path.join(folder, 'cpu.cfs_period_us'))
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
