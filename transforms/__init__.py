"""DoFns, CombineFns and the pure numpy functions they call."""
