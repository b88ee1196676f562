"""High-level planners (plan schema, graph / LLM / SoRB planners). Arrives with the hierarchy issues;
for now the package exists so the distribution layout and extras are in place."""
