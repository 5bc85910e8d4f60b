"""Resources, chosen from environment variables in this one place."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from prme_core.engine import MemoryClient
from prme_core.storage.url import DEFAULT_STORE_URL, STORE_URL_ENV


class PrmeStoreResource(dg.ConfigurableResource):
    """The domain store. Each step opens it, works and closes it, so a DuckDB file can be
    shared by the steps of a multiprocess run (they wait for each other's file lock)."""

    store_url: str = DEFAULT_STORE_URL

    @contextmanager
    def client(self) -> Iterator[MemoryClient]:
        with MemoryClient(self.store_url) as client:
            yield client


def store_resource_from_env() -> PrmeStoreResource:
    """``PRME_STORE_URL`` if set, else the embedded DuckDB default."""
    return PrmeStoreResource(store_url=os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL)
