"""`react`: the tool-using kernel agent, a fifth strategy on the study matrix.

One trajectory per cell: the model reasons, calls one of the tools
(kernelsweep.agent.tools), reads the observation, and goes on until the
trajectory ends (goal met, a guard stops it, or a limit). Every step is a
record of the cell's trace (kernelsweep.core.react_trace), written as it happens;
the loop's state is rebuilt from those records (kernelsweep.agent.state), so a
killed cell resumes without repeating a model call.

    protocol.py   the text protocol (base models, replay) and the native tool schemas
    workspace.py  the agent's own folder: confined write / edit / view
    sandbox.py    run(path): the agent's script in its own process group, time-limited
    tools.py      the tool set of a method, dispatch, observations
    ncu.py        Nsight Compute metrics for profile() on CUDA when ncu is on PATH
    guards.py     repeat_error, force_profile, regression_lock, max_submissions
    state.py      the loop's state as a fold over trace records
    model.py      one model reply: text protocol or native tool calls
    loop.py       the loop: resume, call, dispatch, guard, end
    cell.py       `kernelsweep react`: one study cell, its files and final.json
"""
