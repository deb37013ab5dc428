"""A served turn laid out as spans from the events it sent: the cases a live server rarely shows on demand."""

from __future__ import annotations

from docpilot.api.schema import DoneEvent, RefusalEvent, TimingEvent
from docpilot.telemetry.turns import TurnTimes, turn_spans


def _timing(model_ms: float = 0.0) -> TimingEvent:
    return TimingEvent(embed_ms=1.0, retrieve_ms=2.0, model_ms=model_ms, total_ms=5.0)


def test_a_gate_refusal_has_no_model_span():
    turn = TurnTimes(arrived=100.0)
    turn.saw("retrieval", None, 100.004)
    turn.saw("refusal", RefusalEvent(refused_by="gate", cause="not-answerable"), 100.004)
    turn.saw("timing", _timing(), 100.005)
    turn.saw("done", DoneEvent(request_id="r"), 100.005)
    turn.ended = 100.005
    spans = turn_spans(turn, request_id="r", model="m")
    assert [span.name for span in spans] == ["turn", "embed", "retrieve"]
    assert spans[0].attributes["docpilot.refused_by"] == "gate" and spans[0].error is None
    assert spans[2].end_ns - spans[2].start_ns == 2_000_000 and spans[1].end_ns == spans[2].start_ns


def test_a_turn_whose_client_went_away_is_the_turn_alone_with_an_error():
    turn = TurnTimes(arrived=100.0)
    turn.saw("retrieval", None, 100.004)
    turn.error, turn.ended = "cancelled", 100.2  # what ``TurnTracer.traced`` notes when the stream is cut
    spans = turn_spans(turn, request_id="r", model="m")
    assert [span.name for span in spans] == ["turn"]
    assert spans[0].error == "cancelled" and spans[0].kind == "server"


def test_usage_and_finish_reason_reach_the_turn():
    turn = TurnTimes(arrived=100.0)
    turn.saw("done", DoneEvent(request_id="r", finish_reason="stop",
                               usage={"prompt_tokens": 12, "completion_tokens": 3}), 100.1)
    (span,) = turn_spans(turn, request_id="r", model="m")
    assert span.attributes["gen_ai.usage.input_tokens"] == 12 and span.attributes["gen_ai.usage.output_tokens"] == 3
    assert span.attributes["docpilot.finish_reason"] == "stop"
