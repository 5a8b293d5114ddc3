"""The turn machinery both pipeline kinds share, as httpx's transports share
``_transports/base.py``: what the layers above ask of a pipeline and its executor
(:mod:`agent.turn.base`), the turn that passes through the executor and its result
(:mod:`agent.turn.value`), the schedule a turn's services run on, the trace of their calls,
the storage limits of a turn's outputs, what both kinds' files say alike, and the arms of
an experiment. Chorus's own kind (:mod:`agent.pipeline`) and dp-agent's (:mod:`agent.dream`)
sit side by side on it and never import each other; :mod:`agent.kinds`, above both, tells
them apart.
"""
