"""The openai backend against real sockets on 127.0.0.1: retries and the
bounded wait for a server that gives no answer (an outage), refusals (a
result), unknown models, n per request or concurrent requests, completions mode."""

from __future__ import annotations

import socket
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from kernelsweep.models import GenerationFailed, InfrastructureFailure, ModelSetupError, load_backend
from kernelsweep.models.messages import render_plain_prompt
from kernelsweep.core.seeds import seed_for

from model_helpers import MESSAGES, chat_reply, make_key


def backend(url, **over):
    spec = {"backend": "openai", "base_url": url, "model": "m", "max_retries": 3, "backoff_s": 0.01,
            "timeout_s": 5, "wait_s": 0, **over}
    return load_backend("m", spec)


def call(b, n=1, **over):
    params = dict(n=n, temperature=0.0, top_p=1.0, max_tokens=16, seed=123, key=make_key())
    return b.generate(MESSAGES, **{**params, **over})


def test_refused_connection_fails_after_bounded_retries(refused_url):
    b = backend(refused_url, max_retries=2, backoff_s=0.05)
    start = time.monotonic()
    with pytest.raises(InfrastructureFailure) as err:
        call(b)
    elapsed = time.monotonic() - start
    assert "after 3 attempt(s)" in str(err.value) and "ConnectError" in str(err.value)
    assert f"no answer from the server at {refused_url}" in str(err.value)
    assert "rerun the same command" in str(err.value) and "models.m.base_url" in str(err.value)
    assert elapsed >= 0.05 + 0.1  # backoff 0.05 then 0.1: exponential


def test_500_then_200_is_retried(scripted_server):
    server = scripted_server((500, {"error": "busy"}), (503, {"error": "loading"}), chat_reply("ok"))
    (completion,) = call(backend(server.url))
    assert completion.text == "ok" and completion.finish_reason == "stop"
    assert completion.prompt_tokens == 11 and completion.completion_tokens == 7
    assert len(server.posts()) == 3
    assert completion.request == {"messages": MESSAGES} and completion.seed == 123


def test_429_is_retried(scripted_server):
    server = scripted_server((429, {"error": "slow down"}), chat_reply("ok"))
    assert call(backend(server.url))[0].text == "ok"


def test_always_500_gives_up_with_the_server_message(scripted_server):
    server = scripted_server((500, {"error": {"message": "CUDA out of memory"}}))
    with pytest.raises(InfrastructureFailure, match="after 4 attempt.*HTTP 500: CUDA out of memory"):
        call(backend(server.url))
    assert len(server.posts()) == 4


def test_wait_s_bounds_the_wait_for_a_server_that_stays_down(refused_url):
    b = backend(refused_url, max_retries=0, backoff_s=0.1, wait_s=1.0)
    start = time.monotonic()
    with pytest.raises(InfrastructureFailure, match="over 1 s: ConnectError"):
        call(b)
    elapsed = time.monotonic() - start
    assert 0.7 <= elapsed < 3.0  # waited about wait_s, then gave up


def test_a_server_that_comes_back_within_wait_s_is_waited_for():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from model_helpers import ScriptedServer, models_listing

    late = ScriptedServer([chat_reply("back")], models_listing("m"))
    late.httpd.server_close()  # re-created on the chosen port once the "restart" is over

    def restart():
        time.sleep(1.0)
        late.httpd = ThreadingHTTPServer(("127.0.0.1", port), late.httpd.RequestHandlerClass)
        late.httpd.serve_forever()

    threading.Thread(target=restart, daemon=True).start()
    try:
        start = time.monotonic()
        (completion,) = call(backend(f"http://127.0.0.1:{port}/v1", max_retries=0, backoff_s=0.1, wait_s=30))
        assert completion.text == "back" and time.monotonic() - start >= 0.9
    finally:
        time.sleep(0.1)
        late.httpd.shutdown()
        late.httpd.server_close()


def test_invalid_json_is_an_outage_not_a_result(scripted_server):
    server = scripted_server(lambda request: (200, "<html>bad gateway</html>"))
    with pytest.raises(InfrastructureFailure, match="invalid JSON"):
        call(backend(server.url))


def test_unknown_model_in_listing_is_a_setup_error(scripted_server):
    server = scripted_server(chat_reply("never sent"), served=("Qwen/Qwen2.5-Coder-7B-Instruct",))
    with pytest.raises(ModelSetupError, match="does not serve 'm'.*Qwen/Qwen2.5-Coder-7B-Instruct"):
        call(backend(server.url))
    assert server.posts() == []


def test_404_on_the_call_is_a_setup_error(scripted_server):
    # A server without a model listing that answers 404 for an unknown model.
    server = scripted_server((404, {"error": {"message": "The model `m` does not exist."}}), served=None)
    with pytest.raises(ModelSetupError, match="404.*does not exist.*unknown model 'm'"):
        call(backend(server.url))
    assert len(server.posts()) == 1  # not retried


def test_400_is_a_failed_call_without_retries(scripted_server):
    server = scripted_server((400, {"error": {"message": "prompt is longer than the context"}}))
    with pytest.raises(GenerationFailed, match="HTTP 400: prompt is longer"):
        call(backend(server.url))
    assert len(server.posts()) == 1


def test_rejected_key_names_the_variable(scripted_server, monkeypatch):
    monkeypatch.setenv("KS_TEST_KEY", "secret")
    server = scripted_server((401, {"error": "bad key"}))
    server.listing = (401, {"error": "bad key"})
    with pytest.raises(ModelSetupError, match=r"rejected the credentials.*\$KS_TEST_KEY"):
        call(backend(server.url, api_key_env="KS_TEST_KEY"))
    assert server.requests[0]["auth"] == "Bearer secret"


def test_missing_key_variable_is_a_setup_error(monkeypatch):
    monkeypatch.delenv("KS_TEST_KEY", raising=False)
    with pytest.raises(ModelSetupError, match="KS_TEST_KEY"):
        backend("http://127.0.0.1:9/v1", api_key_env="KS_TEST_KEY")


def test_n_in_one_request(scripted_server):
    server = scripted_server(chat_reply("a", "b", "c", usage=(10, 30)))
    completions = call(backend(server.url), n=3, temperature=0.7)
    assert [c.text for c in completions] == ["a", "b", "c"] and [c.index for c in completions] == [0, 1, 2]
    (post,) = server.posts()
    assert post["body"]["n"] == 3 and post["body"]["seed"] == 123 and post["body"]["temperature"] == 0.7
    # A total over three choices is not a per-candidate count.
    assert all(c.completion_tokens is None and c.meta["call_completion_tokens"] == 30 for c in completions)


def test_server_ignoring_n_is_reported(scripted_server):
    server = scripted_server(chat_reply("only one"))
    with pytest.raises(ModelSetupError, match="got 1.*n_per_request: false"):
        call(backend(server.url), n=2, temperature=0.7)


def test_concurrent_requests_with_per_candidate_seeds(scripted_server):
    def echo_seed(request):
        return chat_reply(f"seed {request['body']['seed']}")

    server = scripted_server(echo_seed)
    key = make_key()
    first = seed_for(key, 0)
    completions = call(backend(server.url, n_per_request=False), n=3, temperature=0.7, seed=first, key=key)
    expected = [seed_for(key, i) for i in range(3)]
    assert [c.seed for c in completions] == expected and len(set(expected)) == 3
    assert [c.text for c in completions] == [f"seed {s}" for s in expected]
    assert all("n" not in p["body"] for p in server.posts())


def test_completions_mode_sends_the_rendered_prompt(scripted_server):
    server = scripted_server((200, {"choices": [{"index": 0, "text": "x = 1", "finish_reason": "length"}],
                                    "usage": {"prompt_tokens": 5, "completion_tokens": 16}}))
    (completion,) = call(backend(server.url, chat=False))
    (post,) = server.posts()
    assert post["path"] == "/v1/completions" and post["body"]["prompt"] == render_plain_prompt(MESSAGES)
    assert "messages" not in post["body"]
    assert completion.request == {"prompt": render_plain_prompt(MESSAGES)}
    assert (completion.text, completion.finish_reason) == ("x = 1", "length")


@pytest.mark.parametrize("spec, message", [
    ({"base_url": "localhost:8000/v1"}, "must start with http"),
    ({"base_url": None}, "base_url is required"),
    ({"chat": "auto"}, "chat must be true or false"),
    ({"server": {"start": True}}, "needs server.checkpoint"),
    ({"max_retries": -1}, "max_retries must be >= 0"),
    ({"sever": {}}, "unknown key"),
    ({"server": {"start": True, "checkpoint": "x", "threads": 0}}, "threads must be >= 1"),
])
def test_bad_specs_are_explained(spec, message):
    with pytest.raises(ModelSetupError, match=message):
        backend("http://127.0.0.1:9/v1", **spec)
