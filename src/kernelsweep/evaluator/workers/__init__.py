"""Everything in this package runs inside a worker process, never in the
harness's own process: frame (the private link to the parent and the
command loop), seeding (seeds, inputs made on the device, precision),
trees (output trees, saving, aliasing), machine (device, host limits, device
facts), mathmodes (torch's global switches), guard (what a candidate could
patch), failures (exception descriptions), clock (the timing protocol), buildhooks
(extension builds into the candidate's own build directory), kernels and
perturb (is a custom kernel launched, and does the output depend on it),
and one module per worker: reference, candidate, compile, baseline.
launch.py starts a worker inside its namespaces (standard library only).
The parent side lives one level up (evaluation, sandbox, confine, compare,
classify, cheats)."""
