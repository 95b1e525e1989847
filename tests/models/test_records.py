"""How response records map to model calls: final.json and the report count
with the same rule, so their tallies can be compared."""

from kernelsweep.study.layout import Key
from kernelsweep.models.records import model_calls, token_usage
from kernelsweep.stages.final import finalize


def _record(call_id, status="ok", prompt=10, completion=5, latency=1.5, role="generator"):
    return {"schema": "kernelsweep/response/1", "status": status, "call_id": call_id, "role": role,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}, "latency_s": latency}


def test_batched_candidates_are_one_call_and_stopped_turns_none():
    records = [_record("a"), _record("a"), _record("a"), _record("b", role="feedback"),
               _record("s", status="stopped", prompt=None, completion=None, latency=None),
               _record("s", status="stopped", prompt=None, completion=None, latency=None)]
    calls = model_calls(records)
    assert [r["call_id"] for r in calls] == ["a", "b"]


def test_records_without_call_id_each_count():
    assert len(model_calls([_record(None), _record(None), _record("x"), _record("x")])) == 3


def test_failed_calls_count_and_missing_usage_is_none():
    failed = _record("f", status="failed", prompt=None, completion=None, latency=None)
    assert model_calls([failed]) == [failed]
    assert token_usage(failed) == (None, None)
    assert token_usage({"usage": None}) == (None, None)


def test_final_tallies_follow_the_same_rule():
    responses = [_record("a", prompt=100, completion=40, latency=2.0), _record("a", prompt=100, completion=40,
                                                                                latency=2.0),
                 _record("t1", prompt=50, completion=None, latency=1.0)]
    roles = [_record("r", role="analyzer", prompt=7, completion=3, latency=0.5)]
    final = finalize(Key("m", "zero_shot", "L1-001", 0), {"best": None}, responses, [], roles)
    assert final["llm_calls"] == 3
    assert final["tokens"] == {"prompt": 157, "completion": 43}
    assert final["generation_s"] == 3.5
