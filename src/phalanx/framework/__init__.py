"""The scheduling framework: one Session per cycle, Statements, plugin protocols.

File map: ``plugin`` (hook Protocols and how votes combine), ``unit`` (what an action places:
a gang, or a lone pod for gang-unaware policies), ``statement`` (tentative operations with an
exact undo), ``session`` (snapshot, plugin dispatch, node selection, results), ``explain``
(why a unit waits, with numbers).
"""
