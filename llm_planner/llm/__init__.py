"""Language-model backends for the LLM planners: an embedded llama.cpp model and any OpenAI-compatible
server, behind one small interface (:class:`~llm_planner.llm.backend.LLMBackend`)."""
