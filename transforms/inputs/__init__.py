"""What the corpus is: its files and rows listed, labelled and probed, and
the audio decoded."""
