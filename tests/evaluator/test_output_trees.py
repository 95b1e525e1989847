"""Outputs taken apart in the workers are freed as soon as the worker drops
them: no reference cycle may hold them until Python's cyclic collector runs,
which a timing loop seldom triggers (on the H200, honest candidates with
4 GiB outputs ran out of device memory after ~20 timed calls)."""

from __future__ import annotations

import gc
import weakref

import torch

from kernelsweep.evaluator.untrusted import trees


def test_flattening_an_output_leaves_no_cycle_holding_it():
    out = torch.ones(4)
    nested = {"b": [out, (1, 2.0)], "a": None}
    gone = weakref.ref(out)
    gc.disable()
    try:
        gc.collect()
        structure, leaves = trees.flatten_output(nested)
        assert structure == "dict[a:None,b:list[T,tuple[int,float]]]" and leaves[0] is out
        del structure, leaves, nested, out
        assert gone() is None, "the output outlived the worker's last reference to it"
        assert gc.collect() == 0, "flatten_output left cyclic garbage"
    finally:
        gc.enable()


def test_sampled_outputs_leave_no_cycle():
    gc.disable()
    try:
        gc.collect()
        out = torch.arange(10.0)
        sampled = trees.sampled_output(*trees.flatten_output(out), sample_seed=3)
        assert sampled["leaves"][0].shape == (10,)
        del sampled, out
        assert gc.collect() == 0
    finally:
        gc.enable()
