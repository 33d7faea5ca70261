"""Policies as plugins: each module is one policy and imports no other plugin.

``gang`` (validity and readiness of gangs), ``priority`` (unit order), ``predicates``
(filters: resources, selector, affinity, taints, cordons, pod count), ``nodeorder``
(scores: binpack, least-allocated). The registry in :mod:`phalanx.policies` names them.
"""
