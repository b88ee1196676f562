"""The domain-generic hierarchy: domains (grounding, skills, acceptance) and the loop that runs any of them."""
