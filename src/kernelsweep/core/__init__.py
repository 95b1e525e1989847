"""Shared vocabulary every layer uses: verdict categories, timing metrics, seeds, shapes, file writing, the config schema."""
