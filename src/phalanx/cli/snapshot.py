"""``phalanx simulate --from-cluster``: the cluster's present state, taken through the live
client (see :mod:`phalanx.live.snapshot`). Connection problems are input errors: one line."""

from __future__ import annotations

import asyncio

from phalanx.api.errors import InputError
from phalanx.live.client import KubeClient
from phalanx.live.config import load_config
from phalanx.live.errors import LiveError
from phalanx.live.snapshot import take_snapshot


def cluster_documents(kubeconfig: str | None) -> list[tuple[str, object]]:
    async def take() -> list[tuple[str, object]]:
        config = load_config(kubeconfig)
        async with KubeClient(config) as client:
            return await take_snapshot(client)

    try:
        return asyncio.run(take())
    except LiveError as exc:
        raise InputError(
            f"cannot take the cluster's snapshot: {exc}", field="--from-cluster"
        ) from None
