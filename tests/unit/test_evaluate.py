import pytest

from ptb_harness.core.records import check_metrics


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"accuracy": 0.5}', ""),
        (b'{"accuracy": 0, "stderr": 0.1}', ""),
        (b'{"accuracy": 1}', ""),
        (b'{"accuracy": 0.5', "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[0.5]", "not a JSON object"),
        (b'{"acc": 0.5}', "no numeric 'accuracy'"),
        (b'{"accuracy": "0.5"}', "no numeric 'accuracy'"),
        (b'{"accuracy": true}', "no numeric 'accuracy'"),
        (b'{"accuracy": null}', "no numeric 'accuracy'"),
        (b'{"accuracy": 1.5}', "outside [0, 1]"),
        (b'{"accuracy": -0.1}', "outside [0, 1]"),
        (b'{"accuracy": NaN}', "outside [0, 1]"),
    ],
)
def test_check_metrics(data, problem):
    metrics, why = check_metrics(data)
    assert (metrics is None) == bool(problem)
    assert problem in why
