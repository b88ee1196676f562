"""Planner implementations (registered by name in :data:`llm_planner.base.PLANNERS`)."""
