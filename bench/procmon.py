"""Run a command; report wall time and peak RSS summed over its process tree."""

import os
import subprocess
import threading
import time


def as_installed(env=None) -> dict:
  """`env` (default: this process's) for a timed command, with Python's
  bytecode cache allowed: an installed package has its modules compiled
  once, and a shell that sets PYTHONDONTWRITEBYTECODE would bill the
  compiling of every module of the checkout (0.1 s) to each run."""
  env = dict(os.environ if env is None else env)
  env.pop('PYTHONDONTWRITEBYTECODE', None)
  return env


def _tree_rss(root: int) -> int:
  children = {}
  rss = {}
  for pid in os.listdir('/proc'):
    if not pid.isdigit():
      continue
    try:
      with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
      children.setdefault(int(fields[1]), []).append(int(pid))
      rss[int(pid)] = int(fields[21]) * os.sysconf('SC_PAGE_SIZE')
    except (OSError, IndexError, ValueError):
      continue
  total, stack = 0, [root]
  while stack:
    pid = stack.pop()
    total += rss.get(pid, 0)
    stack.extend(children.get(pid, []))
  return total


def run_measured(cmd, env=None, cwd=None, also=()):
  """-> (wall seconds, peak summed RSS bytes, stdout).

  `also`: more process ids (e.g. a Dask cluster's) whose trees count too.
  """
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=as_installed(env), cwd=cwd, text=True)
  peak = [0]
  done = threading.Event()

  def poll():
    while not done.is_set():
      peak[0] = max(peak[0], sum(_tree_rss(p) for p in (proc.pid, *also)))
      done.wait(0.05)

  t = threading.Thread(target=poll, daemon=True)
  t.start()
  out, err = proc.communicate()
  wall = time.perf_counter() - start
  done.set()
  t.join()
  if proc.returncode != 0:
    raise RuntimeError(f'{cmd} failed ({proc.returncode}):\n{err[-3000:]}')
  return wall, peak[0], out
