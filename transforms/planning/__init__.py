"""Where every window goes, decided before any audio is read."""
