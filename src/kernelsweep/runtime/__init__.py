"""Processes and devices: child process groups, device slots, how a child loads task code."""
