"""Actions: the algorithms a cycle runs, in order, over one session."""
