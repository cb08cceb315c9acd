"""The features of a batch of windows: numpy functions, no Beam."""
