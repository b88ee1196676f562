"""A vision-language-action planner trained here: front camera + instruction -> the next pick-and-place step."""
