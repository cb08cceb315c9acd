"""Examples made and written: shards, Beam's sink, a sweep's variants, the
run's statistics and its last step."""
