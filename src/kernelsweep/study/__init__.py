"""The study: its validated config and matrix, where each file of a run lives, results already on disk."""
