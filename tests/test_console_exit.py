"""console: a command's process ends with its code and its output, and
waits for what it started; a Ctrl-C the runner wrapped is known."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests import helpers as H


def _python(code: str, tmp_path):
  return subprocess.run([sys.executable, '-c', textwrap.dedent(code)],
                        capture_output=True, text=True, cwd=tmp_path,
                        timeout=120, preexec_fn=H.ctrl_c_as_at_a_terminal)


@pytest.mark.parametrize('code', [0, 1, 2])
def test_output_flushed_and_code_kept(tmp_path, code):
  done = _python(f"""
      import sys
      from pipeline.commands import console
      sys.stdout.write('to stdout, buffered')
      sys.stderr.write('to stderr')
      console.exit_process({code})
      """, tmp_path)
  assert done.returncode == code
  assert done.stdout == 'to stdout, buffered'
  assert done.stderr == 'to stderr'


def test_waits_for_a_running_thread(tmp_path):
  done = _python("""
      import threading, time
      from pipeline.commands import console
      def late():
        time.sleep(0.5)
        open('written', 'w').write('yes')
      threading.Thread(target=late).start()
      console.exit_process(0)
      """, tmp_path)
  assert done.returncode == 0, done.stderr
  assert (tmp_path / 'written').read_text() == 'yes'


def test_waits_for_a_child_process(tmp_path):
  done = _python("""
      import multiprocessing, time
      from pipeline.commands import console
      def late():
        time.sleep(0.5)
        open('written', 'w').write('yes')
      if __name__ == '__main__':
        multiprocessing.get_context('fork').Process(target=late).start()
        console.exit_process(0)
      """, tmp_path)
  assert done.returncode == 0, done.stderr
  assert (tmp_path / 'written').read_text() == 'yes'


def test_logging_handlers_flushed(tmp_path):
  done = _python("""
      import logging, logging.handlers
      from pipeline.commands import console
      # Holds its lines until flushed or closed (logging.shutdown).
      handler = logging.handlers.MemoryHandler(
          1000, logging.CRITICAL, logging.FileHandler('log.txt'))
      logging.getLogger().addHandler(handler)
      logging.getLogger().warning('the last line')
      console.exit_process(0)
      """, tmp_path)
  assert done.returncode == 0, done.stderr
  assert 'the last line' in (tmp_path / 'log.txt').read_text()


def test_a_wrapped_ctrl_c_is_known():
  from pipeline.commands import console  # pylint: disable=import-outside-toplevel
  try:
    try:
      raise KeyboardInterrupt
    except KeyboardInterrupt:
      raise RuntimeError("KeyboardInterrupt [while running 'Finalize']")  # pylint: disable=raise-missing-from
  except RuntimeError as e:
    wrapped = e
  assert console.interrupted(wrapped)
  plain = ValueError('bad window')
  plain.__context__ = OSError('disk')
  assert not console.interrupted(plain)
  looped = ValueError('a')
  looped.__context__ = ValueError('b')
  looped.__context__.__context__ = looped
  assert not console.interrupted(looped)


def test_a_ctrl_c_while_importing_is_one_line_and_130(tmp_path):
  """A command's modules take a second to import: a Ctrl-C then is not
  a traceback of the import it stopped."""
  done = _python("""
      import os, signal, time
      from pipeline.commands import startup
      def command():
        os.kill(os.getpid(), signal.SIGINT)  # raised at the next line
        time.sleep(30)
      startup.interrupted_in_one_line(command)
      """, tmp_path)
  assert (done.returncode, done.stderr) == (130, '\nwavbeam: interrupted\n')


def test_a_ctrl_c_ends_the_process_from_the_signal_handler(tmp_path):
  """Wherever the main thread is: here holding logging's lock, which a
  KeyboardInterrupt swallowed by a library would leave held."""
  done = _python("""
      import logging, os, signal, threading
      from pipeline.commands import console
      console.exit_at_interrupt(lambda: 'stopped; the folder is as a kill '
                                'leaves it\\n')
      logging._lock.acquire()  # as Beam's set-up held it
      threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
      threading.Event().wait(30)
      """, tmp_path)
  assert done.returncode == 130
  assert done.stderr == 'stopped; the folder is as a kill leaves it\n'


def test_what_was_printed_before_a_ctrl_c_is_kept(tmp_path):
  done = subprocess.run([sys.executable, '-c', textwrap.dedent("""
      import os, signal, time
      from pipeline.commands import startup
      def command():
        print('first lines of a report')  # buffered: stdout is a pipe
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
      startup.interrupted_in_one_line(command)
      """)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                        env={k: v for k, v in os.environ.items()
                             if k != 'PYTHONUNBUFFERED'},
                        preexec_fn=H.ctrl_c_as_at_a_terminal)
  assert done.returncode == 130
  assert done.stdout == 'first lines of a report\n'


def test_the_run_command_puts_the_ctrl_c_handler_back(tmp_path):
  """For whoever calls it in-process (a test, a notebook): a later Ctrl-C
  is theirs again, not a stale 'wavbeam: interrupted'."""
  done = _python(f"""
      import signal
      from pipeline.commands import run
      code = run.main(['--input_dir', {str(tmp_path / 'missing')!r},
                       '--output_dir', {str(tmp_path / 'out')!r}])
      print(code, signal.getsignal(signal.SIGINT) is
            signal.default_int_handler)
      """, tmp_path)
  assert done.stdout.split() == ['2', 'True'], done.stderr[-2000:]


def test_a_ctrl_c_ignored_at_start_stays_ignored(tmp_path):
  """A job started in the background (SIGINT ignored) is not stopped by
  a Ctrl-C meant for the terminal's foreground."""
  done = _python("""
      import os, signal, time
      signal.signal(signal.SIGINT, signal.SIG_IGN)
      from pipeline.commands import console
      console.exit_at_interrupt(lambda: 'stopped\\n')
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.2)
      print('still running')
      """, tmp_path)
  assert (done.returncode, done.stdout) == (0, 'still running\n')
