"""The HTTP client decodes candidates answers through a memo of the elements
earlier answers held: every answer must still decode to exactly what a
plain decode gives, elements seen before must be the objects decoded then,
and a body that is not a candidates answer must fail as a plain decode
fails."""
from __future__ import annotations

import msgspec
import pytest

from billeting.placement_client.answer_memo import CandidatesDecoder
from billeting.placement_client.model import Candidates

_plain = msgspec.json.Decoder(Candidates).decode


def _host(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def _answer(used: dict[int, int], hosts=range(6), vcpus: int = 2) -> bytes:
    """A flat fleet's answer; one host with a child provider and a trait."""
    requests = [{"allocations": {_host(h): {"resources": {"VCPU": vcpus, "MEMORY_MB": 512}}},
                 "mappings": {"": [_host(h)]}} for h in hosts]
    summaries = {_host(h): {"resources": {"VCPU": {"capacity": 16, "used": used.get(h, 0)},
                                          "MEMORY_MB": {"capacity": 8192, "used": 0}},
                            "traits": ["HW_CPU_X86_AVX2"] if h % 2 else [],
                            "parent_provider_uuid": None, "root_provider_uuid": _host(h)}
                 for h in hosts}
    requests.append({"allocations": {_host(0): {"resources": {"VCPU": vcpus}},
                                     _host(100): {"resources": {"SRIOV_NET_VF": 1}}},
                     "mappings": {"": [_host(0)], "_NIC": [_host(100)]}})
    summaries[_host(100)] = {"resources": {"SRIOV_NET_VF": {"capacity": 8, "used": 0}}, "traits": [],
                             "parent_provider_uuid": _host(0), "root_provider_uuid": _host(0)}
    return msgspec.json.encode({"allocation_requests": requests, "provider_summaries": summaries})


def test_every_answer_decodes_as_a_plain_decode_does():
    decoder = CandidatesDecoder()
    answers = [_answer({}), _answer({}), _answer({2: 4}), _answer({2: 4, 5: 2}, hosts=range(3, 9)),
               _answer({}, vcpus=4), _answer({})]
    for body in answers:
        memo = decoder.decode(body, "1.39")
        assert memo == msgspec.structs.replace(_plain(body), version="1.39")
        # the same order of requests and of summary keys as the wire
        assert list(memo.provider_summaries) == list(_plain(body).provider_summaries)


def test_elements_seen_before_are_reused_and_changed_ones_are_not():
    decoder = CandidatesDecoder()
    first = decoder.decode(_answer({}))
    second = decoder.decode(_answer({2: 4}))
    for h in (0, 1, 3, 4, 5):
        assert second.provider_summaries[_host(h)] is first.provider_summaries[_host(h)]
    changed = second.provider_summaries[_host(2)]
    assert changed is not first.provider_summaries[_host(2)]
    assert changed.resources["VCPU"].used == 4
    assert all(a is b for a, b in zip(first.allocation_requests, second.allocation_requests))
    other_flavor = decoder.decode(_answer({}, vcpus=4))
    assert not any(a is b for a, b in zip(first.allocation_requests, other_flavor.allocation_requests))


def test_a_full_memo_is_emptied_and_answers_stay_right():
    decoder = CandidatesDecoder(max_entries=10)
    for round_ in range(5):
        body = _answer({h: round_ for h in range(6)}, hosts=range(round_, round_ + 6), vcpus=1 + round_)
        assert decoder.decode(body) == _plain(body)
        assert len(decoder) <= 2 * (10 + 8)  # emptied before an answer once over the bound


@pytest.mark.parametrize("body", [
    b"not json",
    b"[]",
    b'{"allocation_requests": [], "provider_summaries": {"x": {"resources": {"VCPU": {"capacity": "a"}}}}}',
    b'{"allocation_requests": [{"allocations": 5}], "provider_summaries": {}}',
    b'{"provider_summaries": {}}',
])
def test_a_body_that_is_not_an_answer_fails_as_a_plain_decode_does(body):
    with pytest.raises(msgspec.DecodeError) as plain:
        _plain(body)
    with pytest.raises(type(plain.value)):
        CandidatesDecoder().decode(body)
