"""Run a command; report wall time and peak memory summed over its process
tree: resident (RSS, which counts a page shared by forked workers once per
worker) and, where the kernel reports it, proportional (PSS, each shared
page split among its sharers: what the tree costs the machine)."""

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


def _tree(root: int) -> dict:
  """{pid: RSS bytes} of `root` and its descendants."""
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
  tree, stack = {}, [root]
  while stack:
    pid = stack.pop()
    if pid in rss:
      tree[pid] = rss[pid]
    stack.extend(children.get(pid, []))
  return tree


def _pss(pid: int):
  """PSS bytes of one process, or None where the kernel does not say."""
  for name in ('smaps_rollup', 'smaps'):
    try:
      with open(f'/proc/{pid}/{name}') as f:
        kb = [int(line.split()[1]) for line in f if line.startswith('Pss:')]
    except (OSError, IndexError, ValueError):
      continue
    if kb:
      return sum(kb) * 1024
  return None


# Reading a process's PSS walks its page tables: sampled less often than
# RSS, so that the measuring does not take a core from what it measures.
PSS_EVERY_S = 0.25


def run_measured(cmd, env=None, cwd=None, also=(), pss=False):
  """-> (wall seconds, peak summed RSS bytes, stdout), and with `pss` the
  peak summed PSS bytes after them (None where no process's PSS could be
  read).

  `also`: more process ids (e.g. a Dask cluster's) whose trees count too.
  """
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=as_installed(env), cwd=cwd, text=True)
  peak = [0]
  peak_pss = [None]
  done = threading.Event()

  def poll():
    next_pss = 0.0
    while not done.is_set():
      tree = {}
      for root in (proc.pid, *also):
        tree.update(_tree(root))
      peak[0] = max(peak[0], sum(tree.values()))
      if pss and time.perf_counter() >= next_pss:
        next_pss = time.perf_counter() + PSS_EVERY_S
        known = [b for b in map(_pss, tree) if b is not None]
        if known:
          peak_pss[0] = max(peak_pss[0] or 0, sum(known))
      done.wait(0.05)

  t = threading.Thread(target=poll, daemon=True)
  t.start()
  out, err = proc.communicate()
  wall = time.perf_counter() - start
  done.set()
  t.join()
  if proc.returncode != 0:
    raise RuntimeError(f'{cmd} failed ({proc.returncode}):\n{err[-3000:]}')
  if pss:
    return wall, peak[0], out, peak_pss[0]
  return wall, peak[0], out
