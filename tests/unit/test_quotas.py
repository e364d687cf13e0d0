"""security/quotas.py on its own: Kafka's precedence of quota entities, whose budget a client shares, the
sampled rate and the throttle time it gives, and DescribeClientQuotas filters."""

from __future__ import annotations

import asyncio

import pytest

from odradek.security.quotas import (DEFAULT, FETCH, PRODUCE, REQUEST, ClientQuotas, QuotaEntity, QuotaFile,
                                   SampledRate, validate_value)

ENTITIES = [QuotaEntity("u", "c"), QuotaEntity("u", DEFAULT), QuotaEntity("u", None), QuotaEntity(DEFAULT, "c"),
            QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(DEFAULT, None), QuotaEntity(None, "c"),
            QuotaEntity(None, DEFAULT)]


@pytest.mark.parametrize("most_specific", range(len(ENTITIES)))
def test_the_most_specific_entity_setting_the_key_wins(most_specific):
    quotas = ClientQuotas()
    # every entity from the expected winner down sets the key, with its position as the value
    quotas.replace({entity: {PRODUCE: 1000.0 * (i + 1)} for i, entity in enumerate(ENTITIES) if i >= most_specific})
    # a second key set only on the least specific entity is resolved on its own
    quotas.set_entity(QuotaEntity(None, DEFAULT), {PRODUCE: 1000.0 * len(ENTITIES), FETCH: 7.0})
    bound = 1000.0 * (most_specific + 1)
    # recording one second's worth of ten windows is exactly at the bound: no throttle
    assert quotas.record(PRODUCE, "u", "c", bound * 10, 0) == 0
    assert quotas.record(PRODUCE, "u", "c", bound, 0) > 0
    assert quotas.record(FETCH, "u", "c", 70, 0) == 0
    assert quotas.record(FETCH, "u", "c", 1, 0) > 0
    # another user and client are untouched by the (u, c)-specific entities
    if most_specific == 0:
        assert quotas.record(PRODUCE, "v", "d", bound * 10, 0) == 0


def test_clients_share_the_budget_of_the_entity_that_matched():
    quotas = ClientQuotas()
    quotas.replace({QuotaEntity("u", None): {PRODUCE: 100.0}, QuotaEntity(None, DEFAULT): {PRODUCE: 100.0}})
    # (u, -): one budget for all of u's clients
    assert quotas.record(PRODUCE, "u", "a", 1000, 0) == 0
    assert quotas.record(PRODUCE, "u", "b", 1, 0) > 0
    # (-, <default>): a budget per client id
    assert quotas.record(PRODUCE, "v", "a", 1000, 0) == 0
    assert quotas.record(PRODUCE, "w", "b", 1000, 0) == 0
    assert quotas.record(PRODUCE, "x", "a", 1, 0) > 0


def test_sampled_rate_counts_at_least_all_but_one_window_and_forgets_old_samples():
    rate = SampledRate(window_ms=1000, samples=11)
    rate.record(5000, 0)
    assert rate.per_second(0) == 500.0  # 5000 over ten windows, not over a sliver of time
    rate.record(5000, 20_000)  # the first sample is long gone
    assert rate.per_second(20_000) == 500.0
    rate.record(10_000, 21_000)
    # 15000 over ten windows = 1500/s; 500 over the bound of 1000 means half the span again
    assert rate.throttle_ms(1000.0, 21_000) == 5000
    assert rate.throttle_ms(100.0, 21_000) == 11_000  # capped at the whole window


def test_forget_idle_drops_rates_with_nothing_left():
    quotas = ClientQuotas(window_ms=1000, samples=3)
    quotas.replace({QuotaEntity(None, DEFAULT): {REQUEST: 50.0}})
    quotas.record(REQUEST, "u", "c", 1.0, 0)
    quotas.forget_idle(1000)
    assert quotas._rates
    quotas.forget_idle(10_000)
    assert not quotas._rates


def test_describe_filters():
    quotas = ClientQuotas()
    quotas.replace({QuotaEntity("alice", None): {PRODUCE: 1.0}, QuotaEntity("alice", DEFAULT): {FETCH: 2.0},
                    QuotaEntity(None, "etl"): {REQUEST: 3.0}, QuotaEntity(DEFAULT, None): {PRODUCE: 4.0}})
    assert set(quotas.describe([], strict=False)) == set(quotas.configs())
    assert set(quotas.describe([("user", 0, "alice")], strict=False)) == {QuotaEntity("alice", None),
                                                                          QuotaEntity("alice", DEFAULT)}
    assert set(quotas.describe([("user", 0, "alice")], strict=True)) == {QuotaEntity("alice", None)}
    assert set(quotas.describe([("user", 1, None)], strict=False)) == {QuotaEntity(DEFAULT, None)}
    assert set(quotas.describe([("user", 2, None)], strict=True)) == {QuotaEntity("alice", None),
                                                                      QuotaEntity(DEFAULT, None)}
    assert set(quotas.describe([("client-id", 1, None), ("user", 2, None)], strict=True)) == {
        QuotaEntity("alice", DEFAULT)}


@pytest.mark.parametrize("key, value, ok", [
    (PRODUCE, 1024.0, True), (PRODUCE, 1.5, False), (PRODUCE, 0.0, False), (REQUEST, 0.5, True),
    (REQUEST, float("nan"), False), (FETCH, float("inf"), False), ("controller_mutation_rate", 1.0, False),
])
def test_values_are_checked(key, value, ok):
    assert (validate_value(key, value) is None) == ok


def test_the_quota_file_round_trips(tmp_path):
    quotas = ClientQuotas()
    file = QuotaFile(tmp_path)
    quotas.persist = file.persist
    asyncio.run(quotas.alter({QuotaEntity("a/b", DEFAULT): {PRODUCE: 10.0}, QuotaEntity(None, "c"): {FETCH: 5.0}}))
    asyncio.run(quotas.alter({QuotaEntity(None, "c"): {FETCH: None}}))
    loaded = ClientQuotas()
    file.load_into(loaded)
    assert loaded.configs() == {QuotaEntity("a/b", DEFAULT): {PRODUCE: 10.0}}
    assert loaded.enabled
