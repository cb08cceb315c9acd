"""Planning at scale without audio: memory and time against the file count.

    .venv/bin/python -m bench.plan_scale [--files 100000,1000000]

Runs the planning part of the graph (graph.plan_stored_blocks: rate
counting and PlanBlock; PlanLayout; the shard assignment of every
window) on Beam's local runner, one process,
for synthetic probe results: blocks of WavInfo made inside the pipeline
from block numbers and stored as ProbeBlock stores them (one 3 s, 16 kHz
clip each, no audio file is read or listed),
then counts the window references per shard with a combiner instead of
grouping them. Each size runs as its own process; reports wall time and
peak memory (RSS of the whole process tree).
"""

import argparse
import json
import sys
import tempfile
import time

import apache_beam as beam

from pipeline import config as config_lib
from pipeline import graph
from transforms.inputs import block_store
from transforms.planning import layout as layout_lib
from transforms.planning import passes as planning
from transforms.inputs.audio_io import WavInfo
from transforms.inputs import blocks as blocks_lib

CLIP_FRAMES = 48000


def synthetic_block(block, files, block_files, dataset_dir):
  """A StoredBlock of `block_files` clips (fewer in the last block), as
  probing.ProbeBlock stores them."""
  first = block * block_files
  infos = tuple(
      WavInfo(i, f'/synthetic/{("a", "b", "c", "d")[i % 4]}/{i:09d}.wav',
              CLIP_FRAMES, 16000, 1, 'PCM_16', 96044, 0.0)
      for i in range(first, min(files, first + block_files)))
  return blocks_lib.StoredBlock(block,
                              block_store.write(dataset_dir, block, infos),
                              ((16000, len(infos)),))


def run_one(files: int) -> dict:
  with tempfile.TemporaryDirectory() as out:
    return _run_one(files, out)


def _run_one(files: int, out: str) -> dict:
  config = config_lib.PipelineConfig(
      input_dir='/synthetic', output_dir=out, win_len=16000,
      splits='train=0.8,validation=0.1,test=0.1')
  block_files = blocks_lib.block_size(files)
  blocks = -(-files // block_files)
  start = time.perf_counter()
  with beam.Pipeline(runner='FnApiRunner') as p:
    stored = (p
              | 'BlockNumbers' >> beam.Create(range(blocks))
              | 'Synthesize' >> beam.Map(synthetic_block, files, block_files,
                                         config.dataset_dir))
    planned = graph.plan_stored_blocks(stored, config)
    rate = planned['rate']
    layouts = (planned['windows']
               | 'PlanLayout' >> graph.PlanLayouts(
                   {'one': (config, layout_lib.ExampleSize(130000))})
               | 'OnlyOne' >> beam.Map(lambda layouts: layouts['one']))
    (stored
     | 'AssignWindowsToShards' >> beam.FlatMap(
         lambda stored, rate, layouts: (
             shard for shard, _ in planning.stored_block_refs(
                 stored, config, rate, layouts)),
         beam.pvalue.AsSingleton(rate), beam.pvalue.AsSingleton(layouts))
     | 'CountPerShard' >> beam.combiners.Count.PerElement()
     | 'Total' >> beam.Map(lambda kv: kv[1])
     | 'Sum' >> beam.CombineGlobally(sum)
     | 'Check' >> beam.Map(_check, files * (CLIP_FRAMES // 16000)))
  return {'files': files, 'blocks': blocks,
          'seconds': time.perf_counter() - start}


def _check(total, expected):
  assert total == expected, (total, expected)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--files', default='100000,1000000')
  parser.add_argument('--one', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.one:
    print(json.dumps(run_one(args.one)))
    return
  from bench.procmon import run_measured
  print('| files | blocks | wall s | peak MB (process tree) |')
  print('|---|---|---|---|')
  for files in map(int, args.files.split(',')):
    wall, peak, out = run_measured(
        [sys.executable, '-m', 'bench.plan_scale', '--one', str(files)])
    result = json.loads(out.strip().splitlines()[-1])
    print(f'| {files:,} | {result["blocks"]:,} | {wall:.1f} | '
          f'{peak / 1e6:.0f} |')


if __name__ == '__main__':
  main()
