"""Run ``async def`` tests of this folder with ``asyncio.run`` (no pytest plugin needed).

Each coroutine test gets a fresh event loop and a hard time limit, so a hung watch fails one
test instead of the run. Sync fixtures (``tmp_path``, ``monkeypatch``, ``caplog``) work as usual;
async set-up lives in :mod:`apiserver.harness` context managers instead of async fixtures.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

TEST_TIMEOUT = 20.0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), TEST_TIMEOUT))
    return True
