"""Post-training the LLM planner (issue 14; docs/posttrain.md).

* :mod:`llm_planner.posttrain.vocab`: the per-map vocabulary of what places are for (``sim/maps/vocab/``).
* :mod:`llm_planner.posttrain.instructions`: generated (instruction, gold task) pairs, split train / val /
  test_gen by template and by vocabulary; ``python -m llm_planner.posttrain.instructions`` writes a dataset.
* :mod:`llm_planner.posttrain.reward`: the execution reward of an answer, and a TRL reward function.
"""
