"""What every stage runs on: the output folder's lock, the forked worker
processes, file system calls, memory, metrics and the phase timeline."""
