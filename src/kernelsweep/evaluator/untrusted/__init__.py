"""The untrusted side of the evaluator's trust boundary: everything in this
package runs inside a worker process, next to code the harness did not write
(the candidate's, confined; or the task's reference), never in the harness's
own process. The parent (the trusted side: evaluator/ outside this package)
never imports it; it starts these modules by name (sandbox.Worker) and reads
what comes back as data.

frame (the private link to the parent and the command loop), seeding (seeds,
inputs made on the device, precision), trees (output trees, saving,
aliasing), machine (device, host limits, device facts), mathmodes (torch's
global switches), guard (what a candidate could patch), failures (exception
descriptions), clock (the timing protocol), buildhooks (extension builds into
the candidate's own build directory), kernels and perturb (is a custom kernel
launched, and does the output depend on it), and one module per worker:
reference, candidate, compile, ahead, baseline. launch.py starts a worker
inside its namespaces (standard library only). Of the parent's modules these
import only the pure ones: settings, compare, diagnostics."""
