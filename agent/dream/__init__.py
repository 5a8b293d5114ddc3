"""DeepPavlov Dream on Chorus: dp-agent's ``pipeline_conf.json``, formatters and services as
they are.

A Dream distribution's pipeline file is recognised by its content (:func:`is_dp_agent_config`)
and run by :class:`agent.dream.executor.DreamExecutor` with dp-agent's semantics: formatters
build each request from the dp-agent dialog dict, ``state_manager_method`` says where the
answer goes, tags make selectors, responders and last-chance / timeout answers. The state
it writes is Chorus's, through the same confined slots and the same one-write-per-turn store.
See docs/dream.md.
"""
