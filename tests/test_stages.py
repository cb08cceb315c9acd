"""Where a run's time goes: the timeline marks
(transforms/runtime/timeline.py), the shard tasks' work times in
metadata.json, and bench.stages' arithmetic."""

import json
import math
import os
import subprocess
import sys

import pytest

from bench import stages as stages_bench
from transforms.runtime import timeline
from pipeline.contract import metadata as metadata_lib
from transforms.writing import extract
from transforms.writing.stats import ExampleStats, SplitSummary


def test_mark_does_nothing_without_the_variable(tmp_path, monkeypatch):
  monkeypatch.delenv(timeline.ENV, raising=False)
  monkeypatch.chdir(tmp_path)
  timeline.mark(timeline.PIPELINE)
  assert os.listdir(tmp_path) == []


def test_marks_from_processes_land_in_one_file(tmp_path, monkeypatch):
  path = tmp_path / 'marks'
  monkeypatch.setenv(timeline.ENV, str(path))
  timeline.mark(timeline.PIPELINE)
  subprocess.run([sys.executable, '-c',
                  'from transforms.runtime import timeline; '
                  'timeline.mark(timeline.PROBE_END)'],
                 check=True,
                 cwd=os.path.dirname(os.path.dirname(__file__)))
  timeline.mark(timeline.PROBE_END)
  events = timeline.parse(path.read_text().splitlines())
  assert sorted(events) == [timeline.PIPELINE, timeline.PROBE_END]
  assert len(events[timeline.PROBE_END]) == 2
  assert events[timeline.PROBE_END] == sorted(events[timeline.PROBE_END])
  pids = {line.split()[2] for line in path.read_text().splitlines()}
  assert len(pids) == 2


def test_stages_are_consecutive_and_add_up():
  events = timeline.parse([
      'pipeline 12.0 1', 'listing_start 13.0 1', 'listing_end 13.5 1',
      'probe_start 13.6 2', 'probe_end 14.0 2', 'probe_start 13.7 3',
      'probe_end 14.5 3', 'planned 15.0 1', 'finalised 21.0 1', ''])
  got = timeline.stages(events, 10.0, 22.5, (16.0, 20.0))
  assert list(got) == list(timeline.STAGES)
  expected = {'start-up': 2.0, 'graph': 1.0, 'listing': 0.5, 'probing': 1.0,
              'planning': 0.5, 'grouping': 1.0, 'shards': 4.0,
              'finalising': 1.0, 'shutdown': 1.5}
  assert got == pytest.approx(expected)
  assert sum(got.values()) == pytest.approx(12.5)


def test_missing_or_early_marks_give_empty_phases():
  events = timeline.parse(['pipeline 12.0 1', 'planned 11.0 1'])
  got = timeline.stages(events, 10.0, 15.0, None)
  assert got['start-up'] == pytest.approx(2.0)
  assert got['planning'] == 0 and got['shards'] == 0
  assert all(v >= 0 for v in got.values())
  assert sum(got.values()) == pytest.approx(5.0)


def test_work_times_merge_and_sum_over_shards():
  a = ExampleStats(split='train', shard=0, read_ns=1, feature_ns=2,
                   encode_ns=3, write_ns=4)
  a.merge(ExampleStats(read_ns=10, feature_ns=20, encode_ns=30, write_ns=40))
  assert (a.read_ns, a.feature_ns, a.encode_ns, a.write_ns) == (
      11, 22, 33, 44)
  summary = SplitSummary()
  summary.add(a)
  summary.add(ExampleStats(split='train', shard=1, read_ns=5, write_ns=6))
  assert summary.work_ns('read_ns') == 16
  assert summary.work_ns('write_ns') == 50
  assert summary.feature_ns == 22


def test_timed_counts_only_the_time_spent_producing():
  stats = ExampleStats()

  def slow():
    for i in range(3):
      sum(range(20000))
      yield i

  got = []
  for item in extract.timed(slow(), stats):
    got.append(item)
  assert got == [0, 1, 2]
  assert stats.read_ns > 0
  assert stats.feature_ns == stats.encode_ns == stats.write_ns == 0


def _metadata(**written):
  meta = metadata_lib.build(
      name='d', version='1.0.0', created='2026-01-01T00:00:00+00:00',
      config={}, sample_rate=16000, class_names=['a'],
      schema=metadata_lib.schema_lib.Schema(), input_key='signal',
      splits={}, counts={'files_seen': 0, 'files_ok': 0,
                         'files_rejected': 0, 'rejections': 0,
                         'examples': 0}, compression='none',
      shards_written=metadata_lib.shards_written_entry(1000, 3000))
  meta['shards_written'].update(written)
  return metadata_lib.dumps(meta)


def test_metadata_records_the_work_times():
  entry = metadata_lib.shards_written_entry(1000, 3000, 0.5, 0.25, 0.125,
                                            0.0625)
  assert entry['seconds'] == 2.0
  assert (entry['feature_seconds'], entry['read_seconds'],
          entry['encode_seconds'], entry['write_seconds']) == (
              0.5, 0.25, 0.125, 0.062)
  assert 'write_seconds' not in metadata_lib.shards_written_entry(
      1000, 3000, 0.5, 0.25, 0.125)


def test_metadata_without_work_times_is_accepted():
  written = metadata_lib.parse(_metadata(), 'm')['shards_written']
  assert not set(metadata_lib.WORK_SECONDS) & set(written)
  written = metadata_lib.parse(_metadata(read_seconds=0, write_seconds=1.5),
                               'm')['shards_written']
  assert written['read_seconds'] == 0 and written['write_seconds'] == 1.5


@pytest.mark.parametrize('key', metadata_lib.WORK_SECONDS)
@pytest.mark.parametrize('value', [-1, 'soon', True, None])
def test_metadata_rejects_a_work_time_that_is_not_a_duration(key, value):
  with pytest.raises(metadata_lib.MetadataError, match=key):
    metadata_lib.parse(_metadata(**{key: value}), 'm')


def test_spread_and_cell():
  s = stages_bench.spread([3.0, 1.0, 2.0, 10.0, 2.5])
  assert s == {'median': 2.5, 'min': 1.0, 'max': 10.0}
  assert stages_bench.cell(s) == '2.50 (1.00-10.00)'
  assert stages_bench.cell(s, 0) == '2 (1-10)'


def test_deal_balances_totals_and_keeps_every_index():
  sizes = [5, 1, 4, 2, 3, 3]
  parts = stages_bench.deal(sizes, 2)
  assert sorted(i for p in parts for i in p) == list(range(len(sizes)))
  totals = [sum(sizes[i] for i in p) for p in parts]
  assert totals == [9, 9]
  assert stages_bench.deal([], 2) == [[], []]


def test_fraction_of_the_limit():
  assert stages_bench.fraction(2.0, 8.0) == 0.25
  assert math.isnan(stages_bench.fraction(2.0, 0.0))


def test_summary_of_rounds():
  jobs = [{'wall': w, 'peak_mb': 100.0,
           'stages': {**{n: 0.0 for n in timeline.STAGES}, 'shards': 2.0},
           'work': {'read': 0.5, 'feature': 1.0, 'encode': 0.5,
                    'write': 0.0}} for w in (4.0, 5.0, 8.0)]
  got = stages_bench.summarize('c', 100.0, 10, 3, jobs, [1.0, 2.0, 1.0],
                               [1.0, 0.5, 3.0])
  assert got['wall']['median'] == 5.0
  assert got['busy']['median'] == 0.5
  assert got['limit_audio_s_per_s'] == {'median': 100.0, 'min': 50.0,
                                        'max': 100.0}
  assert got['wall_of_limit'] == {'median': 0.25, 'min': 0.125,
                                  'max': 0.4}
  assert got['shards_of_limit']['median'] == 0.5
  # Each round's limit + floor against its own job: 2/4, 2.5/5, 4/8.
  assert got['wall_of_least'] == {'median': 0.5, 'min': 0.5, 'max': 0.5}
  assert got['shards_of_least'] == {'median': 1.25, 'min': 1.0, 'max': 2.0}
  table = stages_bench.to_markdown([got])
  assert table.count('\n| c |') == 3
  json.dumps(got)


def test_bench_run_reports_spread_beside_medians():
  from bench import run as bench_run
  s = bench_run.spread([4.0, 3.0, 3.5, 6.0, 3.2])
  assert s == (3.5, 3.0, 6.0)
  assert bench_run.cell(s, unit='x') == '3.50x (3.00-6.00x)'


def test_read_write_floor_reads_the_corpus_and_writes_the_bytes(
    tmp_path, monkeypatch):
  from bench import run as bench_run
  corpus = tmp_path / 'corpus'
  corpus.mkdir()
  for i in range(3):
    (corpus / f'{i}.wav').write_bytes(bytes(1000 * (i + 1)))
  monkeypatch.setattr(bench_run, 'ROOT', str(tmp_path))
  seconds = stages_bench.read_write_floor(str(corpus), 10_000, 10)
  assert seconds > 0
  assert not (tmp_path / 'stages_floor').exists()  # nothing left behind
