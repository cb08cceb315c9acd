"""A real dask.distributed cluster on 127.0.0.1, for tests and benchmarks."""

import contextlib
import os
import socket
import subprocess
import sys


def free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def dask_cluster(workers=2, cwd=None):
  """Starts `dask scheduler` and `workers` `dask worker` processes (one
  thread each); yields (address, pids); stops them all."""
  from distributed import Client  # pylint: disable=import-outside-toplevel
  dask = os.path.join(os.path.dirname(sys.executable), 'dask')
  port = free_port()
  address = f'tcp://127.0.0.1:{port}'
  procs = [subprocess.Popen(
      [dask, 'scheduler', '--host', '127.0.0.1', '--port', str(port),
       '--no-dashboard'], stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL)]
  try:
    for _ in range(workers):
      procs.append(subprocess.Popen(
          [dask, 'worker', address, '--nthreads', '1', '--no-dashboard',
           '--host', '127.0.0.1'], cwd=cwd, stdout=subprocess.DEVNULL,
          stderr=subprocess.DEVNULL))
    with Client(address, timeout=60) as client:
      client.wait_for_workers(workers, timeout=120)
    yield address, [p.pid for p in procs]
  finally:
    for proc in reversed(procs):
      proc.terminate()
    for proc in procs:
      try:
        proc.wait(timeout=30)
      except subprocess.TimeoutExpired:
        proc.kill()
